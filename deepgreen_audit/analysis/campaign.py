"""Campaign-level energy: Slurm's whole-run reading beside the blocks, where it was recorded.

Slurm's ``ConsumedEnergy`` (runs.slurm_consumed_energy_j) covers the whole exclusive job:
the blocks and the time between them (start-up, imports, data loading, writing the run).
It is a third reading, never mixed into the block energies; the paper quotes it as the
campaign's energy beyond the blocks.  Whether each run's reading is plausible against its
blocks is the audit's check ``S5.slurm-energy`` (deepgreen_audit/audit/checks/measurement.py),
whose verdict the paper quotes beside these numbers; here the same pairing (a run's reading
against the sum of its blocks, only where every block has counter energy) is summed over
the campaign.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from deepgreen_audit.analysis.data import CampaignTables
from deepgreen_audit.columnar.evidence import run_block_energy_j

#: The runs-table column that holds Slurm's reading.
SLURM_COLUMN = "slurm_consumed_energy_j"


def slurm_energy(tables: CampaignTables) -> dict[str, float | int] | None:
    """Slurm's energy summed over the runs that carry it, their block energy, and how many runs
    that is out of all; None when no run carries Slurm's reading (a local campaign)."""
    runs = tables.optional.get("runs", pd.DataFrame(columns=["run_id"]))
    if SLURM_COLUMN not in runs.columns:
        return None
    measured = runs.dropna(subset=[SLURM_COLUMN])
    if measured.empty:
        return None
    blocks = tables.blocks
    complete = pd.Series(run_block_energy_j(blocks["run_id"].to_numpy(dtype=object),
                                            blocks["energy_j"].to_numpy(dtype=float, na_value=np.nan)),
                         dtype=float).dropna()
    paired = measured.set_index("run_id")[SLURM_COLUMN].to_frame().join(
        complete.rename("blocks_j"), how="inner")
    if paired.empty:
        return None
    return {"runs": len(paired), "runs_total": int(tables.runs["run_id"].nunique()),
            "slurm_j": float(paired[SLURM_COLUMN].sum()),
            "blocks_j": float(paired["blocks_j"].sum())}
