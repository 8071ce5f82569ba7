"""Final accuracy per run, its spread over ecosystems, and training collapses.

A run's final accuracy is the test accuracy of the evaluation block of its
last planned epoch (a run whose last evaluation is missing has none).  A
training *collapse* is a final accuracy within the specification's
`analysis.collapse_margin_fraction` of chance (1 / classes, classes from S3);
its rate is bounded above with an exact one-sided Clopper-Pearson interval
(confidence `analysis.collapse_confidence`), which stays informative when no
collapse is seen.

The bound the paper leads with is the one on the *susceptible cells*: the runs
of the (architecture, dataset) cells `analysis.collapse_susceptible_cells`
names (VGG-16 on CIFAR-100 and on Tiny ImageNet, with its reason in
`analysis.collapse_susceptible_reason`), since pooling them with runs that
cannot collapse would shrink the bound without saying anything about the runs
at risk (the study's 0 of 70 runs, 7 ecosystems x 2 cells x 5 repetitions:
4.2 %; over all 105 VGG-16 runs it would be 2.8 %).  It is the
one-sided bound: the upper end of the interval ``[0, p_U]`` that covers the
rate with probability ``collapse_confidence``, i.e. ``Beta(1 - alpha; x + 1,
n - x)`` with ``alpha = 1 - collapse_confidence``, which for 0 of n is
``1 - alpha ** (1 / n)`` (not the upper end of the two-sided interval, which
uses ``alpha / 2``).  Beside it: the share of the campaign's training energy
that collapsed runs spent (`wasted_training_share`).
"""

from __future__ import annotations

import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.data import CampaignTables, Design, MissingValue


def final_accuracy(tables: CampaignTables) -> pd.DataFrame:
    """One row per completed run with its final test accuracy (NaN when not recorded)."""
    return final_accuracy_of(tables.runs, tables.blocks)


def final_accuracy_of(runs: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """`final_accuracy` from the runs and blocks columns it reads."""
    runs = runs[runs["status"] == "completed"]
    last = blocks[blocks["phase"] == "eval"][["run_id", "epoch", "test_accuracy"]]
    out = runs[["run_id", "ecosystem", "architecture", "dataset", "epochs"]].merge(
        last, left_on=["run_id", "epochs"], right_on=["run_id", "epoch"], how="left")
    return out.drop(columns=["epoch"])


def accuracy_spreads(final: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per (architecture, dataset): most minus least accurate ecosystem's median, in points."""
    rows = []
    for arch, ds in design.cells:
        cell = final[(final["architecture"] == arch) & (final["dataset"] == ds)]
        med = cell.groupby("ecosystem")["test_accuracy"].median().reindex(list(design.ecosystems))
        if med.isna().any():
            eco = med[med.isna()].index[0]
            raise MissingValue(f"no final test accuracy for configuration ecosystem={eco}, "
                               f"architecture={arch}, dataset={ds}")
        rows.append({"architecture": arch, "dataset": ds,
                     "spread_pp": 100.0 * (med.max() - med.min()),
                     "most_accurate": med.idxmax(), "least_accurate": med.idxmin()})
    return pd.DataFrame(rows)


def collapses(final: pd.DataFrame, design: Design) -> dict:
    """Collapsed runs, runs judged, and the exact upper bound on the collapse rate."""
    judged = final.dropna(subset=["test_accuracy"])
    if judged.empty:
        raise MissingValue("no run has a final test accuracy, so the collapse rate is missing")
    chance = judged["dataset"].map(lambda d: 1.0 / design.classes[d])
    collapsed = int((judged["test_accuracy"] <= chance + design.collapse_margin_fraction).sum())
    return {"collapsed": collapsed, "runs": len(judged),
            "upper_bound": stats.clopper_pearson_upper(collapsed, len(judged),
                                                       design.collapse_confidence)}


def collapsed_runs(final: pd.DataFrame, design: Design) -> pd.Series:
    """Per judged run (those with a final accuracy), whether its training collapsed."""
    judged = final.dropna(subset=["test_accuracy"])
    chance = judged["dataset"].map(lambda d: 1.0 / design.classes[d])
    return pd.Series((judged["test_accuracy"] <= chance + design.collapse_margin_fraction).to_numpy(),
                     index=judged["run_id"].to_numpy(), name="collapsed")


def susceptible_collapses(final: pd.DataFrame, design: Design) -> dict:
    """Collapses on the susceptible cells only: collapsed runs, runs judged and the exact
    one-sided upper bound (`stats.clopper_pearson_upper`) on their collapse rate."""
    if not design.collapse_susceptible:
        raise MissingValue("the design holds none of the cells [analysis] "
                           "collapse_susceptible_cells names, so there is no "
                           "susceptible cell to bound")
    cell = pd.Series(list(zip(final["architecture"], final["dataset"])), index=final.index)
    at_risk = final[cell.isin(design.collapse_susceptible)]
    flags = collapsed_runs(at_risk, design)
    if flags.empty:
        raise MissingValue("no run of the susceptible cells ("
                           + ", ".join("/".join(c) for c in design.collapse_susceptible)
                           + ") has a final test accuracy, so their collapse rate is missing")
    collapsed = int(flags.sum())
    return {"collapsed": collapsed, "runs": len(flags),
            "upper_bound": stats.clopper_pearson_upper(collapsed, len(flags),
                                                       design.collapse_confidence)}


def wasted_training_share(final: pd.DataFrame, totals: pd.DataFrame, design: Design,
                          column: str = "energy_j") -> float:
    """The share of the campaign's training energy (phase totals of every completed run with
    training energy) that runs whose training collapsed spent: energy that bought no model.
    Where the package measured no energy, `column` is the training time, and the share is
    of the time."""
    train = totals[(totals["phase"] == "train")].dropna(subset=[column])
    whole = float(train[column].sum())
    if whole <= 0:
        raise MissingValue("no run has a training total, so the share collapsed runs wasted "
                           "is missing")
    flags = collapsed_runs(final, design)
    wasted = float(train[train["run_id"].isin(flags[flags].index)][column].sum())
    return wasted / whole
