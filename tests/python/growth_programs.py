"""Small training loops for `memrec growth`: four that grow the common ways and four that only warm up.

python3 growth_programs.py PATTERN --steps N --batch B --width W

Growing (each keeps B*W float32 a step, allocated on the line marked `# grows`):
  list   a list of tensors (predictions kept for later)
  loss   a metric kept with its graph, never backpropagated (tanh's output, saved for backward, stays with it)
  dict   a cache keyed by step, never evicted
  cat    a buffer concatenated onto every step
Steady:
  adam     Adam's state appears in the first step, then nothing more
  bounded  a cache of the last 4 steps
  accum    gradient accumulation over 4 micro-batches per optimizer step
  eval     an evaluation and a checkpoint saved every 4 steps
"""
import argparse
import collections
import io

import torch


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, width)
        self.fc2 = torch.nn.Linear(width, width)

    def forward(self, x):
        a = self.fc1(x)
        h = torch.tanh(a)  # grows: loss
        return self.fc2(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pattern")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--width", type=int, default=512)
    args = p.parse_args()
    torch.manual_seed(0)
    b, w = args.batch, args.width
    model = Net(w)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if args.pattern == "adam" else \
        torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []
    cache = {}
    recent = collections.OrderedDict()
    buf = torch.zeros(0, w)
    for step in range(args.steps):
        micro = 4 if args.pattern == "accum" else 1
        for _ in range(micro):
            x = torch.randn(b, w)
            out = model(x)
            loss = out.pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
        if args.pattern == "list":
            kept.append(torch.softmax(out.detach(), -1))  # grows: list
        elif args.pattern == "loss":
            kept.append(model(x).pow(2).mean())
        elif args.pattern == "dict":
            cache[step] = out.detach() * 2  # grows: dict
        elif args.pattern == "cat":
            buf = torch.cat([buf, out.detach()])  # grows: cat
        elif args.pattern == "bounded":
            recent[step] = out.detach() * 2
            if len(recent) > 4:
                recent.popitem(last=False)
        elif args.pattern == "eval" and step % 4 == 3:
            with torch.no_grad():
                model(torch.randn(4 * b, w)).sum()
            torch.save(model.state_dict(), io.BytesIO())
    print(f"{args.pattern}: {args.steps} steps, kept {len(kept) + len(cache)}, buffer {tuple(buf.shape)}")


if __name__ == "__main__":
    main()
