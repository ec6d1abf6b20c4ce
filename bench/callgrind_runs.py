"""Runs a bench script's child under callgrind, instrumentation off until the child turns it on
(`callgrind_control -i on`), one profile per thread; shared by hook_instructions.py, part_instructions.py and
python_frames.py."""
import glob
import os
import re
import subprocess
import sys


def instructions(script, key, out):
    """Runs `python3 script --child key --out out` under callgrind: (the program's thread, all threads)."""
    return instructions_of(script, ["--child", key, "--out", out], os.path.join(out, f"callgrind.{key}"))


def instructions_of(script, args, profile, env=None):
    """Runs `python3 script *args` under callgrind, its profiles at `profile`-<thread>: (the program's thread, all
    threads)."""
    for old in glob.glob(profile + "-*"):
        os.remove(old)
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
                    f"--callgrind-out-file={profile}", sys.executable, os.path.abspath(script), *args],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    totals = {}
    for path in glob.glob(profile + "-*"):  # one file per thread: -01 is the program's
        with open(path) as f:
            totals[path] = int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))
    return totals[profile + "-01"], sum(totals.values())


def collect(on):
    """In the child: turns callgrind's instrumentation on or off for this process."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], stdout=subprocess.DEVNULL,
                   check=True)


def count_steps(step, warm, steps):
    """In the child: runs `step` `warm` times uninstrumented (torch's and the recorder's caches), then `steps` times
    with callgrind's instrumentation on for this process."""
    for _ in range(warm):
        step()
    collect(True)
    for _ in range(steps):
        step()
    collect(False)
