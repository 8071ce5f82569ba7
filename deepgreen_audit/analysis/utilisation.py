"""Utilisation from the 1 Hz samples, attributed to the block each sample falls in.

A sample at ``t_s`` seconds after its run's start belongs to the block whose
counter window ``[started_at_utc, started_at_utc + duration_s)`` contains it;
samples between blocks, at start-up and at tear-down belong to none and are
left out, so a median describes the measured phases, not the idle gaps.
"""

from __future__ import annotations

import pandas as pd

from deepgreen_audit.analysis.data import CampaignTables, Design, MissingValue


def attributed_samples(tables: CampaignTables) -> pd.DataFrame:
    """Samples that fall inside a block, with the block's phase and the run's ecosystem."""
    runs = tables.runs[["run_id", "ecosystem", "started_at_utc"]]
    s = tables.samples.merge(runs, on="run_id", how="inner")
    s["at"] = s["started_at_utc"] + pd.to_timedelta(s["t_s"], unit="s")
    b = tables.blocks[["run_id", "phase", "started_at_utc", "duration_s"]].rename(
        columns={"started_at_utc": "block_start"})
    b["block_end"] = b["block_start"] + pd.to_timedelta(b["duration_s"], unit="s")
    s = pd.merge_asof(s.sort_values("at"), b.sort_values("block_start"), left_on="at",
                      right_on="block_start", by="run_id", direction="backward")
    return s[s["at"] < s["block_end"]]


def utilisation_medians(tables: CampaignTables, design: Design) -> pd.DataFrame:
    """Median GPU and CPU utilisation per (ecosystem, phase) over the samples inside blocks."""
    s = attributed_samples(tables)
    med = s.groupby(["ecosystem", "phase"])[["gpu_utilization_pct", "cpu_utilization_pct"]] \
        .median()
    for eco in design.ecosystems:
        if (eco, "train") not in med.index or med.loc[(eco, "train")].isna().any():
            raise MissingValue(f"no 1 Hz utilisation sample falls inside a training block of "
                               f"ecosystem {eco}; its median utilisation is missing")
    return med.reset_index()
