"""S2 optimisation: what the runs' losses say about the training they record."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.batchnorm import RunningStatistics, min_steps, optimiser_steps, scope_steps_per_epoch
from deepgreen_audit.columnar.evidence import evidence
from deepgreen_audit.columnar.frame import Frame, Groups
from deepgreen_audit.suite.registry import Outcome, Skip, check

#: likely_cause of a run whose evaluation cannot measure its weights yet, and of any other
BATCHNORM_LAG, NOT_BATCHNORM = "batchnorm-running-statistics", "not-batchnorm"


@dataclass(frozen=True)
class FinalEpoch:
    """A run's last epoch with both a training and an evaluation loss."""

    run_id: str
    epoch: int
    train_loss: float
    eval_loss: float
    test_accuracy: float
    #: ceil(samples_processed / batch_size) of that epoch's train block (None: not recorded)
    steps_per_epoch: int | None


def final_epochs(blocks: Frame, batch_size_of: dict[str, float]) -> list[FinalEpoch]:
    """Each run's last epoch whose train and eval blocks both record a loss."""
    epoch, phase, loss = blocks["epoch"], blocks["phase"], blocks["loss"]
    accuracy, samples = blocks["test_accuracy"], blocks["samples_processed"]
    found = []
    for rows in Groups(blocks["run_id"]).rows():
        train = {int(epoch[i]): i for i in rows if phase[i] == "train" and not np.isnan(loss[i])}
        test = {int(epoch[i]): i for i in rows if phase[i] == "eval" and not np.isnan(loss[i])}
        common = set(train) & set(test)
        if not common:
            continue
        last = max(common)
        t, e = train[last], test[last]
        run_id = str(blocks["run_id"][t])
        batch = batch_size_of.get(run_id, math.nan)
        steps = None if np.isnan(samples[t]) or np.isnan(batch) else optimiser_steps(int(samples[t]), int(batch))
        found.append(FinalEpoch(run_id, last, float(loss[t]), float(loss[e]), float(accuracy[e]), steps))
    return found


def _statistics(ctx: AuditContext, final: FinalEpoch, architecture: str, dataset: str) -> RunningStatistics:
    """The run's optimiser steps against what BatchNorm's running statistics need (the
    recorded samples of its last epoch, else the scope's steps per epoch)."""
    per_epoch = final.steps_per_epoch
    if per_epoch is None:
        per_epoch = scope_steps_per_epoch(ctx.spec, dataset)
    return RunningStatistics(architecture, dataset, per_epoch, final.epoch, min_steps(ctx.spec))


def _causes(lagging: list[RunningStatistics], others: int) -> str:
    """The likely cause of each flagged group of runs, in words."""
    parts = []
    for stats in dict.fromkeys(lagging):  # one sentence per configuration's steps
        parts.append(f"{stats.architecture} on {stats.dataset} took {stats.shortfall()}, so "
                     f"evaluation normalises with statistics of earlier weights "
                     f"({stats.epochs_needed:,} epochs would be enough; docs/analysis.md)")
    if others:
        parts.append(f"{others} run(s) took enough optimiser steps for BatchNorm's running "
                     f"statistics (or have no BatchNorm), so their gap is not that lag: the "
                     f"training set learned far better than the test set (overfitting), or an "
                     f"evaluation that differs from training (labels, preprocessing)")
    return "; ".join(parts)


@check("S2.train-eval-gap", "S2", severity="warning", table="runs")
def train_eval_gap(ctx: AuditContext) -> Outcome:
    """Every run's final evaluation loss is within train_eval_gap_max_chance_fraction of
    chance-level loss ln(classes) above its final training loss.  A larger gap means the
    reported test accuracy does not measure what training reached; the finding names the
    likely cause from the run's optimiser steps: too few for BatchNorm's running statistics
    to follow the weights (fewer than batchnorm_min_horizons x 1 / momentum; a short smoke
    scope, digits at 12 steps an epoch), else a gap those statistics do not explain."""
    runs = ctx.runs
    row_of = {run_id: i for i, run_id in enumerate(runs["run_id"])}
    finals = final_epochs(ctx.blocks, dict(zip(runs["run_id"], runs["batch_size"].astype(float))))
    if not finals:
        raise Skip("no run records both a training and an evaluation loss in one epoch")
    tolerance = float(ctx.tolerances.train_eval_gap_max_chance_fraction)
    classes = ctx.spec["S3_data"]["classes"]
    flagged, lagging, gaps = [], [], []
    for final in finals:
        i = row_of[final.run_id]
        architecture, dataset = runs["architecture"][i], runs["dataset"][i]
        if dataset not in classes:
            continue  # S3.datasets reports it
        gap = (final.eval_loss - final.train_loss) / math.log(classes[dataset])
        gaps.append(gap)
        if gap > tolerance:
            stats = _statistics(ctx, final, architecture, dataset)
            flagged.append((final, runs["ecosystem"][i], stats, gap))
            if not stats.follow:
                lagging.append(stats)
    if not gaps:
        raise Skip("no run with a final loss is of a dataset the specification names")
    if not flagged:
        return Outcome.passed(f"all {len(gaps):,} runs end with an evaluation loss within "
                              f"{tolerance} x ln(classes) of their training loss (largest gap "
                              f"{max(gaps):.2f} x ln(classes))")
    table = Frame.of({
        "run_id": [f.run_id for f, *_ in flagged], "ecosystem": [e for _, e, *_ in flagged],
        "architecture": [s.architecture for _, _, s, _ in flagged],
        "dataset": [s.dataset for _, _, s, _ in flagged], "epoch": [f.epoch for f, *_ in flagged],
        "train_loss": [f.train_loss for f, *_ in flagged], "eval_loss": [f.eval_loss for f, *_ in flagged],
        "gap_chance_fraction": [g for *_, g in flagged],
        "test_accuracy": [f.test_accuracy for f, *_ in flagged],
        "optimiser_steps": [s.steps for _, _, s, _ in flagged],
        "batchnorm_steps_needed": [s.needed_steps if s.has_batchnorm else None for _, _, s, _ in flagged],
        "likely_cause": [NOT_BATCHNORM if s.follow else BATCHNORM_LAG for _, _, s, _ in flagged]},
        integer=("epoch", "optimiser_steps"))
    worst = max(g for *_, g in flagged)
    return Outcome.failed(
        f"{len(flagged)} of {len(gaps):,} run(s) end with an evaluation loss more than "
        f"{tolerance} x ln(classes) above their training loss (up to {worst:.2f} x"
        f"{_accuracy_range(table['test_accuracy'])}): likely cause: "
        f"{_causes(lagging, len(flagged) - len(lagging))}",
        rows=len(flagged), details=evidence(table))


def _accuracy_range(accuracy: np.ndarray) -> str:
    """'; test accuracy 13% to 28%' (nothing when no flagged run recorded one)."""
    recorded = accuracy[~np.isnan(accuracy)]
    if not len(recorded):
        return ""
    low, high = f"{recorded.min():.0%}", f"{recorded.max():.0%}"
    return f"; test accuracy {low}" + ("" if low == high else f" to {high}")
