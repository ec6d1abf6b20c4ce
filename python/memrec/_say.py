"""memrec's own messages, kept out of the program's output when `memrec record` runs it."""
import os
import sys


def under_memrec_record():
    return "MEMREC_RECORD_SESSION" in os.environ


def say(text):
    """Under `memrec record`, which prints it once the program has ended (the program's stderr stays its own);
    else on stderr."""
    if under_memrec_record():
        try:
            with open(os.environ["MEMREC_RECORD_SESSION"], "a") as f:
                f.write("!" + text.replace("\n", " ") + "\n")
            return
        except OSError:
            pass
    print("memrec: " + text, file=sys.stderr)
