"""The 1 Hz sampler: GPU utilisation, power and memory (NVML) and CPU utilisation.

A daemon thread beside the blocks; its rows become samples.csv.  With several
GPUs, utilisation is their mean and power and memory their sums (the samples
table has one column each).  Without NVML the GPU cells stay empty (the
environment row says why); nothing is estimated.
"""

from __future__ import annotations

import threading
import time

import psutil


class Sampler:
    """Samples every `interval_s` seconds from `start()` until `stop()`; t_s from `t0`."""

    def __init__(self, nvml=None, interval_s: float = 1.0, t0: float | None = None):
        self.nvml = nvml
        self.interval_s = interval_s
        self.t0 = time.monotonic() if t0 is None else t0
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="deepgreen-sampler", daemon=True)

    def start(self) -> "Sampler":
        psutil.cpu_percent(interval=None)  # the first call only sets psutil's reference point
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.rows

    def sample(self) -> dict:
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
            self.rows.append(self.sample())
            next_at += self.interval_s
