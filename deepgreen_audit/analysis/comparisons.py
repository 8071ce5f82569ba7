"""Pairwise comparisons of ecosystems within each cell.

For every cell (architecture, dataset, phase) and every pair of ecosystems:
the exact two-sided Mann-Whitney test on the repetitions' phase energies (their
durations where the package measured no energy),
the Vargha-Delaney A12 effect size with a seeded bootstrap interval, and
Holm's correction over the whole family of comparisons.  With n
repetitions per side the smallest attainable exact p-value is
2 / C(2n, n) (0.0079 for n = 5): the family size decides whether any
comparison can survive at all, and the paper says so.
"""

from __future__ import annotations

import itertools
import zlib

import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.data import PHASES, Design


def pair_seed(design: Design, *labels: str) -> int:
    """A stable per-comparison seed from the design's bootstrap seed (the study's master seed),
    so adding a cell does not move the others' intervals."""
    return design.bootstrap_seed ^ zlib.crc32("/".join(labels).encode())


#: The columns of a pairwise comparison's row (its Holm-adjusted p and survival are added).
PAIRWISE_COLUMNS = ["architecture", "dataset", "phase", "ecosystem_a", "ecosystem_b", "n_a", "n_b",
                    "p", "a12", "a12_low", "a12_high"]


def pairwise(totals: pd.DataFrame, design: Design, column: str = "energy_j") -> pd.DataFrame:
    """One row per comparison of the repetitions' phase `column` (energy, or duration where
    the package measured no energy): p, Holm-adjusted p, survival, A12 and its interval."""
    measured = totals.dropna(subset=[column])
    rows = []
    groups = {key: g.to_numpy() for key, g in
              measured.groupby(["architecture", "dataset", "phase", "ecosystem"])[column]}
    empty = measured[column].to_numpy()[:0]
    for (arch, ds), phase in itertools.product(design.cells, PHASES):
        energy = {e: groups.get((arch, ds, phase, e), empty) for e in design.ecosystems}
        for a, b in itertools.combinations(design.ecosystems, 2):
            x, y = energy[a], energy[b]
            low, high = stats.bootstrap_interval(stats.a12_batch, [x, y],
                                                 seed=pair_seed(design, arch, ds, phase, a, b),
                                                 n_resamples=design.bootstrap_resamples,
                                                 confidence=design.bootstrap_confidence)
            rows.append({"architecture": arch, "dataset": ds, "phase": phase,
                         "ecosystem_a": a, "ecosystem_b": b, "n_a": len(x), "n_b": len(y),
                         "p": stats.mann_whitney_exact(x, y),
                         "a12": stats.vargha_delaney_a12(x, y), "a12_low": low, "a12_high": high})
    table = pd.DataFrame(rows, columns=PAIRWISE_COLUMNS)
    if table.empty:   # one ecosystem: no pair to compare (the paper says so)
        return table.assign(p_holm=pd.Series(dtype=float), survives=pd.Series(dtype=bool))
    reject, adjusted = stats.holm(table["p"].to_numpy(), design.alpha)
    return table.assign(p_holm=adjusted, survives=reject)


def summary(table: pd.DataFrame, design: Design) -> dict:
    """What the text quotes about the family of comparisons (at the design's alpha)."""
    n = int(table[["n_a", "n_b"]].min().min())
    separated = (table["a12"] == 0.0) | (table["a12"] == 1.0)
    return {
        "comparisons": len(table),
        "survive_holm": int(table["survives"].sum()),
        "uncorrected_below_alpha": int((table["p"] < design.alpha).sum()),
        "smallest_p": float(table["p"].min()),
        "smallest_attainable_p": stats.smallest_exact_p(n, n),
        "holm_first_threshold": design.alpha / len(table),
        "complete_separation": int(separated.sum()),
        "median_effect": float((table["a12"] - 0.5).abs().median() * 2.0),
        "repetitions": n,
    }
