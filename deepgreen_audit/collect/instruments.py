"""The counters a host has, opened together, or the reasons it lacks them.

`probe()` opens NVML energy and RAPL and keeps, for each missing counter, a
one-line reason.  `Instruments.open()` refuses a host that lacks a counter of the
campaign's measurement boundary (`spec.boundary_counters`: NVML and RAPL on cuda, RAPL
on cpu) unless the caller allowed it, in which case the reasons travel into the
tables (docs/design.md, "Measurement contract": missing is empty plus a reason).  A
counter outside the boundary (NVML on a cpu campaign) is read when the host has it and
never missing: its cells are empty, with why, where it is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deepgreen_audit.device.errors import ALLOW_OPTION, CounterUnavailable

if TYPE_CHECKING:  # imported when CodeCarbon runs (it loads CodeCarbon)
    from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonTracker
from deepgreen_audit.device.nvml import Nvml
from deepgreen_audit.device.rapl import Rapl, RaplReading, active_powercap_root
from deepgreen_audit.errors import UserError
from deepgreen_audit.spec import Counter, boundary_counters


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
    """Open counters (None where missing), CodeCarbon, why anything is missing, and the device
    of the campaign (whose boundary says which counters energy_j sums)."""

    nvml: Nvml | None = None
    rapl: Rapl | None = None
    codecarbon: CodeCarbonTracker | None = None
    #: {counter ("NVML", "RAPL"): why it is unreadable}, inside the boundary or not
    missing: dict[str, str] = field(default_factory=dict)
    device: str = "cuda"

    @classmethod
    def open(cls, *, allow_missing_counters: bool = False, pynvml_module=None,
             powercap_root: Path | None = None, codecarbon: bool = True,
             device: str = "cuda") -> Instruments:
        found = probe(pynvml_module=pynvml_module, powercap_root=powercap_root)
        nvml, rapl, missing = found.nvml, found.rapl, found.missing
        needed = missing_in_boundary(missing, device)
        if needed and not allow_missing_counters:
            raise_missing(needed)
        tracker = None
        if codecarbon:
            from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonTracker

            tracker = CodeCarbonTracker()
        return cls(nvml=nvml, rapl=rapl, codecarbon=tracker, missing=missing, device=device)

    @property
    def boundary(self) -> tuple[Counter, ...]:
        """The counters whose energies make up energy_j on this campaign's device."""
        return boundary_counters(self.device)

    @property
    def counters_missing_reason(self) -> str | None:
        """Why counters of the boundary are missing (environment.counters_missing_reason); a
        counter outside it is not missing."""
        return "; ".join(f"{k}: {v}" for k, v in missing_in_boundary(self.missing, self.device).items()) or None

    @property
    def energy_missing_reason(self) -> str | None:
        """Why a block's counter cells are empty (blocks.energy_missing_reason): each counter
        of the boundary the host lacks, then each outside it, saying that it is outside."""
        inside = missing_in_boundary(self.missing, self.device)
        reasons = [f"{k}: {v}" for k, v in inside.items()]
        reasons += [f"{k}: not read, outside the measurement boundary of a {self.device} campaign "
                    f"(not readable here: {v})" for k, v in self.missing.items() if k not in inside]
        return "; ".join(reasons) or None

    def read(self) -> CounterReading:
        """NVML millijoules per GPU, RAPL microjoules and wraps seen per package domain;
        None where missing."""
        return CounterReading(nvml_mj=self.nvml.total_energy_mj() if self.nvml else None,
                              rapl=self.rapl.read() if self.rapl else None)

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()


def missing_in_boundary(missing: dict[str, str], device: str) -> dict[str, str]:
    """The missing counters (`missing`: {counter: reason}) that the boundary of a `device`
    campaign needs."""
    needed = {c.name for c in boundary_counters(device)}
    return {k: v for k, v in missing.items() if k in needed}


def probe(*, pynvml_module=None, powercap_root: Path | None = None) -> CounterProbe:
    """The NVML and RAPL counters of this host (None where missing) and why any is missing;
    RAPL under `powercap_root`, by default the tree a collection reads (`rapl.active_powercap_root`)."""
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
        rapl = Rapl(powercap_root or active_powercap_root())
    except CounterUnavailable as exc:
        missing["RAPL"] = exc.reason
    return CounterProbe(nvml=nvml, rapl=rapl, missing=missing)


def raise_missing(missing: dict[str, str]):
    raise CountersMissing(
        "this host lacks energy counters the measurement contract needs: "
        + "; ".join(f"{k}: {v}" for k, v in missing.items())
        + f". Pass {ALLOW_OPTION} to collect anyway, with empty energy cells and these reasons",
        code="counters-missing")
