"""`python -m memrec ARGS` is `memrec ARGS`. `python -m memrec record [OPTIONS] train.py ARGS` records
`train.py ARGS` run by this interpreter (also `-m module` and `-c code`), as `python -m memray run` does."""
import os
import shutil
import sys

# `memrec record`'s options that take a value (cli/cmd_record.cpp): the program's words start after them.
_RECORD_VALUE_OPTIONS = {"-o", "--output", "--pickle", "--stacks", "--kernels", "--max-events", "--record"}


def executable(search_path=True):
    """The memrec command: the one in this package (pip's layout, the build tree's python/), else the one on PATH."""
    mine = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "memrec")
    if os.access(mine, os.X_OK):
        return mine
    found = shutil.which("memrec") if search_path else None
    if not found:
        sys.exit(f"memrec: the memrec command is neither at {mine} nor on PATH: install memrec with "
                 "`pip install --no-build-isolation .` from its clone (README)")
    return found


def with_this_python(args):
    """record [OPTIONS] [--] script.py ARGS -> record [OPTIONS] -- sys.executable script.py ARGS; others unchanged."""
    if args[:1] != ["record"]:
        return args
    i = 1
    while i < len(args) and args[i].startswith("-") and args[i] not in ("--", "-m", "-c"):
        i += 2 if args[i] in _RECORD_VALUE_OPTIONS else 1
    program = args[i + 1:] if args[i:i + 1] == ["--"] else args[i:]
    if not program or not (program[0].endswith(".py") or program[0] in ("-m", "-c")):
        return args
    return ["record", *args[1:i], "--", sys.executable, *program]


def console():
    """The `memrec` command pip puts on PATH: the package's own executable, with the arguments as they are."""
    os.execv(executable(search_path=False), ["memrec", *sys.argv[1:]])


def main():
    os.execv(executable(), ["memrec", *with_this_python(sys.argv[1:])])


if __name__ == "__main__":
    main()
