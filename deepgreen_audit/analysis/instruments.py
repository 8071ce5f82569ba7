"""The two instruments side by side: CodeCarbon against the hardware counters, per block.

CodeCarbon integrates power it samples every ``codecarbon_interval_s``
(S5), over a tracker that starts before and stops after the counter
window.  Three numbers summarise how far its reading can be trusted:
the median relative difference of its energy against the counters, the
share of blocks whose CodeCarbon duration outlasts the counter window by
more than one sampling interval, and the largest understatement of mean
power one would derive from CodeCarbon's energy over CodeCarbon's duration.
"""

from __future__ import annotations

import pandas as pd


def paired_blocks(blocks: pd.DataFrame) -> pd.DataFrame | None:
    """Blocks with both readings, with the derived comparison columns; None when no block
    carries both (a package without counter energy: nothing to compare)."""
    both = blocks.dropna(subset=["energy_j", "codecarbon_energy_j", "codecarbon_duration_s"])
    both = both[(both["energy_j"] > 0) & (both["duration_s"] > 0)
                & (both["codecarbon_duration_s"] > 0)]
    if both.empty:
        return None
    counter_power = both["energy_j"] / both["duration_s"]
    codecarbon_power = both["codecarbon_energy_j"] / both["codecarbon_duration_s"]
    return both.assign(
        relative_difference=(both["codecarbon_energy_j"] - both["energy_j"]) / both["energy_j"],
        overhang_s=both["codecarbon_duration_s"] - both["duration_s"],
        power_understatement=1.0 - codecarbon_power / counter_power,
    )


def agreement(both: pd.DataFrame, interval_s: float) -> dict:
    """The three summary numbers of the agreement (fractions, not percent) over the paired
    blocks `both` (`paired_blocks`)."""
    worst = both.loc[both["power_understatement"].idxmax()]
    return {
        "blocks": len(both),
        "median_relative_difference": float(both["relative_difference"].median()),
        "overhang_share": float((both["overhang_s"] > interval_s).mean()),
        "largest_power_understatement": float(worst["power_understatement"]),
        "largest_understatement_phase": str(worst["phase"]),
        "largest_understatement_duration_s": float(worst["duration_s"]),
    }
