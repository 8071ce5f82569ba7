"""FECoM's per-call method, as pure functions of one record's series.

Follows `fecom/experiment/data.py::EnergyData` of the FECoM repository
(SMART-Dal/FECoM; the same code ships in Greenlight's CodeGreen), including
its quirks, so that recomputed figures can be compared with the published
ones; docs/greenlight.md lists each rule and quirk:

* execution window: from the sample whose time is nearest the call's start
  up to, not including, the sample nearest its end (empty if the two
  coincide: a call shorter than about one interval has no energy);
* baseline: mean of the last `wait_per_stable_check_loop_s /
  measurement_interval_s` samples before the start.  For the GPU too the
  start is taken on the perf clock (`start_time_perf`), as FECoM does;
* normalised = total - samples x baseline (x interval for GPU power);
* lag: after the end, the leading run of samples whose forward 5-sample
  moving average stays at or above baseline (+ 2 W for the GPU); its
  duration is last - first sample time, and a zero duration means no lag;
* "power" statistics are over the execution-window samples of the value
  column: joules per sample for CPU/RAM (perf), watts for the GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from deepgreen_audit.greenlight.records import VALUE_COLUMN, CallRecord, RecordError

#: Absolute tolerance over the baseline when looking for lag (FECoM: 0 CPU/RAM, 2 W GPU).
LAG_TOLERANCE = {"cpu": 0.0, "ram": 0.0, "gpu": 2.0}
#: Width of the forward moving average of the lag search, samples.
LAG_WINDOW_SAMPLES = 5
ENERGY_DOMAINS = ("cpu", "ram", "gpu")


@dataclass(frozen=True)
class DomainFigures:
    """FECoM's figures of one domain of one call; None where FECoM gets no number."""

    samples_in_execution: int
    baseline_samples: int
    baseline_value: float | None
    baseline_power_w: float | None
    baseline_std_to_mean: float | None
    total_j: float | None
    total_normalised_j: float | None
    lag_time_s: float
    lag_j: float
    lag_normalised_j: float
    total_lag_normalised_j: float | None
    #: mean / stdev / median of the window's values in the source unit (J per sample or W)
    value_mean: float | None
    value_stdev: float | None
    value_median: float | None
    power_mean_w: float | None
    power_stdev_w: float | None


def clock(record: CallRecord, domain: str) -> tuple[float, float]:
    """(start, end) of the call on the domain's series clock."""
    t = record.times
    if domain == "gpu":
        return t["start_time_nvidia"], t["end_time_nvidia"]
    return t["start_time_perf"], t["end_time_perf"]


def execution_window(time_s: np.ndarray, start: float, end: float) -> slice:
    """FECoM's window: nearest sample to start up to (excluding) the nearest sample to end."""
    if len(time_s) == 0:
        return slice(0, 0)
    first = int(np.argmin(np.abs(time_s - start)))
    last = int(np.argmin(np.abs(time_s - end)))
    return slice(first, last) if last > first else slice(0, 0)


def baseline_window(time_s: np.ndarray, start: float, samples: int) -> slice:
    before = int(np.count_nonzero(time_s < start))
    return slice(max(0, before - samples), before)


def domain_figures(record: CallRecord, domain: str) -> DomainFigures:
    series = record.series[domain]
    time_s, values = series.time_s, series.columns[VALUE_COLUMN[domain]]
    interval = record.interval_s
    to_joules = interval if domain == "gpu" else 1.0
    to_watts = 1.0 if domain == "gpu" else 1.0 / interval
    start, end = clock(record, domain)
    # pandas reductions, as FECoM uses, so that ties in the lag search break the same way
    window = pd.Series(values[execution_window(time_s, start, end)])
    n_base = int(record.settings["wait_per_stable_check_loop_s"] / interval)
    base = pd.Series(values[baseline_window(time_s, record.times["start_time_perf"], n_base)])
    baseline = float(base.mean()) if len(base) else None
    base_cv = float(base.std() / abs(baseline)) if len(base) > 1 and baseline else None
    total = float(window.sum()) * to_joules if len(window) else None
    normalised = (total - len(window) * baseline * to_joules
                  if total is not None and baseline is not None else None)
    lag_time, lag, lag_normalised = _lag(time_s, values, end, baseline, LAG_TOLERANCE[domain],
                                         to_joules)
    stdev = float(window.std()) if len(window) > 1 else None
    mean = float(window.mean()) if len(window) else None
    return DomainFigures(
        samples_in_execution=len(window), baseline_samples=len(base),
        baseline_value=baseline,
        baseline_power_w=baseline * to_watts if baseline is not None else None,
        baseline_std_to_mean=base_cv, total_j=total, total_normalised_j=normalised,
        lag_time_s=lag_time, lag_j=lag, lag_normalised_j=lag_normalised,
        total_lag_normalised_j=normalised + lag_normalised if normalised is not None else None,
        value_mean=mean, value_stdev=stdev,
        value_median=float(window.median()) if len(window) else None,
        power_mean_w=mean * to_watts if mean is not None else None,
        power_stdev_w=stdev * to_watts if stdev is not None else None)


def _lag(time_s, values, end, baseline, tolerance, to_joules) -> tuple[float, float, float]:
    """(lag time s, lag J, normalised lag J): the leading above-baseline run after the end."""
    if baseline is None:
        return 0.0, 0.0, 0.0
    after = time_s >= end
    t, v = time_s[after], pd.Series(values[after])
    forward = v.rolling(window=LAG_WINDOW_SAMPLES, min_periods=1).mean().shift(
        -(LAG_WINDOW_SAMPLES - 1)).to_numpy()
    below = ~(forward >= baseline + tolerance)  # NaN (the last 4 samples) ends the run too
    run = int(np.argmax(below)) if below.any() else len(forward)
    if run == 0:
        return 0.0, 0.0, 0.0
    lag_time = float(t[run - 1] - t[0])
    if lag_time == 0:
        return 0.0, 0.0, 0.0
    lag = float(v.iloc[:run].sum()) * to_joules
    return lag_time, lag, lag - run * baseline * to_joules


def call_figures(record: CallRecord) -> dict[str, DomainFigures]:
    """FECoM's figures for each energy domain of one call; a RecordError when one is not a
    finite number (samples or settings whose sums or products pass a double's 1.8e308: no
    measurement, and no figure a package can hold).  numpy is told not to warn of the
    overflow: it is refused here, once, in words."""
    with np.errstate(over="ignore", invalid="ignore"):
        figures = {d: domain_figures(record, d) for d in ENERGY_DOMAINS}
    for domain, figure in figures.items():
        for name, value in vars(figure).items():
            if isinstance(value, float) and not math.isfinite(value):
                raise RecordError(record.read_from or record.source_file or record.call_id,
                                  record.position,
                                  record.api_call, f"its {domain} {name} comes to {value} "
                                  "(its samples or settings pass the largest number a double "
                                  "holds, 1.8e308): not a measurement")
    return figures


def has_energy_data(figures: dict[str, DomainFigures]) -> bool:
    """FECoM: a call has energy data when every domain's execution window has a sample."""
    return all(f.samples_in_execution > 0 for f in figures.values())


def execution_time_s(record: CallRecord) -> float:
    return (record.times["end_time_execution"] - record.times["start_time_execution"]) / 1e9
