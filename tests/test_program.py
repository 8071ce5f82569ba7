"""The process's start and end: an interrupt is never lost, and never turns into a traceback.

Each case runs in a Python of its own: it sends itself the signal, which must not reach pytest.
Each sends it where CI once lost one (the hostile-input test's Ctrl-C at a random moment)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run_script(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_ctrl_c_that_python_drops_in_a_weakref_callback_is_raised_again():
    """Python drops an exception raised in a weakref callback ("Exception ignored in ..."): a
    Ctrl-C that lands in one (the columnar cache's, or the standard library's
    WeakKeyDictionary) let `deepgreen audit` go on and exit 0."""
    done = _run_script("""
        import signal, time, weakref
        from deepgreen_audit.program import interrupts_raise
        class Table: pass
        try:
            with interrupts_raise():
                table = Table()
                watch = weakref.ref(table, lambda _: signal.raise_signal(signal.SIGINT))
                del table
                for _ in range(2000):
                    time.sleep(0.001)
                print("went on")
        except KeyboardInterrupt:
            print("interrupted")
    """)
    assert done.stdout == "interrupted\n" and done.stderr == "", done.stderr


def test_sigterm_dropped_in_an_at_fork_hook_is_raised_again_as_terminated():
    done = _run_script("""
        import os, signal, time
        from deepgreen_audit.errors import Terminated
        from deepgreen_audit.program import interrupts_raise
        os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGTERM))
        try:
            with interrupts_raise():
                if os.fork() == 0:
                    os._exit(0)
                for _ in range(2000):
                    time.sleep(0.001)
                print("went on")
        except Terminated:
            print("terminated")
    """)
    assert done.stdout == "terminated\n" and done.stderr == "", done.stderr


def test_another_dropped_exception_still_reaches_the_hook_that_was_there():
    done = _run_script("""
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
    done = _run_script("""
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
    done = _run_script("""
        import atexit, os, signal, time
        from deepgreen_audit.program import exit_with, quiet_interrupt
        quiet_interrupt()
        atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.05)))
        print("report written")
        exit_with(1)
    """)
    assert (done.returncode, done.stdout, done.stderr) == (1, "report written\n", "")
