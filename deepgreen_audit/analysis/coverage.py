"""What a package measured, and why it lacks what it lacks.

A campaign collected on a CPU host, or on a host without energy counters, is still a campaign:
its blocks were timed by the harness's clock, its accuracy evaluated, its CPU sampled.  The
paper states on its first page which of its quantities are measurements and which are not,
each missing one with the reason the package records (DESIGN.md, honesty rules), and the
analysis computes only what was measured:

* **energy at the measurement boundary** (`blocks.energy_j`) is measured when any block
  carries it; when none does, the reason is the one the blocks record
  (`energy_missing_reason`), and a package that gives none is refused (the analysis cannot
  tell a host without counters from a defect).  Some blocks with energy and some without is
  a partly measured campaign: the medians stop on the configuration that lacks it.
* **GPU utilisation** is measured on a campaign whose declared device is `cuda`; on a `cpu`
  campaign no GPU did the work, and that is the reason.
* **CodeCarbon** is read wherever its cells are filled; the components it modelled rather
  than measured (`codecarbon_cpu_method` `load-model` or `tdp-constant`; its RAM power is
  always a model) are named, so the paper never quotes a model as a measurement.
* **durations** (the counter-bracketed `duration_s`, read on the harness's monotonic clock)
  and the **test accuracy** are measured by every collection.

`primary_column` is what the spreads, comparisons and figures rank: energy when it was
measured, else the phase durations (measured by every collection), which the paper then
names as time, never as energy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from deepgreen_audit.analysis.data import CampaignTables, Design, MissingValue

#: CodeCarbon's CPU methods that are models, with the words the paper uses for them.
MODELLED_CPU_METHODS = {"load-model": "a load model (CPU utilisation times a share of the TDP)",
                        "tdp-constant": "a constant share of the TDP"}


@dataclass(frozen=True)
class Quantity:
    """One quantity the paper reports: whether the package measured it, and how (measured)
    or why not (not measured), in a phrase the paper quotes."""

    label: str
    measured: bool
    how: str
    #: for a quantity not measured: the reason in a few words, for the text beyond the first
    #: page (`how` gives it whole, in the words the package records)
    short: str | None = None

    @property
    def reason(self) -> str:
        return self.short or self.how


@dataclass(frozen=True)
class Coverage:
    """The quantities of a package, measured or not, in the order the paper lists them."""

    energy: Quantity
    durations: Quantity
    accuracy: Quantity
    cpu_utilisation: Quantity
    gpu_utilisation: Quantity
    codecarbon: Quantity
    #: the boundary the collection declared (descriptor `measured.boundary`), when it did
    boundary: str | None = None

    @property
    def quantities(self) -> tuple[Quantity, ...]:
        return (self.energy, self.durations, self.accuracy, self.cpu_utilisation,
                self.gpu_utilisation, self.codecarbon)

    @property
    def primary_column(self) -> str:
        """The column the spreads and comparisons rank: energy, else the phase durations."""
        return "energy_j" if self.energy.measured else "duration_s"


def coverage(tables: CampaignTables, design: Design, measured: dict | None = None) -> Coverage:
    """What the package at hand measured; `measured` is its descriptor's `measured` table
    (written by `deepgreen collect`; None for a synthetic or imported package)."""
    blocks = tables.blocks
    if blocks.empty:
        raise MissingValue("the blocks table has no rows, so nothing was measured")
    boundary = (measured or {}).get("boundary")
    return Coverage(
        energy=energy_coverage(blocks, measured),
        durations=Quantity("block durations", True, "the harness's monotonic clock at both "
                           "boundaries of every block"),
        accuracy=Quantity("test accuracy", bool(blocks["test_accuracy"].notna().any()),
                          "evaluated on the held-out split after every epoch"
                          if blocks["test_accuracy"].notna().any()
                          else "no evaluation block records a test accuracy"),
        cpu_utilisation=_utilisation(tables.samples, "cpu_utilization_pct", "CPU",
                                     "the 1 Hz sampler (all cores)"),
        gpu_utilisation=_gpu_utilisation(tables.samples, design.device),
        codecarbon=_codecarbon(blocks),
        boundary=boundary if isinstance(boundary, str) else None)


def energy_coverage(blocks: pd.DataFrame, measured: dict | None = None) -> Quantity:
    """Whether the blocks hold counter energy, and why not in the words the package records
    (`measured`: the descriptor's table; its `counters_missing` names the counters the
    collection declared unreadable).  `deepgreen compare` reads this alone."""
    boundary = (measured or {}).get("boundary")
    missing = (measured or {}).get("counters_missing")
    return _energy(blocks, boundary if isinstance(boundary, str) else None,
                   sorted(missing) if isinstance(missing, dict) else [])


def _energy(blocks: pd.DataFrame, boundary: str | None, counters_missing: list[str]) -> Quantity:
    label = "energy at the measurement boundary"
    if blocks["energy_j"].notna().any():
        return Quantity(label, True, f"hardware counters: {boundary}" if boundary
                        else "hardware counters at both boundaries of every block")
    reasons = _distinct(blocks["energy_missing_reason"])
    if not reasons:
        raise MissingValue("no block carries counter energy (blocks.energy_j) and none records "
                           "why (blocks.energy_missing_reason): the package neither measured "
                           "energy nor says why not; run 'deepgreen audit' on it")
    short = (f"the collection host could not read {' or '.join(counters_missing)}"
             if counters_missing else None)
    return Quantity(label, False, "; ".join(reasons), short)


def _utilisation(samples: pd.DataFrame, column: str, device: str, how: str) -> Quantity:
    label = f"{device} utilisation"
    if samples[column].notna().any():
        return Quantity(label, True, how)
    return Quantity(label, False, "no 1 Hz sample records it")


def _gpu_utilisation(samples: pd.DataFrame, device: str) -> Quantity:
    if device != "cuda":
        return Quantity("GPU utilisation", False,
                        f"the campaign ran on the {device.upper()} (its declared device), so no "
                        "GPU did its work")
    return _utilisation(samples, "gpu_utilization_pct", "GPU", "the 1 Hz sampler (NVML)")


def _codecarbon(blocks: pd.DataFrame) -> Quantity:
    label = "CodeCarbon's energy"
    if not blocks["codecarbon_energy_j"].notna().any():
        return Quantity(label, False, "no block records a CodeCarbon reading")
    methods = _distinct(blocks["codecarbon_cpu_method"])
    modelled = [MODELLED_CPU_METHODS[m] for m in methods if m in MODELLED_CPU_METHODS]
    gpu = "NVML for the GPU" if "nvml" in _distinct(blocks["codecarbon_gpu_method"]) else None
    if modelled:
        cpu = "its CPU power is modelled, by " + " and ".join(modelled)
    elif "rapl" in methods:
        cpu = "RAPL for the CPU"
    else:
        cpu = "its CPU method is not recorded"
    parts = [p for p in (gpu, cpu, "its RAM power is always a model") if p]
    return Quantity(label, True, "over the same windows; " + ", ".join(parts))


def _distinct(column: pd.Series) -> list[str]:
    """The distinct non-empty texts of a column, in first-seen order."""
    values = column.dropna().astype(str)
    return list(dict.fromkeys(v for v in values.to_numpy() if v.strip()))


def codecarbon_models_cpu(blocks: pd.DataFrame) -> bool:
    """Whether CodeCarbon modelled the CPU power of any block."""
    return bool(np.isin(blocks["codecarbon_cpu_method"].astype(object).to_numpy(),
                        list(MODELLED_CPU_METHODS)).any())
