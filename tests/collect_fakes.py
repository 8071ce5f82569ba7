"""Fakes at the lowest layer for the collection tests: a pynvml module and a powercap tree."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path


class FakeNvmlState:
    def __init__(self, energy_mj=(1000,), supported=True, present=True, names=("NVIDIA H100",)):
        self.energy_mj = list(energy_mj)
        self.supported = supported
        self.present = present
        self.names = names
        self.shutdowns = 0
        #: an error the energy counter raises from now on (a GPU fallen off the bus), or None
        self.fault: Exception | None = None


def _disk_fake() -> types.ModuleType:
    """The fake pynvml module file the rehearsal's subprocesses import."""
    path = Path(__file__).parent / "fakes" / "nvidia" / "pynvml.py"
    spec = importlib.util.spec_from_file_location("deepgreen_fake_pynvml", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_pynvml(state: FakeNvmlState) -> types.ModuleType:
    """A module with pynvml's names and exception classes, driven by `state`."""
    nv = types.ModuleType("pynvml")
    # pynvml's exception classes, as the on-disk fake (tests/fakes/nvidia) defines them
    errors = _disk_fake()
    NVMLError_NotSupported = errors.NVMLError_NotSupported
    NVMLError_LibraryNotFound = errors.NVMLError_LibraryNotFound
    nv.NVMLError, nv.NVMLError_NotSupported = errors.NVMLError, NVMLError_NotSupported
    nv.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound

    def init():
        if not state.present:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def energy(handle):
        if not state.supported:
            raise NVMLError_NotSupported("Not Supported")
        if state.fault is not None:
            raise state.fault
        return state.energy_mj[handle]

    def shutdown():
        state.shutdowns += 1

    nv.nvmlInit, nv.nvmlShutdown = init, shutdown
    nv.nvmlDeviceGetCount = lambda: len(state.energy_mj)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: state.names[h]
    nv.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nv.nvmlSystemGetCudaDriverVersion = lambda: 12040
    nv.nvmlDeviceGetTotalEnergyConsumption = energy
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97, memory=40)
    nv.nvmlDeviceGetPowerUsage = lambda h: 250125
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=5 * 2**30, total=80 * 2**30)
    return nv


def zone(root: Path, folder: str, name: str, energy_uj: int, max_uj: int = 262143328850) -> Path:
    """One powercap zone folder with name, energy_uj and max_energy_range_uj."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def set_energy(zone_path: Path, energy_uj: int) -> None:
    (zone_path / "energy_uj").write_text(f"{energy_uj}\n")


class DrawingPackage:
    """A fake package zone whose energy_uj follows a test clock: `power_w` drawn from
    `start_uj`, wrapping at `max_uj`.  `advance(seconds)` moves the clock and rewrites the file,
    so a test drives wraps deterministically, without sleeping; the clock is `now_s`."""

    def __init__(self, root: Path, folder: str, name: str, *, power_w: int, start_uj: int, max_uj: int):
        self.power_w, self.start_uj, self.max_uj = power_w, start_uj, max_uj
        self.now_s = 0
        self.path = zone(root, folder, name, start_uj, max_uj=max_uj)

    @property
    def drawn_uj(self) -> int:
        """Energy drawn since the clock's zero, microjoules (integer seconds and watts: exact)."""
        return self.power_w * self.now_s * 1_000_000

    def clock(self) -> float:
        return float(self.now_s)

    def advance(self, seconds: int) -> None:
        self.now_s += seconds
        set_energy(self.path, (self.start_uj + self.drawn_uj) % self.max_uj)


def fake_stack(interrupt_when: str, interrupt: str) -> str:
    """A Python stack program that trains nothing (two blocks an epoch).  Inside the first train
    block where `interrupt_when` holds, once per run (a marker file under $FAKE_STACK_MARKER),
    it runs `interrupt`: kill itself, or sleep until it is cancelled."""
    return f'''
import os, signal, time
from pathlib import Path

def check(job):
    pass

def run(harness, job):
    harness.report(optimizer="adam", learning_rate=job.recipe["learning_rate"], framework="fake")
    marker = Path(os.environ["FAKE_STACK_MARKER"]) / job.run_id
    for epoch in range(1, job.epochs + 1):
        with harness.block(epoch, "train") as block:
            if {interrupt_when} and not marker.exists():
                marker.write_text("interrupted once")
                {interrupt}
            block.samples_processed, block.loss = 10, 1.5
        with harness.block(epoch, "eval") as block:
            block.samples_processed, block.loss, block.test_accuracy = 5, 1.25, 0.4
'''
