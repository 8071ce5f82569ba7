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

Only the columns the package measured are summarised (`columns`): a campaign on the CPU
has no GPU utilisation, and its medians are of the CPU's alone (the paper says why,
`coverage.Coverage.gpu_utilisation`).
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
                        samples: pd.DataFrame | None = None,
                        columns: tuple[str, ...] = tuple(UTILISATION)) -> pd.DataFrame:
    """Median utilisation (`columns`: GPU and CPU by default) per (ecosystem, phase) over the
    samples inside blocks."""
    s = attributed_samples(tables) if samples is None else samples
    med = s.groupby(["ecosystem", "phase"])[list(columns)].median()
    longest = _longest_blocks(tables)
    for eco in design.ecosystems:
        unsampled = (eco, "train") not in med.index or med.loc[(eco, "train")].isna().any()
        reachable = any(longest.get((eco, a, "train"), 0.0) >= design.sampler_interval_s
                        for a in design.architectures)
        if unsampled and reachable:
            raise MissingValue(f"no 1 Hz utilisation sample falls inside a training block of "
                               f"ecosystem {eco}; its median utilisation is missing")
    return med.reset_index()


def utilisation_by_architecture(tables: CampaignTables, design: Design,
                                samples: pd.DataFrame | None = None,
                                columns: tuple[str, ...] = tuple(UTILISATION)) -> pd.DataFrame:
    """Median utilisation (`columns`) and the runs sampled, per (ecosystem, architecture,
    phase), one row for each of the design's, in its order.

    A stack and architecture without any sample inside a block of a phase is a missing value
    naming it, unless that phase's blocks are shorter than the sampler's interval (digits'
    evaluation epoch lasts a tenth of a second): then a 1 Hz sampler cannot be expected to
    land inside one, its medians stay empty and `unsampled_reason` says why."""
    s = attributed_samples(tables) if samples is None else samples
    grouped = s.groupby(["ecosystem", "architecture", "phase"])
    med = grouped[list(columns)].median().join(grouped["run_id"].nunique().rename("runs"))
    index = pd.MultiIndex.from_tuples(
        [(e, a, p) for e in design.ecosystems for a in design.architectures
         for p in PHASES], names=["ecosystem", "architecture", "phase"])
    med = med.reindex(index)
    med["runs"] = med["runs"].fillna(0)
    longest = _longest_blocks(tables)
    absent = med[med[list(columns)].isna().any(axis=1)]
    for e, a, p in absent.index:
        if longest.get((e, a, p), float("inf")) >= design.sampler_interval_s:
            raise MissingValue(f"no 1 Hz utilisation sample falls inside a {p} block of "
                               f"ecosystem {e} with architecture {a}; its median utilisation "
                               "is missing")
    return med.reset_index()


def _longest_blocks(tables: CampaignTables) -> dict[tuple[str, str, str], float]:
    """The longest block duration (s) per (ecosystem, architecture, phase)."""
    b = tables.blocks[["run_id", "phase", "duration_s"]].merge(
        tables.runs[["run_id", "ecosystem", "architecture"]], on="run_id", how="inner")
    return {key: float(v) for key, v in
            b.groupby(["ecosystem", "architecture", "phase"])["duration_s"].max().items()}


def unsampled_reason(tables: CampaignTables, design: Design, phase: str) -> str:
    """Why a phase's medians are empty: its blocks are shorter than the sampler's interval."""
    durations = tables.blocks.loc[tables.blocks["phase"] == phase, "duration_s"]
    return (f"its blocks last at most {durations.max():.2g} s, less than the "
            f"{design.sampler_interval_s:g} s between two samples of the sampler, so no sample "
            "falls inside one")


def sampler_coverage(tables: CampaignTables, samples: pd.DataFrame | None = None) -> dict[str, int]:
    """Runs with at least one sample inside a block, out of all runs of the package."""
    s = attributed_samples(tables) if samples is None else samples
    return {"covered": int(s["run_id"].nunique()), "runs": int(tables.runs["run_id"].nunique())}
