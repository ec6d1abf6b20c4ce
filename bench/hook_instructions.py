"""Instructions that memrec's scope hooks cost per module call, counted by callgrind (a figure a shared machine's other
work leaves alone): 10 training steps of a chain of 100 one-op modules (an nn.Sequential of 99 `x * w`), recorded
with stacks, kernels, ops, device memory and owners off, once without the scope hooks (scopes=False) and once with
them; instrumentation is on for the 10 steps only, all threads counted (the drain thread writing the scopes too).
Usage: python3 bench/hook_instructions.py [--out /tmp/hook-instructions]   (needs valgrind)"""
import argparse
import os
import re
import subprocess
import sys

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

    for _ in range(3):  # warm the caches of torch and the recorder
        step()
    control = ["callgrind_control", "-i"]
    subprocess.run(control + ["on", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)
    for _ in range(STEPS):
        step()
    subprocess.run(control + ["off", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)
    memrec.stop()


def counted(scopes, out):
    """Instructions callgrind counted in the instrumented steps."""
    profile = os.path.join(out, f"callgrind.{scopes}")
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={profile}",
                    sys.executable, os.path.abspath(__file__), "--child", scopes, "--out", out],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    with open(profile) as f:
        return int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="/tmp/hook-instructions")
    p.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        return child(args.child == "on", args.out)
    off, on = counted("off", args.out), counted("on", args.out)
    print(f"scopes=False {off:,} instructions, scopes=True {on:,}: scope hooks {(on - off) / (STEPS * CALLS):,.0f} "
          f"instructions per module call (forward and backward)")


if __name__ == "__main__":
    main()
