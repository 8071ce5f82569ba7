"""Final accuracy per run, its spread over ecosystems, and training collapses.

A run's final accuracy is the test accuracy of the evaluation block of its
last planned epoch (a run whose last evaluation is missing has none).  A
training *collapse* is a final accuracy within the specification's
`analysis.collapse_margin_fraction` of chance (1 / classes, classes from S3);
its rate is bounded above with an exact one-sided Clopper-Pearson interval
(confidence `analysis.collapse_confidence`), which stays informative when no
collapse is seen.
"""

from __future__ import annotations

import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.data import CampaignTables, Design, MissingValue


def final_accuracy(tables: CampaignTables) -> pd.DataFrame:
    """One row per completed run with its final test accuracy (NaN when not recorded)."""
    runs = tables.runs[tables.runs["status"] == "completed"]
    last = tables.blocks[tables.blocks["phase"] == "eval"][["run_id", "epoch", "test_accuracy"]]
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
