"""The `deepgreen` process's start and end: Ctrl-C exits 130 from the first line of an entry
module (`python -m deepgreen_audit`, `python -m deepgreen_audit.cli`, the `deepgreen` script).

Python turns Ctrl-C into KeyboardInterrupt wherever it lands, and while the program starts
(argparse, then pandas and pyarrow behind the verbs) no handler of ours is there to catch it:
Python would print a traceback.  So an entry module's first act, before anything heavy is
imported, is `quiet_interrupt()`: a handler that says "interrupted" in one line and exits 130;
`cli.main` raises KeyboardInterrupt instead while a verb runs (`interrupts_raise`), so that a
write in progress unwinds and removes its staging folder, and puts this handler back when the
verb ends.  Importing this module installs nothing.
"""

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType


def _interrupted(signum, frame) -> None:
    os.write(2, b"deepgreen: interrupted; nothing was half-written\n")
    os._exit(130)


def quiet_interrupt() -> None:
    """From now on Ctrl-C ends the process with one line and exit status 130."""
    signal.signal(signal.SIGINT, _interrupted)


#: the seconds after which an interrupt Python dropped is sent again (`interrupts_raise`)
_RESEND_AFTER_S = 0.01


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """While a command runs, Ctrl-C raises KeyboardInterrupt and SIGTERM `Terminated`, so
    that both unwind (removing staging folders) into one line; the handlers the caller had
    come back after.

    Python drops an exception raised where nobody can receive it (a weakref callback, an
    at-fork hook, a `__del__`: "Exception ignored in ..." on stderr), and an interrupt that
    lands in such code would be lost: the command would go on as if never interrupted.  So
    while the command runs, the unraisable hook sends a dropped interrupt again a moment later,
    once the main thread has left that code."""
    from deepgreen_audit.errors import Terminated

    def raise_terminated(signum, frame) -> None:
        raise Terminated()

    handled: dict[signal.Signals, tuple[Callable[[int, FrameType | None], object], type[BaseException]]] = {
        signal.SIGINT: (signal.default_int_handler, KeyboardInterrupt),
        signal.SIGTERM: (raise_terminated, Terminated)}
    dropped: list[signal.Signals] = []

    def unraisable(hook_args) -> None:
        signum = next((signum for signum, (_, kind) in handled.items()
                       if type(hook_args.exc_value) is kind), None)
        if signum is None:
            previous_hook(hook_args)
        else:
            dropped.append(signum)
            signal.setitimer(signal.ITIMER_REAL, _RESEND_AFTER_S)

    def send_again(_signum, frame) -> None:
        first = dropped[0] if dropped else None
        dropped.clear()
        if first is not None and running:  # (not once the command has ended: its status stands)
            handled[first][0](first, frame)

    previous = {signum: signal.getsignal(signum) for signum in (*handled, signal.SIGALRM)}
    previous_hook = sys.unraisablehook
    for signum, (raise_it, _) in handled.items():
        signal.signal(signum, raise_it)
    signal.signal(signal.SIGALRM, send_again)
    sys.unraisablehook = unraisable
    running = True
    try:
        yield
    finally:
        running = False
        # the timer first: an alarm already due still finds `send_again` (which does nothing
        # now), not a default handler that Python would report as "ignored due to race"
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():  # (Ctrl-C from here on: the caller's handler)
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook


def exit_with(status: int) -> None:
    """End the program with `status`.  After Ctrl-C, 130 by `os._exit`: once a
    KeyboardInterrupt has crossed C code that runs Python (an extension's import), the
    interpreter marks it unhandled and, at a normal exit, kills itself with SIGINT instead,
    although the command caught it and cleaned up.  Otherwise the command has ended and its
    status stands: Ctrl-C and SIGTERM during the interpreter's teardown are ignored (Python
    puts their default actions back for its last steps, which would end it by the signal)."""
    if status == 130:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(130)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    sys.exit(status)
