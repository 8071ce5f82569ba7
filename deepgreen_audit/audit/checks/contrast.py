"""S7 the contrast cell: a package whose declared scope is the contrast cell's (it names
S3_data.contrast_cell's dataset, collect/contrast.toml) is held to that cell, Imagenette at
224x224 in batches of 32, and to the 1 Hz samples its findings (median training-block
utilisation) are computed from.  Any other package is not the contrast cell: not applicable.

The runs are compared with S3_data.contrast_cell itself, not with the scoped specification,
so a scope that declares the contrast dataset at another resolution or batch size cannot
hide a run that is not the cell's.
"""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.columnar.evidence import describe_counts, evidence
from deepgreen_audit.columnar.frame import Frame, cell_text, factorize, seconds
from deepgreen_audit.spec import CONTRAST_CELL_KEYS, contrast_cell, declared_device, declares_contrast_cell
from deepgreen_audit.suite.registry import NotApplicable, Outcome, check

#: The samples column the cell's utilisation findings read on each declared device.
UTILISATION_COLUMN = {"cuda": "gpu_utilization_pct", "cpu": "cpu_utilization_pct"}


def _cell(ctx: AuditContext) -> dict:
    """S7's values, or NotApplicable when the package does not declare the contrast cell."""
    scope = ctx.spec.get("scope")
    if not declares_contrast_cell(scope, ctx.spec):
        raise NotApplicable(f"the package's declared scope does not name the contrast cell's "
                            f"dataset {contrast_cell(ctx.spec)['dataset']}: it is not the "
                            "contrast cell (S3_data.contrast_cell)")
    return contrast_cell(ctx.spec)


@check("S7.scope", "S7", table="runs")
def contrast_scope(ctx: AuditContext) -> Outcome:
    """A package that declares the contrast cell's dataset declares the cell itself (S7,
    S3_data.contrast_cell): that dataset alone, at the cell's input resolution and batch size."""
    cell = _cell(ctx)
    scope = ctx.spec["scope"]
    problems = []
    if scope["datasets"] != [cell["dataset"]]:
        problems.append(f"datasets {scope['datasets']} (S7: [{cell['dataset']!r}] alone)")
    for key in ("input_resolution_px", "batch_size"):
        if scope.get(key) != cell[key]:
            declared = "not declared" if key not in scope else repr(scope[key])
            problems.append(f"{key} {declared} (S7: {cell[key]})")
    if problems:
        return Outcome.failed("the declared scope is not the contrast cell's: " + "; ".join(problems))
    return Outcome.passed(f"the declared scope is the contrast cell: {cell['dataset']} at "
                          f"{cell['input_resolution_px']} px, batch {cell['batch_size']}")


@check("S7.runs", "S7", table="runs")
def contrast_runs(ctx: AuditContext) -> Outcome:
    """Every run of the contrast cell recorded the cell's dataset, input resolution and batch
    size (S3_data.contrast_cell), whatever its scope declares; an empty cell is a failure."""
    cell = _cell(ctx)
    runs = ctx.runs
    bad = np.zeros(len(runs), dtype=bool)
    problems = []
    for column in CONTRAST_CELL_KEYS:
        missing = runs.missing(column)
        differs = ~missing & np.asarray(runs[column] != cell[column], dtype=bool)
        if differs.any():
            whole = column in runs.integer
            problems.append(f"{column} differs in {int(differs.sum())} ("
                            + describe_counts([cell_text(v, whole) for v in runs[column][differs]])
                            + f"; S7 {cell[column]})")
        if missing.any():
            problems.append(f"{column} not recorded in {int(missing.sum())}")
        bad |= differs | missing
    if bad.any():
        return Outcome.failed("; ".join(problems), rows=int(bad.sum()), details=evidence(
            runs.take(bad).select(["run_id", "ecosystem", *CONTRAST_CELL_KEYS])))
    return Outcome.passed(f"all {len(runs):,} runs ran {cell['dataset']} at "
                          f"{cell['input_resolution_px']} px in batches of {cell['batch_size']}")


@check("S7.utilisation-windows", "S7", table="blocks")
def utilisation_windows(ctx: AuditContext) -> Outcome:
    """Every training block of the contrast cell that lasts one sampler interval or more holds
    a 1 Hz sample of the declared device's utilisation (GPU on cuda, CPU on cpu) inside its
    counter window: the cell's findings are medians of training-block utilisation, and a block
    without one would drop out of them unseen."""
    _cell(ctx)
    device = declared_device(ctx.spec)
    column = UTILISATION_COLUMN[device]
    interval_s = 1.0 / float(ctx.spec["S5_measurement"]["sampler_rate_hz"])
    blocks = ctx.block_runs
    train = blocks.take(blocks["phase"] == "train")
    long_enough = train["duration_s"] >= interval_s
    inside = _samples_inside(ctx, train, column)
    empty = long_enough & (inside == 0)
    if empty.any():
        return Outcome.failed(
            f"{int(empty.sum()):,} of {int(long_enough.sum()):,} training blocks hold no "
            f"{column} sample inside their window ("
            + describe_counts(train["ecosystem"][empty]) + ")", rows=int(empty.sum()),
            details=evidence(train.select(["run_id", "ecosystem", "epoch", "duration_s"]).take(empty)))
    short = int((~long_enough).sum())
    return Outcome.passed(f"all {int(long_enough.sum()):,} training blocks of at least "
                          f"{interval_s:g} s hold {column} samples inside their window (median "
                          f"{float(np.median(inside[long_enough])) if long_enough.any() else 0:.0f})"
                          + (f"; {short:,} shorter blocks cannot be expected to" if short else ""))


def _samples_inside(ctx: AuditContext, blocks: Frame, column: str) -> np.ndarray:
    """For each block, the samples of its run with `column` recorded that fall inside its
    counter window [start, start + duration), on the samples' clock (seconds since the run's
    start).  Validation proved the samples in (run_id, t_s) order: each run is one stretch."""
    samples = ctx.samples
    run_ids, t_s = samples["run_id"], samples["t_s"]
    recorded = np.concatenate([[0], np.cumsum(~samples.missing(column))])
    n = len(run_ids)
    starts = np.flatnonzero(np.concatenate([[n > 0], run_ids[1:] != run_ids[:-1]]))
    stretch = dict(zip(run_ids[starts], zip(starts, np.append(starts[1:], n))))
    run_start = ctx.of_runs("started_at_utc", blocks["run_id"])
    offset_s = seconds(blocks["started_at_utc"] - run_start)
    found = np.zeros(len(blocks), dtype=np.int64)
    codes, ids = factorize(blocks["run_id"])
    for code, run_id in enumerate(ids):
        if run_id not in stretch:
            continue
        first, last = stretch[run_id]
        rows = np.flatnonzero(codes == code)
        lo = first + np.searchsorted(t_s[first:last], offset_s[rows], side="left")
        hi = first + np.searchsorted(t_s[first:last], offset_s[rows] + blocks["duration_s"][rows],
                                     side="left")
        found[rows] = recorded[hi] - recorded[lo]
    return found
