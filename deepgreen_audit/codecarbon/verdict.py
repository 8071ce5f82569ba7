"""The verdict in plain words, for each CodeCarbon run and each log: measured, partly modelled
(which components, and what share of the energy), modelled, or, for a 1.x log, not known.

A component counts as modelled when its power is one of CodeCarbon's models (named), or one
constant repeated to every digit across runs; RAM is always modelled (CodeCarbon has no RAM
counter).  A CPU power that varies under CodeCarbon 3 may be a counter or the load model: it
is "measured or modelled" and the verdict says so, never counting it as measured.
"""

from __future__ import annotations

import math

import pandas as pd

from deepgreen_audit.codecarbon.context import (ABSENT, MEASURED, MODELLED, NOT_TRACKED,
                                                UNKNOWN, UNVERIFIED, LogContext)

MEASURED_V, PARTLY_V, MODELLED_V, UNKNOWN_V = "measured", "partly modelled", "modelled", "not known"


def _pct(x: float) -> str:
    if not math.isfinite(x):
        return "?"
    return f"{x:.0%}" if x >= 0.01 or x == 0 else "<1%"


def run_verdicts(ctx: LogContext) -> pd.DataFrame:
    """One row per run (its final row): verdict, modelled share of the energy, and the words."""
    comps = ctx.components
    finals = comps[comps["final_row"].astype(bool)]
    out = []
    if finals.empty:
        finals = None
    for (source_file, run_key), part in (finals.groupby(["source_file", "run_key"], sort=False)
                                         if finals is not None else []):
        line = int(part["source_line"].iloc[0])
        used = part[~part["status"].isin([ABSENT])]
        if (used["status"] == UNKNOWN).all():
            out.append({"source_file": source_file, "run_key": run_key, "source_line": line,
                        "verdict": UNKNOWN_V, "modelled_share": float("nan"),
                        "words": "not known: CodeCarbon 1.x logs only the total, not how each "
                                 "component's power was obtained"})
            continue
        energy = used["energy_kwh"].fillna(0.0).clip(lower=0.0)
        total = float(energy.sum())
        share = (energy / total) if total > 0 else energy * 0.0
        modelled = used["status"].isin([MODELLED])
        unverified = used["status"] == UNVERIFIED
        measured = used["status"] == MEASURED
        modelled_share = float(share[modelled].sum()) if total > 0 else float("nan")
        if modelled.any() and not (measured.any() or unverified.any()):
            verdict = MODELLED_V
        elif modelled.any() or unverified.any() or (used["status"] == NOT_TRACKED).any():
            verdict = PARTLY_V
        else:
            verdict = MEASURED_V
        parts = []
        for _, c in used.iterrows():
            name = c["component"].upper()
            s = _pct(float(share.loc[c.name])) if total > 0 else "?"
            if c["status"] == NOT_TRACKED:
                parts.append(f"{name} not tracked (0 W): the total leaves it out")
            elif c["status"] == MODELLED:
                parts.append(f"{name} modelled ({c['how']}), {s} of the energy")
            elif c["status"] == UNVERIFIED:
                parts.append(f"{name} measured or load-modelled, the log cannot tell ({s})")
            else:
                parts.append(f"{name} measured ({s})")
        words = verdict + (f": {_pct(modelled_share)} of the energy modelled" if verdict != MEASURED_V
                           and math.isfinite(modelled_share) else "") + "; " + "; ".join(parts)
        out.append({"source_file": source_file, "run_key": run_key, "source_line": line,
                    "verdict": verdict, "modelled_share": modelled_share, "words": words,
                    "energy_kwh": total})
    return pd.DataFrame(out, columns=["source_file", "run_key", "source_line", "verdict",
                                      "modelled_share", "words", "energy_kwh"])


def log_verdicts(ctx: LogContext, runs: pd.DataFrame | None = None) -> list[dict]:
    """One verdict per log: over its runs, with the modelled share of its summed energy."""
    runs = run_verdicts(ctx) if runs is None else runs
    out = []
    for source_file in sorted(set(ctx.source_files) - set(runs["source_file"])):
        out.append({"source_file": source_file, "verdict": UNKNOWN_V, "runs": 0,
                    "modelled_share": float("nan"), "words": "not known: the log has no rows"})
    for source_file, part in runs.groupby("source_file", sort=True):
        kinds = part["verdict"].value_counts()
        if set(kinds.index) == {UNKNOWN_V}:
            verdict = UNKNOWN_V
        elif set(kinds.index) == {MEASURED_V}:
            verdict = MEASURED_V
        elif set(kinds.index) == {MODELLED_V}:
            verdict = MODELLED_V
        else:
            verdict = PARTLY_V
        energy = part.get("energy_kwh", pd.Series(dtype=float)).fillna(0.0)
        modelled = (part["modelled_share"].fillna(0.0) * energy).sum()
        share = float(modelled / energy.sum()) if energy.sum() > 0 else float("nan")
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items())
        words = (f"{verdict}: {len(part)} run(s) ({counts})"
                 + (f"; {_pct(share)} of the logged energy modelled" if math.isfinite(share)
                    and verdict != UNKNOWN_V else ""))
        out.append({"source_file": source_file, "verdict": verdict, "runs": int(len(part)),
                    "modelled_share": share, "words": words})
    return out
