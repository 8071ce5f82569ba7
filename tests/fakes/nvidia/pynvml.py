"""A fake `pynvml` module on disk, for the GPU pilot's rehearsal on a host without a GPU.

Put this folder first on PYTHONPATH (and on PATH, for its `nvidia-smi`) and every process of
the rehearsal, the collection runner and CodeCarbon included, finds one "GPU" whose
accumulated-energy counter grows with wall time at POWER_W.  Its name says it is fake, so
every table built from it says so too; the rehearsal's package is marked synthetic.
"""

from __future__ import annotations

import time
import types

DEVICE_NAME = "FAKE NVML device (rehearsal, not a GPU)"
POWER_W = 150.0
POWER_LIMIT_W = 700.0
#: wall-clock origin of the counter, so that every process reads one monotonic counter
_EPOCH_S = 1_700_000_000.0
NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class c_nvmlMemory_t(types.SimpleNamespace):
    def __init__(self, total, free, used):
        super().__init__(total=total, free=free, used=used)


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    if index != 0:
        raise NVMLError("Invalid Argument")
    return index


def nvmlDeviceGetName(handle):
    return DEVICE_NAME


def nvmlDeviceGetUUID(handle):
    return "GPU-00000000-fake-0000-0000-000000000000"


def nvmlSystemGetDriverVersion():
    return "0.0.fake"


def nvmlSystemGetCudaDriverVersion():
    return 13000


def nvmlDeviceGetTotalEnergyConsumption(handle):
    """Millijoules since the fake driver 'loaded': POWER_W times wall time."""
    return int((time.time() - _EPOCH_S) * POWER_W * 1000)


def nvmlDeviceGetPowerUsage(handle):
    return int(POWER_W * 1000)


def nvmlDeviceGetEnforcedPowerLimit(handle):
    return int(POWER_LIMIT_W * 1000)


def nvmlDeviceGetUtilizationRates(handle):
    return types.SimpleNamespace(gpu=50, memory=10)


def nvmlDeviceGetMemoryInfo(handle):
    return c_nvmlMemory_t(total=141 * 2**30, free=140 * 2**30, used=2**30)


def nvmlDeviceGetTemperature(handle, sensor):
    return 40


def nvmlDeviceGetComputeMode(handle):
    return 0


def nvmlDeviceGetComputeRunningProcesses(handle):
    return []


def nvmlDeviceGetGraphicsRunningProcesses(handle):
    return []
