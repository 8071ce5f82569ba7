"""NVML through `pynvml` (the nvidia-ml-py package), one method per NVML call.

The energy reading is `nvmlDeviceGetTotalEnergyConsumption`: millijoules since
the driver was loaded, Volta and newer.  On older boards NVML answers
`NVMLError_NotSupported`, which becomes `EnergyNotSupported`; a host without
the library or without a GPU gets `NvmlUnavailable`.  Tests pass a fake module
as `module` (or put one in `sys.modules["pynvml"]`); nothing above this file
knows whether NVML is real.
"""

from __future__ import annotations

import importlib


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml:
    """An initialised NVML session over every GPU it reports, in NVML index order."""

    def __init__(self, module=None):
        from deepgreen_audit.device.errors import NvmlUnavailable

        if module is None:
            try:
                module = importlib.import_module("pynvml")
            except ImportError:
                raise NvmlUnavailable("pynvml is not installed (pip install nvidia-ml-py)") from None
        self.nv = module
        try:
            module.nvmlInit()
        except module.NVMLError as exc:
            raise NvmlUnavailable(f"nvmlInit failed: {_text(exc)} (no NVIDIA driver on this host?)") from None
        count = module.nvmlDeviceGetCount()
        if count == 0:
            module.nvmlShutdown()
            raise NvmlUnavailable("NVML reports no GPU")
        self.handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    # ---------------------------------------------------------- static facts

    def names(self) -> list[str]:
        return [_text(self.nv.nvmlDeviceGetName(h)) for h in self.handles]

    def driver_version(self) -> str:
        return _text(self.nv.nvmlSystemGetDriverVersion())

    def cuda_driver_version(self) -> str:
        """CUDA version the driver supports, e.g. '12.4' (from the integer 12040)."""
        value = int(self.nv.nvmlSystemGetCudaDriverVersion())
        return f"{value // 1000}.{value % 1000 // 10}"

    # ---------------------------------------------------------- counters

    def total_energy_mj(self) -> tuple[int, ...]:
        """The accumulated-energy counter of each GPU, millijoules."""
        from deepgreen_audit.device.errors import EnergyNotSupported

        try:
            return tuple(int(self.nv.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles)
        except self.nv.NVMLError_NotSupported:
            raise EnergyNotSupported(
                "nvmlDeviceGetTotalEnergyConsumption is not supported by "
                f"{'; '.join(self.names())} (needs Volta or newer)") from None

    # ---------------------------------------------------------- 1 Hz sampler readings

    def utilization_pct(self, index: int) -> float:
        return float(self.nv.nvmlDeviceGetUtilizationRates(self.handles[index]).gpu)

    def power_w(self, index: int) -> float:
        return self.nv.nvmlDeviceGetPowerUsage(self.handles[index]) / 1000.0

    def memory_used_mib(self, index: int) -> float:
        return self.nv.nvmlDeviceGetMemoryInfo(self.handles[index]).used / 2**20

    def close(self) -> None:
        self.nv.nvmlShutdown()
