"""A computation in a child process beside the caller's work (the audit's round-trip proof)."""

from __future__ import annotations

import os
import time

import pytest

from deepgreen_audit.package.beside import Beside, ChildFailed


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
