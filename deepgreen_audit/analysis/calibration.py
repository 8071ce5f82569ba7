"""The between-window calibration: how much a campaign's runs outside its interleaved window
may be off, per instrument, from a calibration package (collect/calibration.toml).

The campaign's window and the places of its runs and of the calibration's are the one
definition in columnar/window.py.  The calibration repeats one reference configuration: per
instrument, each of its runs gives one reading (the sum over its blocks), and the drift between
windows is the median reading of its runs outside the campaign's window over the median of
those inside it, minus one, with a seeded percentile-bootstrap interval (the specification's
[analysis] resamples and confidence).  The bound is the larger end of that interval in size:
what a run outside the window may be off by.  Applied to the campaign's runs outside the
window, it is their reading of the instrument times the bound, and its share of the campaign's
total.  An instrument the calibration (or the campaign) did not measure is NotMeasured with the
reason, and so is a drift the calibration's runs cannot bound (too few on a side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from deepgreen_audit.analysis.data import Design, MissingValue
from deepgreen_audit.analysis.stats import bootstrap_interval
from deepgreen_audit.analysis.values import NotMeasured, Number, Text, scaled
from deepgreen_audit.columnar.window import (
    INSIDE,
    MIN_CALIBRATION_RUNS_PER_SIDE,
    Window,
    coverage,
    interleaved_window,
)
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.spec import AuditTolerances, load_spec


@dataclass(frozen=True)
class Instrument:
    """A reading the blocks table holds: its column, the scale of its unit, and the counter
    whose absence the descriptor records (counters_missing), if any."""

    name: str
    column: str
    kind: str  # a kind of values.SCALES
    counter: str | None = None


INSTRUMENTS = (Instrument("NVML GPU energy", "gpu_energy_j", "energy_j", "NVML"),
               Instrument("RAPL CPU energy", "cpu_energy_j", "energy_j", "RAPL"),
               Instrument("CodeCarbon energy", "codecarbon_energy_j", "energy_j"),
               Instrument("block time", "duration_s", "duration_s"))


@dataclass(frozen=True)
class InstrumentDrift:
    """One instrument's drift between windows, its bound, and what the bound is worth on the
    campaign's runs outside the window."""

    instrument: Text
    drift_pct: Number | NotMeasured
    low_pct: Number | NotMeasured
    high_pct: Number | NotMeasured
    bound_pct: Number | NotMeasured
    #: the bound times the reading of the campaign's runs outside the window
    worth: Number | NotMeasured
    #: that as a share of the campaign's total reading of the instrument
    worth_share_pct: Number | NotMeasured


@dataclass(frozen=True)
class CalibrationFigures:
    """The calibration package: its identity, its runs against the campaign's window, and each
    instrument's drift."""

    title: Text
    synthetic: bool
    reference: Text
    runs: Number
    before: Number
    inside: Number
    after: Number
    covered: bool
    #: why it does not cover the campaign's runs outside the window ("" when it does)
    short: Text
    instruments: list[InstrumentDrift]


@dataclass(frozen=True)
class CalibrationResults:
    """The campaign's runs against its interleaved window, and the calibration's figures
    (None: no calibration package was given)."""

    runs: Number
    outside: Number
    outside_runs: Text
    window_start: Text
    window_end: Text
    calibration: CalibrationFigures | None


def _utc(values: pd.Series) -> np.ndarray:
    return pd.to_datetime(values, utc=True).dt.tz_localize(None).to_numpy("datetime64[ns]")


def campaign_window(runs: pd.DataFrame) -> Window:
    """The campaign's interleaved window (columnar/window.py) from its runs table."""
    if runs.empty:
        raise MissingValue("calibration: the campaign has no runs")
    positions = pd.to_numeric(runs["schedule_position"], errors="coerce").to_numpy(float)
    return interleaved_window(positions, _utc(runs["started_at_utc"]), _utc(runs["ended_at_utc"]),
                              float(AuditTolerances.of(load_spec()).max_run_gap_s))


def analyse_calibration(campaign, calibration=None) -> CalibrationResults:
    """The limitation's figures for the campaign package at `campaign`, bounded by the
    calibration package at `calibration` (None: none was collected)."""
    package = Package.open(campaign)
    runs = package.table("runs").to_pandas()
    window = campaign_window(runs)
    outside = runs.loc[window.outside, "run_id"].tolist()
    figures = None
    if calibration is not None:
        figures = _calibration_figures(Package.open(calibration), window,
                                       package.table("blocks").to_pandas(), set(outside),
                                       package.table("environment").to_pandas()["host"].dropna())
    return CalibrationResults(
        runs=Number(len(runs), 0, "campaign runs"),
        outside=Number(len(outside), 0, "campaign runs outside the interleaved window"),
        outside_runs=Text(", ".join(sorted(outside)), "runs outside the interleaved window"),
        window_start=Text(str(pd.Timestamp(window.start))[:16], "interleaved window start (UTC)"),
        window_end=Text(str(pd.Timestamp(window.end))[:16], "interleaved window end (UTC)"),
        calibration=figures)


def _calibration_figures(package: Package, window: Window, campaign_blocks: pd.DataFrame,
                         outside: set[str], campaign_hosts) -> CalibrationFigures:
    runs = package.table("runs").to_pandas()
    blocks = package.table("blocks").to_pandas()
    if runs.empty or blocks.empty:
        raise MissingValue("calibration: the package has no runs or no blocks",
                           path=package.descriptor_path)
    configs = runs[["ecosystem", "architecture", "dataset"]].drop_duplicates()
    if len(configs) != 1:
        raise MissingValue(f"calibration: a calibration repeats one reference configuration; "
                           f"this package holds {len(configs)}", path=package.descriptor_path)
    places = window.place(_utc(runs["started_at_utc"]), _utc(runs["ended_at_utc"]))
    cover = coverage(window.places, places, campaign_hosts,
                     package.table("environment").to_pandas()["host"].dropna())
    place_of = dict(zip(runs["run_id"], places))
    missing = (package.descriptor.get("measured") or {}).get("counters_missing") or {}
    design = Design.from_spec(load_spec())
    instruments = [_drift(inst, blocks, place_of, missing, design, campaign_blocks, outside)
                   for inst in INSTRUMENTS]
    reference = configs.iloc[0]
    descriptor = package.descriptor
    return CalibrationFigures(
        title=Text(str(descriptor.get("title", descriptor.get("name", ""))), "calibration title"),
        synthetic=package.synthetic,
        reference=Text(f"{reference['ecosystem']};{reference['architecture']};{reference['dataset']}",
                       "reference configuration", kind="labels"),
        runs=Number(len(runs), 0, "calibration runs"),
        before=Number(cover.counts["before"], 0, "calibration runs before the window"),
        inside=Number(cover.counts["inside"], 0, "calibration runs inside the window"),
        after=Number(cover.counts["after"], 0, "calibration runs after the window"),
        covered=cover.covered,
        short=Text(cover.why_not(), "why the calibration does not cover the runs outside"),
        instruments=instruments)


def _readings(blocks: pd.DataFrame, column: str) -> pd.Series:
    """Per run, the sum of `column` over its blocks (NaN where any block lacks it)."""
    values = pd.to_numeric(blocks[column], errors="coerce")
    return values.groupby(blocks["run_id"]).sum(min_count=1).where(
        values.notna().groupby(blocks["run_id"]).all())


def _not_measured(inst: Instrument, blocks: pd.DataFrame, missing: dict) -> str | None:
    """Why the calibration did not measure `inst` (None: it did, in every block)."""
    values = pd.to_numeric(blocks[inst.column], errors="coerce")
    if values.notna().all():
        if inst.column == "codecarbon_energy_j":
            methods = sorted(set(blocks["codecarbon_cpu_method"].dropna()) - {"rapl"})
            if methods:
                return (f"CodeCarbon's CPU power was modelled ({', '.join(methods)}), not "
                        "measured, so its drift is the model's")
        return None
    if inst.counter and inst.counter in missing:
        return f"{inst.counter}: {missing[inst.counter]}"
    return _missing_reason(inst, blocks, values.isna()) or \
        f"{int(values.isna().sum())} of the calibration's blocks hold no {inst.column}"


def _missing_reason(inst: Instrument, blocks: pd.DataFrame, empty: pd.Series) -> str | None:
    """The reason the first block without `inst` records: for a counter, its own part of
    energy_missing_reason ("RAPL: ...; NVML: ..."), else CodeCarbon's missing_reason."""
    reasons = blocks.loc[empty, "energy_missing_reason" if inst.counter else
                         "codecarbon_missing_reason"].dropna()
    if not len(reasons):
        return None
    text = str(reasons.iloc[0])
    if inst.counter:
        parts = re.split(r"; (?=(?:NVML|RAPL): )", text)
        text = next((p for p in parts if p.startswith(f"{inst.counter}: ")), text)
    return text


def _drift(inst: Instrument, blocks: pd.DataFrame, place_of: dict, missing: dict, design: Design,
           campaign_blocks: pd.DataFrame, outside: set[str]) -> InstrumentDrift:
    label = Text(inst.name, "instrument")
    why = _not_measured(inst, blocks, missing)
    readings = _readings(blocks, inst.column)
    inside = readings[[place_of[r] == INSIDE for r in readings.index]].to_numpy(float)
    away = readings[[place_of[r] != INSIDE for r in readings.index]].to_numpy(float)
    if why is None and min(len(inside), len(away)) < MIN_CALIBRATION_RUNS_PER_SIDE:
        why = (f"the calibration has {len(inside)} run(s) inside the campaign's window and "
               f"{len(away)} outside it; a bound needs {MIN_CALIBRATION_RUNS_PER_SIDE} on each")
    if why is not None:
        gone = NotMeasured(why, f"{inst.name}: drift between windows")
        return InstrumentDrift(label, gone, gone, gone, gone, gone, gone)
    drift = float(np.median(away) / np.median(inside) - 1)
    low, high = bootstrap_interval(
        lambda a, i: np.median(a, axis=1) / np.median(i, axis=1) - 1, [away, inside],
        seed=design.bootstrap_seed, n_resamples=design.bootstrap_resamples,
        confidence=design.bootstrap_confidence)
    bound = max(abs(low), abs(high))
    def pct(value: float, what: str) -> Number:
        return Number(100 * value, 1, f"{inst.name}: {what}", r"\percent")

    worth, share = _worth(inst, bound, campaign_blocks, outside)
    return InstrumentDrift(label, pct(drift, "drift between windows"),
                           pct(low, "drift interval, low end"), pct(high, "drift interval, high end"),
                           pct(bound, "drift bound"), worth, share)


def _worth(inst: Instrument, bound: float, campaign_blocks: pd.DataFrame,
           outside: set[str]) -> tuple[Number | NotMeasured, Number | NotMeasured]:
    """The bound on the campaign's runs outside the window: their reading times the bound, and
    its share of the campaign's total reading."""
    values = pd.to_numeric(campaign_blocks[inst.column], errors="coerce")
    if values.isna().any():
        why = NotMeasured(_missing_reason(inst, campaign_blocks, values.isna()) or
                          f"the campaign's blocks lack {inst.column}",
                          f"{inst.name}: the campaign's reading")
        return why, why
    away = float(values[campaign_blocks["run_id"].isin(outside)].sum())
    return (scaled(inst.kind, bound * away, f"{inst.name}: what the bound is worth on the runs "
                   "outside the window"),
            Number(100 * bound * away / float(values.sum()), 2,
                   f"{inst.name}: that as a share of the campaign's total", r"\percent"))


def template_context(results: CalibrationResults) -> dict:
    """What paper/templates/calibration.tex.j2 reads: the campaign's window (`window`) and the
    calibration's figures (`cal`, None without one), each instrument with the reason it was
    not measured ("" when it was)."""
    figures = results.calibration
    if figures is None:
        return {"window": results, "cal": None}
    design = Design.from_spec(load_spec())
    rows = []
    for row in figures.instruments:
        reason = (row.drift_pct.reason if isinstance(row.drift_pct, NotMeasured) else
                  f"on the campaign's runs: {row.worth.reason}"
                  if isinstance(row.worth, NotMeasured) else "")
        rows.append({**{k: getattr(row, k) for k in ("instrument", "drift_pct", "low_pct",
                                                     "high_pct", "bound_pct", "worth")},
                     "worth_share": None if isinstance(row.worth_share_pct, NotMeasured)
                     else row.worth_share_pct,
                     "reason": reason})
    cal = {k: getattr(figures, k) for k in ("title", "synthetic", "reference", "runs", "before",
                                            "inside", "after", "covered", "short")}
    cal["instruments"] = rows
    cal["confidence_pct"] = Number(100 * design.bootstrap_confidence, 0,
                                   "bootstrap confidence", r"\percent")
    return {"window": results, "cal": cal}
