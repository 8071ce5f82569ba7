"""The `deepgreen` process's start and end: Ctrl-C exits 130 from the first line of an entry
module (`python -m deepgreen_audit`, `python -m deepgreen_audit.cli`, the `deepgreen` script).

Python turns Ctrl-C into KeyboardInterrupt wherever it lands, and while the program starts
(argparse, then pandas and pyarrow behind the verbs) no handler of ours is there to catch it:
Python would print a traceback.  So an entry module's first act, before anything heavy is
imported, is `quiet_interrupt()`: a handler that says "interrupted" in one line and exits 130;
`cli.main` raises KeyboardInterrupt instead while a verb runs, so that a write in progress
unwinds and removes its staging folder, and puts this handler back when the verb ends.
Importing this module installs nothing.
"""

import contextlib
import os
import signal
import sys


def _interrupted(signum, frame) -> None:
    os.write(2, b"deepgreen: interrupted; nothing was half-written\n")
    os._exit(130)


def quiet_interrupt() -> None:
    """From now on Ctrl-C ends the process with one line and exit status 130."""
    signal.signal(signal.SIGINT, _interrupted)


def exit_with(status: int) -> None:
    """End the program with `status`.  After Ctrl-C, 130 by `os._exit`: once a
    KeyboardInterrupt has crossed C code that runs Python (an extension's import), the
    interpreter marks it unhandled and, at a normal exit, kills itself with SIGINT instead,
    although the command caught it and cleaned up."""
    if status == 130:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(130)
    sys.exit(status)
