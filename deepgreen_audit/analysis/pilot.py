"""The pilot's figures: what a measured pilot package (collect/pilot.toml) shows per stack and
architecture, for the paper's pilot section.

A pilot is small (two stacks, two architectures, digits, a few epochs) and its boundary may be
the GPU board alone (no RAPL on the host), so its figures are the GPU's: NVML energy per block,
the counter-bracketed block duration, CodeCarbon's GPU energy against NVML's over the same
window, and the GPU utilisation the 1 Hz sampler saw inside the blocks.  Every figure is
computed from the package's tables; one that cannot be is a MissingValue that stops the render.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from deepgreen_audit.analysis.data import PHASES, MissingValue
from deepgreen_audit.analysis.results import Number, Text
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.units import J_PER_KWH

CELL = ("ecosystem", "architecture")


@dataclass
class PilotResults:
    """The pilot's identity and one row of figures per (ecosystem, architecture)."""

    title: Text
    synthetic: bool
    boundary: Text
    gpus: Text
    host: Text
    collected: Text
    datasets: Text
    runs: Number
    blocks: Number
    epochs: Number
    repetitions: Number
    cells: list[dict]


def _median(values: pd.Series, what: str) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        raise MissingValue(f"pilot: no {what} to take a median of")
    return float(values.median())


def analyse_pilot(location) -> PilotResults:
    """The pilot section's figures from the package at `location`."""
    package = Package.open(location)
    runs = package.table("runs").to_pandas()
    blocks = package.table("blocks").to_pandas()
    samples = package.table("samples").to_pandas()
    if runs.empty or blocks.empty:
        raise MissingValue("pilot: the package has no runs or no blocks", path=package.descriptor_path)
    measured = package.descriptor.get("measured")
    if not isinstance(measured, dict):
        raise MissingValue("pilot: the descriptor does not say where and within which boundary it "
                           "was measured ('measured', written by deepgreen collect)",
                           path=package.descriptor_path)
    run_starts = runs[["run_id", *CELL, "started_at_utc"]].rename(columns={"started_at_utc": "run_started"})
    blocks = blocks.merge(run_starts, on="run_id")
    #: a block's start in seconds since its run's start: the samples' clock
    blocks["t0_s"] = (pd.to_datetime(blocks["started_at_utc"], utc=True)
                      - pd.to_datetime(blocks["run_started"], utc=True)).dt.total_seconds()
    cells = []
    for (eco, arch), cell in blocks.groupby(list(CELL), sort=True):
        label = f"{eco}/{arch}"
        row = {"ecosystem": Text(eco, "ecosystem", kind="label"),
               "architecture": Text(arch, "architecture", kind="label"),
               "runs": Number(cell["run_id"].nunique(), 0, f"{label}: runs")}
        for phase in PHASES:
            part = cell[cell["phase"] == phase]
            row[f"{phase}_gpu_j"] = Number(_median(part["gpu_energy_j"], f"{label} {phase} GPU energy"),
                                           0, f"{label}: median NVML GPU energy of a {phase} block", "J")
            row[f"{phase}_s"] = Number(_median(part["duration_s"], f"{label} {phase} duration"),
                                       1, f"{label}: median {phase} block duration", "s")
        cc_gpu = cell["codecarbon_gpu_energy_kwh"] * J_PER_KWH
        rel = (cc_gpu - cell["gpu_energy_j"]) / cell["gpu_energy_j"]
        row["codecarbon_vs_nvml_pct"] = Number(100 * _median(rel, f"{label} CodeCarbon/NVML pairs"), 1,
                                               f"{label}: median (CodeCarbon GPU - NVML) / NVML", r"\percent")
        row["gpu_util_pct"] = Number(_gpu_utilisation(cell, samples, label), 0,
                                     f"{label}: median GPU utilisation inside blocks", r"\percent")
        cells.append(row)
    descriptor = package.descriptor
    return PilotResults(
        title=Text(str(descriptor.get("title", descriptor.get("name", ""))), "pilot title"),
        synthetic=package.synthetic,
        boundary=Text(str(measured.get("boundary", "")), "measurement boundary"),
        gpus=Text(", ".join(measured.get("gpus") or ["no GPU reported"]), "GPUs"),
        host=Text(str(measured.get("host", "")), "host"),
        collected=Text(str(measured.get("collection_started_utc", ""))[:10], "collection date"),
        datasets=Text(", ".join(sorted(runs["dataset"].unique())), "datasets"),
        runs=Number(len(runs), 0, "pilot runs"),
        blocks=Number(len(blocks), 0, "pilot blocks"),
        epochs=Number(int(runs["epochs"].max()), 0, "pilot epochs per run"),
        repetitions=Number(int(runs["repetition"].max()), 0, "pilot repetitions"),
        cells=cells)


def _gpu_utilisation(cell: pd.DataFrame, samples: pd.DataFrame, label: str) -> float:
    """Median GPU utilisation of the samples that fall inside the cell's blocks."""
    inside = []
    for run_id, run_blocks in cell.groupby("run_id"):
        t = samples.loc[samples["run_id"] == run_id, ["t_s", "gpu_utilization_pct"]]
        for start, duration in zip(run_blocks["t0_s"], run_blocks["duration_s"]):
            hit = t[(t["t_s"] >= start) & (t["t_s"] <= start + duration)]
            inside.append(hit["gpu_utilization_pct"])
    values = pd.concat(inside) if inside else pd.Series(dtype=float)
    return _median(values if len(values) else pd.Series([np.nan]), f"{label} GPU utilisation samples")
