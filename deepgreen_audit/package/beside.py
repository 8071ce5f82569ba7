"""A computation run in a child process beside the caller's own work.

The audit's round-trip proof reads every table once more, row by row in Python, and needs
nothing the rest of the audit computes: run in a forked child, it takes the second core while
the parent validates and runs the other checks (the audit's time is the longer of the two,
not their sum).  The child shares the parent's memory until either writes to it, holds no
more than the computation's own, and sends back one pickled result through a pipe.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO, Generic, NoReturn, TypeVar

T = TypeVar("T")


class ChildFailed(RuntimeError):
    """The child ended without a result (killed, or its computation raised): `reason` says how."""


#: the signals the command line turns into exceptions (Ctrl-C, and SIGTERM as `Terminated`)
_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C or SIGTERM that arrives inside the block is acted on when it ends.

    `os.fork` runs Python at-fork hooks (logging's lock is released by one), and an exception
    raised inside a hook is printed as "Exception ignored" and dropped: a KeyboardInterrupt
    raised there would be lost and the program go on as if never interrupted.  Held, a signal
    is only recorded, and raised again once the block is left and the handler that was in
    place is back."""
    if threading.current_thread() is not threading.main_thread():  # (signals reach the main one)
        yield
        return
    received: list[int] = []
    previous = {signum: signal.signal(signum, lambda number, _frame: received.append(number))
                for signum in _HELD_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for number in dict.fromkeys(received):
        signal.raise_signal(number)  # (to the handler that was in place: it may end the process)


class Beside(Generic[T]):
    """`compute()` started in a forked child; `result()` waits for and returns its value.

    Where fork is not available (not POSIX) the value is computed by `result()` itself, in
    this process.  `compute` must be self-contained: it runs in a copy of this process, whose
    other threads do not exist there, so it must not wait on a lock another thread may hold
    (it imports nothing new and writes no shared stream).  An exception in it reaches
    `result()` as `ChildFailed` with its text."""

    def __init__(self, compute: Callable[[], T], *, group: bool = True):
        self._compute = compute
        #: the child leads a process group of its own, so that `cancel` stops the processes
        #: it starts too (a child of this child stays in its group: `group=False`)
        self._group = group
        self._pid: int | None = None
        self._pipe: BinaryIO | None = None
        self._done: tuple[T, float] | None = None
        if hasattr(os, "fork"):
            self._start()

    def _start(self) -> None:
        try:
            with _interrupts_held():
                read_fd, write_fd = os.pipe()
                pid = os.fork()
                if pid == 0:
                    self._run_child(read_fd, write_fd)
                os.close(write_fd)
                self._pid, self._pipe = pid, os.fdopen(read_fd, "rb")
                if self._group:
                    with contextlib.suppress(OSError):  # (the child may have set it, or ended, first)
                        os.setpgid(pid, pid)
        except BaseException:  # (a signal held over the fork: nobody else holds this child to stop it)
            self.cancel()
            raise

    def _run_child(self, read_fd: int, write_fd: int) -> NoReturn:
        """The child: compute, send, and end without running the parent's teardown."""
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
            if self._group:
                os.setpgid(0, 0)
            os.close(read_fd)
            try:
                started = time.perf_counter()
                payload = pickle.dumps(("ok", self._compute(), time.perf_counter() - started))
                status = 0
            except BaseException as exc:  # noqa: BLE001  (the parent reports it)
                payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}", 0.0))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        finally:
            os._exit(status)

    @property
    def seconds(self) -> float | None:
        """The seconds the computation took, once `result()` has it."""
        return self._done[1] if self._done is not None else None

    def result(self) -> tuple[T, float]:
        """The computed value and the seconds the computation took (raises `ChildFailed`)."""
        if self._done is None:
            if self._pid is None:
                started = time.perf_counter()
                self._done = (self._compute(), time.perf_counter() - started)
            else:
                self._done = self._collect()
        return self._done

    def _collect(self) -> tuple[T, float]:
        assert self._pid is not None and self._pipe is not None
        payload = self._pipe.read()
        self._pipe.close()
        self._pipe = None
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        if not payload:
            raise ChildFailed(f"the child process ended without a result (wait status {status})")
        kind, value, seconds = pickle.loads(payload)
        if kind != "ok":
            raise ChildFailed(value)
        return value, seconds

    def cancel(self) -> None:
        """Stop the child, and the processes it started, if it still runs (the caller no
        longer needs its value)."""
        if self._pid is not None:
            try:
                if self._group:
                    with contextlib.suppress(OSError):  # (a group that has already gone)
                        os.killpg(self._pid, signal.SIGKILL)
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self._pid = None
        if self._pipe is not None:
            self._pipe.close()  # (a file object: closing it twice is harmless)
            self._pipe = None
