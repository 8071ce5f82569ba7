"""Energy per run phase, per configuration, and its spread over ecosystems.

A run's phase energy is the sum of its blocks of that phase at the
measurement boundary (``energy_j``), over the
epochs after the first ``[analysis] warmup_epochs_excluded`` (0: every epoch,
the warm-up included, since a run's energy is what its user pays).  A run phase
with any block lacking counter energy has no phase energy (it is never
summed partially); a configuration's value is the median over its completed
repetitions.  The spread of a cell (architecture, dataset, phase) is the
median energy of its most expensive ecosystem over that of its least
expensive one.

A package that measured no energy (`coverage.Coverage.primary_column`) ranks its stacks by
the phase durations instead, which every collection measures: every function below that
ranks or spreads takes the `column` it works on (``energy_j`` or ``duration_s``), and the
paper names what it ranked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.data import PHASES, CampaignTables, Design, MissingValue

LABELS = ["ecosystem", "architecture", "dataset"]


def phase_totals(tables: CampaignTables, design: Design) -> pd.DataFrame:
    """One row per (completed run, phase): summed energy and durations of its blocks of the
    epochs after the first `design.warmup_epochs_excluded`."""
    runs = tables.runs[tables.runs["status"] == "completed"]
    blocks = tables.blocks[tables.blocks["run_id"].isin(runs["run_id"])
                           & (tables.blocks["epoch"] > design.warmup_epochs_excluded)]
    summed = ["energy_j", "duration_s", "codecarbon_energy_j", "codecarbon_duration_s"]
    grouped = blocks.groupby(["run_id", "phase"], sort=False)
    totals = grouped[summed].sum()
    incomplete = grouped[summed].count().lt(grouped.size(), axis=0)
    totals = totals.mask(incomplete).assign(blocks=grouped.size()).reset_index()
    return totals.merge(runs[["run_id", *LABELS, "repetition"]], on="run_id", how="inner")


def counted_epochs_text(warmup_epochs_excluded: int) -> str:
    """The epochs a run's phase energy sums, in words, for the paper (the one statement of
    the rule is `[analysis] warmup_epochs_excluded`; the text follows it)."""
    if warmup_epochs_excluded == 0:
        return "every epoch, the warm-up epoch included: a run's energy is what its user pays"
    if warmup_epochs_excluded == 1:
        return "every epoch after the first, leaving the warm-up epoch out"
    return f"every epoch after the first {warmup_epochs_excluded}, leaving the warm-up epochs out"


#: What each column the spreads may rank is, in the words of the messages.
QUANTITY_WORDS = {"energy_j": "counter energy", "duration_s": "phase duration"}


def configuration_medians(totals: pd.DataFrame, design: Design,
                          column: str = "energy_j") -> pd.DataFrame:
    """Median phase energy and duration per (ecosystem, architecture, dataset, phase), over
    the runs that carry `column`.

    Every configuration of the design must have at least one completed run
    with `column` (counter energy, or the duration where the package measured no energy);
    otherwise the value the paper quotes is missing.
    """
    measured = totals.dropna(subset=[column])
    med = measured.groupby([*LABELS, "phase"]).agg(
        energy_j=("energy_j", "median"), duration_s=("duration_s", "median"),
        repetitions=(column, "size")).reset_index()
    index = pd.MultiIndex.from_tuples(
        [(e, a, d, p) for e, a, d in design.configurations for p in PHASES],
        names=[*LABELS, "phase"])
    med = med.set_index([*LABELS, "phase"]).reindex(index)
    absent = med[med[column].isna()]
    if len(absent):
        e, a, d, p = absent.index[0]
        what = QUANTITY_WORDS[column]
        raise MissingValue(
            f"no completed run with {what} for configuration ecosystem={e}, "
            f"architecture={a}, dataset={d} (phase {p}); the experiment specification plans "
            f"it, so the paper's median {what} of that configuration is missing"
            + (f" ({len(absent)} configuration-phases missing in all)" if len(absent) > 1 else ""))
    return med.reset_index()


def _spread_row(values: pd.Series) -> dict:
    return {"spread": values.max() / values.min(), "cheapest": values.idxmin(),
            "most_expensive": values.idxmax(), "min": values.min(), "max": values.max()}


def cell_spreads(medians: pd.DataFrame, design: Design, column: str = "energy_j") -> pd.DataFrame:
    """Per (architecture, dataset, phase): spread of `column` over all ecosystems and over
    the control group."""
    rows = []
    for (arch, ds), phase in ((c, p) for c in design.cells for p in PHASES):
        cell = medians[(medians["architecture"] == arch) & (medians["dataset"] == ds)
                       & (medians["phase"] == phase)].set_index("ecosystem")[column]
        row = {"architecture": arch, "dataset": ds, "phase": phase, **_spread_row(cell)}
        control = cell.reindex(list(design.control_group)).dropna()
        if len(control) >= 2:
            ctl = _spread_row(control)
            row.update(control_spread=ctl["spread"], control_cheapest=ctl["cheapest"])
        else:
            row.update(control_spread=np.nan, control_cheapest=None)
        rows.append(row)
    return pd.DataFrame(rows)


def spread_interval(totals: pd.DataFrame, architecture: str, dataset: str, phase: str,
                    ecosystems, *, seed: int, n_resamples: int,
                    confidence: float, column: str = "energy_j") -> tuple[float, float]:
    """Bootstrap interval of a cell's spread of `column`, resampling repetitions within each
    ecosystem."""
    cell = totals[(totals["architecture"] == architecture) & (totals["dataset"] == dataset)
                  & (totals["phase"] == phase)].dropna(subset=[column])
    samples = [cell.loc[cell["ecosystem"] == e, column].to_numpy() for e in ecosystems]

    def spread(*resampled):
        medians = np.stack([np.median(r, axis=1) for r in resampled], axis=1)
        return medians.max(axis=1) / medians.min(axis=1)

    return stats.bootstrap_interval(spread, samples, seed=seed, n_resamples=n_resamples,
                                    confidence=confidence)


def variability(totals: pd.DataFrame, column: str = "energy_j") -> pd.DataFrame:
    """Between-run coefficient of variation (ddof=1) of phase `column` per configuration."""
    measured = totals.dropna(subset=[column])
    return (measured.groupby([*LABELS, "phase"])[column]
            .agg(stats.coefficient_of_variation).rename("cv").reset_index())


def energy_time_correlation(totals: pd.DataFrame, phase: str, duration_column: str,
                            design: Design) -> dict | None:
    """Spearman rho of phase energy against phase duration: pooled, and its range within
    cells; None when no cell has runs enough (three, not all alike) to correlate."""
    rows = totals[(totals["phase"] == phase)].dropna(subset=["energy_j", duration_column])
    within = [stats.spearman(c["energy_j"], c[duration_column])
              for (a, d) in design.cells
              for c in [rows[(rows["architecture"] == a) & (rows["dataset"] == d)]]]
    within = [r for r in within if r == r]
    if not within:
        return None
    return {"pooled": stats.spearman(rows["energy_j"], rows[duration_column]),
            "within_min": min(within), "within_max": max(within), "runs": len(rows)}


def cheapest_rule(blocks: pd.DataFrame, design: Design) -> dict[str, dict[str, float | bool]]:
    """Per phase: its median block duration (seconds), the shortest median that may name a
    cheapest stack (`[analysis] cheapest_min_sampler_intervals` sampler intervals), and
    whether this phase names one.

    A phase whose blocks are shorter than a few sampler intervals measures start-up,
    synchronisation and the instruments' own windows beside the work: an ecosystem that is
    cheapest there is not cheapest at the work, so no table bolds it and the text names none.
    """
    threshold = design.cheapest_min_sampler_intervals * design.sampler_interval_s
    rule = {}
    for phase in PHASES:
        durations = blocks.loc[blocks["phase"] == phase, "duration_s"].dropna()
        if durations.empty:
            raise MissingValue(f"no {phase} block has a duration, so the rule that decides "
                               "whether that phase names a cheapest stack cannot be applied")
        median = float(durations.median())
        rule[phase] = {"median_block_s": median, "threshold_s": threshold,
                       "names_cheapest": median >= threshold}
    return rule
