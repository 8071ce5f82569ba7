"""Utilisation from the 1 Hz samples, attributed to the block each sample falls in.

A sample at ``t_s`` seconds after its run's start belongs to the block whose
counter window ``[started_at_utc, started_at_utc + duration_s)`` contains it;
samples between blocks, at start-up and at tear-down belong to none and are
left out, so a median describes the measured phases, not the idle gaps.

Medians are reported per (ecosystem, phase) and per (ecosystem, architecture,
phase): a network that keeps the accelerator busier shows there, and the
study's statement that the accelerator is not saturated rests on it.  The
sampler's *coverage* is the share of the campaign's runs that have at least
one sample inside one of their blocks: a median drawn from few runs says so.
"""

from __future__ import annotations

import pandas as pd

from deepgreen_audit.analysis.data import PHASES, CampaignTables, Design, MissingValue

#: The utilisation columns the medians summarise.
UTILISATION = ["gpu_utilization_pct", "cpu_utilization_pct"]


def attributed_samples(tables: CampaignTables) -> pd.DataFrame:
    """Samples that fall inside a block, with the block's phase and the run's labels."""
    runs = tables.runs[["run_id", "ecosystem", "architecture", "started_at_utc"]]
    s = tables.samples.merge(runs, on="run_id", how="inner")
    s["at"] = s["started_at_utc"] + pd.to_timedelta(s["t_s"], unit="s")
    b = tables.blocks[["run_id", "phase", "started_at_utc", "duration_s"]].rename(
        columns={"started_at_utc": "block_start"})
    b["block_end"] = b["block_start"] + pd.to_timedelta(b["duration_s"], unit="s")
    s = pd.merge_asof(s.sort_values("at"), b.sort_values("block_start"), left_on="at",
                      right_on="block_start", by="run_id", direction="backward")
    return s[s["at"] < s["block_end"]]


def utilisation_medians(tables: CampaignTables, design: Design,
                        samples: pd.DataFrame | None = None) -> pd.DataFrame:
    """Median GPU and CPU utilisation per (ecosystem, phase) over the samples inside blocks."""
    s = attributed_samples(tables) if samples is None else samples
    med = s.groupby(["ecosystem", "phase"])[UTILISATION].median()
    for eco in design.ecosystems:
        if (eco, "train") not in med.index or med.loc[(eco, "train")].isna().any():
            raise MissingValue(f"no 1 Hz utilisation sample falls inside a training block of "
                               f"ecosystem {eco}; its median utilisation is missing")
    return med.reset_index()


def utilisation_by_architecture(tables: CampaignTables, design: Design,
                                samples: pd.DataFrame | None = None) -> pd.DataFrame:
    """Median GPU and CPU utilisation and the runs sampled, per (ecosystem, architecture,
    phase), one row for each of the design's, in its order; a stack and architecture without
    any sample inside a block of a phase is a missing value naming it."""
    s = attributed_samples(tables) if samples is None else samples
    grouped = s.groupby(["ecosystem", "architecture", "phase"])
    med = grouped[UTILISATION].median().join(grouped["run_id"].nunique().rename("runs"))
    index = pd.MultiIndex.from_tuples(
        [(e, a, p) for e in design.ecosystems for a in design.architectures
         for p in PHASES], names=["ecosystem", "architecture", "phase"])
    med = med.reindex(index)
    absent = med[med[UTILISATION].isna().any(axis=1)]
    if len(absent):
        e, a, p = absent.index[0]
        raise MissingValue(f"no 1 Hz utilisation sample falls inside a {p} block of ecosystem "
                           f"{e} with architecture {a}; its median utilisation is missing")
    return med.reset_index()


def sampler_coverage(tables: CampaignTables, samples: pd.DataFrame | None = None) -> dict[str, int]:
    """Runs with at least one sample inside a block, out of all runs of the package."""
    s = attributed_samples(tables) if samples is None else samples
    return {"covered": int(s["run_id"].nunique()), "runs": int(tables.runs["run_id"].nunique())}
