"""The verdict in plain words, for each CodeCarbon run and each log: measured, partly modelled
(which components, and what share of the energy), modelled, or, for a 1.x log, not known.

A component counts as modelled when its power is one of CodeCarbon's models (named), or one
constant repeated to every digit across runs; RAM is always modelled (CodeCarbon has no RAM
counter).  A CPU power that varies under CodeCarbon 3 may be a counter or the load model: it
is "measured or modelled" and the verdict says so, never counting it as measured.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from deepgreen_audit.codecarbon.context import (
    ABSENT,
    MEASURED,
    MODELLED,
    NOT_TRACKED,
    UNKNOWN,
    UNVERIFIED,
    LogContext,
    frame_of,
)
from deepgreen_audit.columnar.evidence import evidence_column

MEASURED_V, PARTLY_V, MODELLED_V, UNKNOWN_V = "measured", "partly modelled", "modelled", "not known"


def _pct(x: float) -> str:
    if not math.isfinite(x):
        return "?"
    return f"{x:.0%}" if x >= 0.01 or x == 0 else "<1%"


def _energy_weighted(shares: pd.Series, energy: pd.Series) -> float:
    """The runs' modelled shares weighted by their energy, NaN when there is no energy.  The
    energies are divided by the largest first: a log's energies near a float's limit (1e308
    kWh, which S5.cc-magnitudes fails) would overflow their sum to inf, and the share to NaN."""
    largest = float(energy.abs().max()) if len(energy) else 0.0
    if not (largest > 0 and math.isfinite(largest)):
        return float("nan")
    weights = energy / largest
    return float((shares * weights).sum() / weights.sum()) if weights.sum() > 0 else float("nan")


def _component_words(component: str, share: float, total: float, status: str, how: str) -> str:
    name = component.upper()
    s = _pct(share) if total > 0 else "?"
    if status == NOT_TRACKED:
        return f"{name} not tracked (0 W): the total leaves it out"
    if status == MODELLED:
        return f"{name} modelled ({how}), {s} of the energy"
    if status == UNVERIFIED:
        return f"{name} measured or load-modelled, the log cannot tell ({s})"
    return f"{name} measured ({s})"


RUN_COLUMNS = ["source_file", "run_key", "source_line", "verdict", "modelled_share", "words",
               "energy_kwh"]


def run_verdicts(ctx: LogContext) -> pd.DataFrame:
    """One row per run (its final row): verdict, modelled share of the energy, and the words
    (one text object for the runs that share it: a long log's runs mostly do)."""
    comps = ctx.components
    used = (comps["final_row"].to_numpy(dtype=bool) & (comps["status"] != ABSENT).to_numpy())
    if not used.any():
        return pd.DataFrame([], columns=RUN_COLUMNS)
    column = {name: comps[name].to_numpy()[used] for name in
              ("source_file", "run_key", "source_line", "component", "status", "how")}
    # each run a number, in order of appearance (as groupby's sort=False)
    files, _ = pd.factorize(column["source_file"])
    keys, key_values = pd.factorize(column["run_key"])
    run, _ = pd.factorize(files.astype(np.int64) * (len(key_values) + 1) + keys)
    e = np.clip(np.nan_to_num(comps["energy_kwh"].to_numpy(dtype=float)[used], nan=0.0), 0.0, None)
    status = column["status"]
    numbers = pd.DataFrame({"run": run, "e": e, "modelled_e": np.where(status == MODELLED, e, 0.0),
                            **{flag: status == value for flag, value in (
                                ("modelled", MODELLED), ("unverified", UNVERIFIED),
                                ("measured", MEASURED), ("untracked", NOT_TRACKED),
                                ("unknown", UNKNOWN))}})
    g = numbers.groupby("run", sort=False)
    total = g["e"].transform("sum").to_numpy()
    share = np.where(total > 0, np.divide(e, total, out=np.zeros_like(e), where=total > 0), 0.0)
    runs = g.agg(total=("e", "sum"), modelled_e=("modelled_e", "sum"), modelled=("modelled", "any"),
                 unverified=("unverified", "any"), measured=("measured", "any"),
                 untracked=("untracked", "any"), unknown=("unknown", "all"))
    texts: dict[str, str] = {}
    words_of: list[list[str]] = [[] for _ in range(len(runs))]
    first_of = np.full(len(runs), -1)
    for k, said in enumerate(zip(column["component"], share, total, status, column["how"])):
        text = _component_words(*said)
        words_of[run[k]].append(texts.setdefault(text, text))
        if first_of[run[k]] < 0:
            first_of[run[k]] = k
    out: dict[str, list] = {name: [] for name in RUN_COLUMNS}
    unknown_words = ("not known: CodeCarbon 1.x logs only the total, not how each component's "
                     "power was obtained")
    for n, r in enumerate(runs.itertuples()):
        if r.unknown:
            verdict, fraction, energy, words = UNKNOWN_V, float("nan"), float("nan"), unknown_words
        else:
            fraction = r.modelled_e / r.total if r.total > 0 else float("nan")
            if r.modelled and not (r.measured or r.unverified):
                verdict = MODELLED_V
            elif r.modelled or r.unverified or r.untracked:
                verdict = PARTLY_V
            else:
                verdict = MEASURED_V
            words = verdict + (f": {_pct(fraction)} of the energy modelled" if verdict != MEASURED_V
                               and math.isfinite(fraction) else "") + "; " + "; ".join(words_of[n])
            energy = float(r.total)
        k = first_of[n]
        for name, value in (("source_file", column["source_file"][k]),
                            ("run_key", column["run_key"][k]),
                            ("source_line", int(column["source_line"][k])), ("verdict", verdict),
                            ("modelled_share", float(fraction)),
                            ("words", texts.setdefault(words, words)), ("energy_kwh", energy)):
            out[name].append(value)
    return frame_of(out, RUN_COLUMNS)


def worst_findings(findings, ctx: LogContext) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """The worst finding of each log and of each run (its file and run_key): the first failing
    check, in report order, whose evidence names one of its rows, else the first warning one."""
    run_of = {(f, int(line)): key for f, line, key in
              zip(ctx.rows["source_file"], ctx.rows["source_line"], ctx.rows["run_key"])}
    of_log: dict[str, str] = {}
    of_run: dict[tuple[str, str], str] = {}
    for status in ("fail", "warn"):
        for finding in findings:
            if finding.status != status:
                continue
            rows = (finding.details or {}).get("evidence") or []
            for source_file, line in zip(evidence_column(rows, "source_file"),
                                         evidence_column(rows, "source_line")):
                if not isinstance(source_file, str):
                    continue
                of_log.setdefault(source_file, finding.id)
                if isinstance(line, (int, float)) and (source_file, int(line)) in run_of:
                    of_run.setdefault((source_file, run_of[(source_file, int(line))]), finding.id)
    return of_log, of_run


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
        share = _energy_weighted(part["modelled_share"].fillna(0.0),
                                 part.get("energy_kwh", pd.Series(dtype=float)).fillna(0.0))
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items())
        words = (f"{verdict}: {len(part)} run(s) ({counts})"
                 + (f"; {_pct(share)} of the logged energy modelled" if math.isfinite(share)
                    and verdict != UNKNOWN_V else ""))
        out.append({"source_file": source_file, "verdict": verdict, "runs": int(len(part)),
                    "modelled_share": share, "words": words})
    return out
