"""A computation in a child process beside the caller's work (the audit's round-trip proof)."""

from __future__ import annotations

import os
import time

import pytest

from deepgreen_audit.package.beside import Beside, ChildFailed
from own_python import run_script


def _pid_and_square(n: int) -> tuple[int, int]:
    return os.getpid(), n * n


def test_the_value_is_computed_in_another_process_and_comes_back():
    beside = Beside(lambda: _pid_and_square(12))
    (pid, value), seconds = beside.result()
    assert value == 144 and pid != os.getpid() and seconds >= 0.0
    assert beside.seconds == seconds and beside.result()[0] == (pid, 144)  # collected once


def test_it_runs_while_the_caller_works():
    started = time.perf_counter()
    beside = Beside(lambda: time.sleep(0.5))
    time.sleep(0.5)  # the caller's own work, at the same time
    beside.result()
    assert time.perf_counter() - started < 0.9


def test_an_exception_in_the_child_reaches_the_caller_as_its_text():
    def broken():
        raise ValueError("the run table is not in run_id order")

    with pytest.raises(ChildFailed, match="ValueError: the run table is not in run_id order"):
        Beside(broken).result()


def test_a_child_that_dies_is_a_failure_not_a_value():
    with pytest.raises(ChildFailed, match="without a result"):
        Beside(lambda: os._exit(3)).result()


def test_cancel_stops_the_child_and_leaves_no_process_behind():
    beside = Beside(lambda: time.sleep(60))
    pid = beside._pid
    beside.cancel()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_without_fork_the_value_is_computed_by_result(monkeypatch):
    monkeypatch.delattr(os, "fork")
    beside = Beside(lambda: _pid_and_square(3))
    assert beside.result()[0] == (os.getpid(), 9)


@pytest.mark.parametrize("hook", ["before", "after_in_parent"])
def test_ctrl_c_during_the_fork_is_raised_once_the_fork_is_done_and_stops_the_child(hook):
    """os.fork runs Python at-fork hooks (logging's lock), and a KeyboardInterrupt raised in one
    is printed as "Exception ignored" and dropped: the program went on as if never interrupted
    (seen in CI: `deepgreen audit` exited 0 after Ctrl-C).  A hook here sends the signal."""
    done = run_script(f"""
        import os, signal, time
        import psutil
        from deepgreen_audit.package.beside import Beside
        os.register_at_fork({hook}=lambda: os.kill(os.getpid(), signal.SIGINT))
        try:
            Beside(lambda: time.sleep(60))
        except KeyboardInterrupt:
            print("interrupted", [c.pid for c in psutil.Process().children() if c.status() != "zombie"])
        else:
            print("not interrupted")
    """)
    assert done.returncode == 0 and done.stdout == "interrupted []\n", done.stderr
    assert "Exception ignored" not in done.stderr


def test_sigterm_during_the_fork_reaches_the_handler_that_was_in_place():
    """A held signal is raised again once the fork is done: SIGTERM, which the command line
    turns into an exception, is not lost either, and the child is stopped."""
    done = run_script("""
        import os, signal, sys, time
        import psutil
        from deepgreen_audit.package.beside import Beside
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
        os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGTERM))
        try:
            Beside(lambda: time.sleep(60))
        except SystemExit:
            print("terminated", [c.pid for c in psutil.Process().children() if c.status() != "zombie"])
    """)
    assert done.returncode == 0 and done.stdout == "terminated []\n", done.stderr


def test_ctrl_c_while_waiting_for_the_result_then_cancel_closes_the_pipe_once():
    """An interrupted read left the pipe's descriptor closed but still recorded, and `cancel`
    closed it again: "OSError: [Errno 9] Bad file descriptor" (seen in CI on Ctrl-C)."""
    done = run_script("""
        import os, signal, threading, time
        from deepgreen_audit.package.beside import Beside
        beside = Beside(lambda: time.sleep(60))
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            beside.result()
        except KeyboardInterrupt:
            beside.cancel()
            beside.cancel()
            print("cancelled")
    """)
    assert done.returncode == 0 and done.stdout == "cancelled\n", done.stderr
