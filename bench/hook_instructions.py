"""Instructions that memrec's scope hooks cost per module call, counted by callgrind (a figure a shared machine's other
work leaves alone): 10 training steps of a chain of 100 one-op modules (an nn.Sequential of 99 `x * w`), recorded
with stacks, kernels, ops, device memory and owners off, once without the scope hooks (scopes=False) and once with
them; instrumentation is on for the 10 steps only. The program's thread is counted alone (the hooks' work, the same
from run to run) and with all threads (the drain thread writing the scopes too, which varies with when it wakes).
Usage: python3 bench/hook_instructions.py [--out /tmp/hook-instructions]   (needs valgrind)"""
import argparse
import os
import sys

import callgrind_runs

STEPS, CALLS = 10, 100


def child(scopes, out):
    import torch
    import memrec

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return x * self.w

    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[One() for _ in range(CALLS - 1)])
    x = torch.randn(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    memrec.start(os.path.join(out, "hooks.memrec"), scopes=scopes, owners=False, stacks="off", kernels=False,
                 ops=False, device_memory=False)

    def step():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    callgrind_runs.count_steps(step, 3, STEPS)
    memrec.stop()


def counted(scopes, out):
    """Instructions callgrind counted in the instrumented steps: (the program's thread, all threads)."""
    return callgrind_runs.instructions(__file__, scopes, out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="/tmp/hook-instructions")
    p.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        return child(args.child == "on", args.out)
    off, on = counted("off", args.out), counted("on", args.out)
    for what, i in (("program's thread", 0), ("all threads", 1)):
        print(f"{what}: scopes=False {off[i]:,} instructions, scopes=True {on[i]:,}: scope hooks "
              f"{(on[i] - off[i]) / (STEPS * CALLS):,.0f} instructions per module call (forward and backward)")


if __name__ == "__main__":
    main()
