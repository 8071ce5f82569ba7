"""The host as a factor: the spread of a configuration's energy within a host and across hosts.

A campaign collected on several nodes (Slurm) measures each configuration on
more than one host.  Per (configuration, phase), the within-host spread is the
mean over hosts of the coefficient of variation (ddof=1) of the runs on that
host (hosts with two runs or more), and the across-host spread is the
coefficient of variation of the host means.  An across-host spread well above
the within-host one says the hosts are not interchangeable: the host is then a
treatment, not noise.  With one host there is nothing to report (None).
"""

from __future__ import annotations

import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.energy import LABELS


def host_spread(totals: pd.DataFrame, environment: pd.DataFrame,
                column: str = "energy_j") -> pd.DataFrame | None:
    """Per (ecosystem, architecture, dataset, phase): hosts, within_host_cv, across_host_cv of
    the phase `column` (energy, or duration where the package measured no energy)."""
    hosts = environment[["run_id", "host"]].dropna()
    if hosts["host"].nunique() < 2:
        return None
    measured = totals.dropna(subset=[column]).merge(hosts, on="run_id", how="inner")
    rows = []
    for key, group in measured.groupby([*LABELS, "phase"]):
        per_host = group.groupby("host")[column]
        within = [stats.coefficient_of_variation(v) for _, v in per_host if len(v) >= 2]
        rows.append({**dict(zip([*LABELS, "phase"], key)), "hosts": per_host.ngroups,
                     "within_host_cv": sum(within) / len(within) if within else float("nan"),
                     "across_host_cv": stats.coefficient_of_variation(per_host.mean())})
    return pd.DataFrame(rows)
