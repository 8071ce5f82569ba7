"""The counters a host has, opened together, or the reasons it lacks them.

`probe()` opens NVML energy and RAPL and keeps, for each missing counter, a
one-line reason.  `Instruments.open()` refuses a host with a missing counter
unless the caller allowed it, in which case the reasons travel into the
tables (docs/design.md, "Measurement contract": missing is empty plus a reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deepgreen_audit.collect.errors import ALLOW_OPTION, CounterUnavailable

if TYPE_CHECKING:  # imported when CodeCarbon runs (it loads CodeCarbon)
    from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonTracker
from deepgreen_audit.collect.nvml import Nvml
from deepgreen_audit.collect.rapl import POWERCAP_ROOT, Rapl, RaplReading
from deepgreen_audit.errors import UserError


class CountersMissing(UserError):
    """The host lacks a counter and the user did not allow collecting without it."""


@dataclass(frozen=True)
class CounterProbe:
    """The counters a host has, opened (None where missing), and why each missing one is."""

    nvml: Nvml | None
    rapl: Rapl | None
    #: {counter ("NVML", "RAPL"): one-line reason}
    missing: dict[str, str]


@dataclass(frozen=True)
class CounterReading:
    """One read of the host's counters at a block boundary; None where a counter is missing."""

    #: NVML's cumulative energy of each GPU, millijoules
    nvml_mj: tuple[int, ...] | None
    #: RAPL's microjoules and the wraps seen so far, per package domain
    rapl: RaplReading | None


@dataclass
class Instruments:
    """Open counters (None where missing), CodeCarbon, and why anything is missing."""

    nvml: Nvml | None = None
    rapl: Rapl | None = None
    codecarbon: CodeCarbonTracker | None = None
    missing: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, *, allow_missing_counters: bool = False, pynvml_module=None,
             powercap_root: Path = POWERCAP_ROOT, codecarbon: bool = True) -> Instruments:
        found = probe(pynvml_module=pynvml_module, powercap_root=powercap_root)
        nvml, rapl, missing = found.nvml, found.rapl, found.missing
        if missing and not allow_missing_counters:
            raise_missing(missing)
        tracker = None
        if codecarbon:
            from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonTracker

            tracker = CodeCarbonTracker()
        return cls(nvml=nvml, rapl=rapl, codecarbon=tracker, missing=missing)

    @property
    def counters_missing_reason(self) -> str | None:
        return "; ".join(f"{k}: {v}" for k, v in self.missing.items()) or None

    def read(self) -> CounterReading:
        """NVML millijoules per GPU, RAPL microjoules and wraps seen per package domain;
        None where missing."""
        return CounterReading(nvml_mj=self.nvml.total_energy_mj() if self.nvml else None,
                              rapl=self.rapl.read() if self.rapl else None)

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()


def probe(*, pynvml_module=None, powercap_root: Path = POWERCAP_ROOT) -> CounterProbe:
    """The NVML and RAPL counters of this host (None where missing) and why any is missing."""
    missing: dict[str, str] = {}
    nvml: Nvml | None = None
    rapl: Rapl | None = None
    try:
        nvml = Nvml(pynvml_module)
        nvml.total_energy_mj()
    except CounterUnavailable as exc:
        missing["NVML"] = exc.reason
        if nvml is not None:
            nvml.close()
        nvml = None
    try:
        rapl = Rapl(powercap_root)
    except CounterUnavailable as exc:
        missing["RAPL"] = exc.reason
    return CounterProbe(nvml=nvml, rapl=rapl, missing=missing)


def raise_missing(missing: dict[str, str]):
    raise CountersMissing(
        "this host lacks energy counters the measurement contract needs: "
        + "; ".join(f"{k}: {v}" for k, v in missing.items())
        + f". Pass {ALLOW_OPTION} to collect anyway, with empty energy cells and these reasons",
        code="counters-missing")
