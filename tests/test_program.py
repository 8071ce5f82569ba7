"""The process's start and end: an interrupt is never lost, and never turns into a traceback.

Each case runs in a Python of its own: it sends itself the signal, which must not reach pytest.
Each sends it where CI once lost one (the hostile-input test's Ctrl-C at a random moment)."""

from __future__ import annotations

import pytest

from own_python import run_script


@pytest.mark.parametrize("drop, caught", [
    # a weakref callback: the columnar cache's, or the standard library's WeakKeyDictionary
    ("table = Table(); watch = weakref.ref(table, lambda _: signal.raise_signal(signal.SIGINT)); del table",
     "KeyboardInterrupt"),
    # an at-fork hook: logging's lock
    ("os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGTERM)); "
     "os.fork() == 0 and os._exit(0)", "Terminated")], ids=["weakref-callback", "at-fork-hook"])
def test_an_interrupt_that_python_drops_is_raised_again(drop, caught):
    """Python drops an exception raised where nobody can receive it ("Exception ignored in
    ..."): a Ctrl-C that landed in a weakref callback or an at-fork hook let `deepgreen audit`
    go on and exit 0.  Ctrl-C comes back as KeyboardInterrupt, SIGTERM as `Terminated`."""
    done = run_script(f"""
        import os, signal, time, weakref
        from deepgreen_audit.errors import Terminated
        from deepgreen_audit.program import interrupts_raise
        class Table: pass
        try:
            with interrupts_raise():
                {drop}
                for _ in range(2000):
                    time.sleep(0.001)
                print("went on")
        except {caught}:
            print("interrupted")
    """)
    assert done.stdout == "interrupted\n" and done.stderr == "", done.stderr


def test_another_dropped_exception_still_reaches_the_hook_that_was_there():
    done = run_script("""
        import weakref
        from deepgreen_audit.program import interrupts_raise
        class Table: pass
        with interrupts_raise():
            table = Table()
            watch = weakref.ref(table, lambda _: 1 / 0)
            del table
        print("done")
    """)
    assert done.stdout == "done\n" and "Exception ignored" in done.stderr and "ZeroDivisionError" in done.stderr


def test_handlers_come_back_after_the_command():
    done = run_script("""
        import signal, sys
        from deepgreen_audit.program import interrupts_raise, quiet_interrupt
        quiet_interrupt()
        before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
        with interrupts_raise():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        print((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before)
    """)
    assert done.stdout == "True\n", done.stderr


def test_once_the_command_has_ended_its_status_stands_through_the_teardown():
    """Python puts SIGINT's default action back for its teardown's last steps, so a Ctrl-C
    there ended the process by the signal, with no line (seen with `python -m
    deepgreen_audit.cli validate`).  Once the command has ended, its status stands: Ctrl-C in
    the teardown (here in an atexit callback) is ignored."""
    done = run_script("""
        import atexit, os, signal, time
        from deepgreen_audit.program import exit_with, quiet_interrupt
        quiet_interrupt()
        atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.05)))
        print("report written")
        exit_with(1)
    """)
    assert (done.returncode, done.stdout, done.stderr) == (1, "report written\n", "")
