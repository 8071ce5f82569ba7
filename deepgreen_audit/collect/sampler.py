"""The 1 Hz sampler: GPU utilisation, power and memory (NVML) and CPU utilisation.

A daemon thread beside the blocks; its rows become samples.csv.  With several
GPUs, utilisation is their mean and power and memory their sums (the samples
table has one column each).  Without NVML the GPU cells stay empty (the
environment row says why); nothing is estimated.

Each tick also reads every RAPL package counter, for no column: the read lets
`Rapl` count the counter's wraps (a package wraps every ~22 min at 200 W, so
two boundary reads alone cannot tell one wrap from two; `rapl.py`).  The
sampler, not a thread of its own, does it: it already is the run's one clock
at the specification's rate, started before the first block and stopped after
the last, and one thread is one fewer to start, stop and lose.  A sampler
whose tick raised (a counter unreadable mid-run) stops sampling and counting;
`stop()` raises that error, so the run fails instead of recording blocks whose
wraps went uncounted.
"""

from __future__ import annotations

import threading
import time

import psutil


class Sampler:
    """Samples every `interval_s` seconds from `start()` until `stop()`; t_s from `t0`."""

    def __init__(self, nvml=None, rapl=None, interval_s: float = 1.0, t0: float | None = None):
        self.nvml = nvml
        self.rapl = rapl
        self.interval_s = interval_s
        self.t0 = time.monotonic() if t0 is None else t0
        self.rows: list[dict] = []
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="deepgreen-sampler", daemon=True)

    def start(self) -> Sampler:
        psutil.cpu_percent(interval=None)  # the first call only sets psutil's reference point
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        """The rows sampled; raises the error that ended a tick, if one did."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self.rows

    def sample(self) -> dict:
        if self.rapl is not None:
            self.rapl.read()  # counts the wraps since the last read of any reader
        row = {"t_s": round(time.monotonic() - self.t0, 6), "gpu_utilization_pct": None,
               "gpu_power_w": None, "gpu_memory_used_mib": None,
               "cpu_utilization_pct": float(psutil.cpu_percent(interval=None))}
        if self.nvml is not None:
            n = len(self.nvml.handles)
            row["gpu_utilization_pct"] = sum(self.nvml.utilization_pct(i) for i in range(n)) / n
            row["gpu_power_w"] = sum(self.nvml.power_w(i) for i in range(n))
            row["gpu_memory_used_mib"] = sum(self.nvml.memory_used_mib(i) for i in range(n))
        return row

    def _loop(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                self.rows.append(self.sample())
            except Exception as exc:  # kept for stop(): a thread's error is otherwise lost
                self._error = exc
                return
            next_at += self.interval_s
