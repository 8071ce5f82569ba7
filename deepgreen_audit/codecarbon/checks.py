"""The checks of a CodeCarbon log: the registry's suite `codecarbon`, plus the campaign audit's S5
checks that are the same check on these rows (`REUSED`, run unchanged on the context's
`blocks` frame; see `audit.py`).

Why a suite of its own: a lone log has no counters, blocks, runs table or specification to
conform to, so most campaign checks do not apply; what applies is asked of CodeCarbon's own
behaviour (its power models, its identities, its layouts).  The identities the campaign audit
already checks on CodeCarbon's columns (components sum to the total, emissions rate, one carbon
intensity per location) are the same check and are reused by id.  Tolerances are the
specification's ``[audit]`` values, the same ones the campaign audit uses.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd

from deepgreen_audit.audit.checks import measurement
from deepgreen_audit.codecarbon import hardware
from deepgreen_audit.codecarbon.context import MODELLED, NOT_TRACKED, UNVERIFIED, LogContext, frame_of
from deepgreen_audit.columnar.evidence import evidence
from deepgreen_audit.safe import number_text
from deepgreen_audit.suite.registry import Check, NotApplicable, Outcome, Skip, check, check_for, registered_checks
from deepgreen_audit.units import J_PER_KWH

SUITE = "codecarbon"


def codecarbon_checks() -> list[Check[LogContext]]:
    """The checks of the suite `codecarbon`, all of them in this module, in definition order."""
    return registered_checks(SUITE, (sys.modules[__name__],), LogContext)
#: Checks of the campaign audit (suite `audit`) that are the same check on a CodeCarbon log:
#: each reads a `CodeCarbonColumns`, which `LogContext` implements (`check_for` proves it).
REUSED = tuple(check_for(func, LogContext) for func in (
    measurement.energy_domains, measurement.carbon_intensity, measurement.emissions_rate))
#: The numeric cells a CodeCarbon row must have to hold a measurement.
NEEDED = ("duration_s", "emissions_kg", "energy_consumed_kwh")


def cc_check(id_: str, section: str = "S5", severity: str = "error", remedy: str | None = None):
    """Register a check of a CodeCarbon log, about the rows of its table; `remedy` says what to
    change in CodeCarbon's set-up so that the next log passes it."""
    return check(id_, section, suite=SUITE, severity=severity, table="codecarbon_log",
                 remedy=remedy)


def _number(value) -> float:
    """A cell as a float, NaN where empty."""
    return float(value) if value is not None and not pd.isna(value) else float("nan")


def _g(value: float) -> str:
    """A quoted figure (a power, a span) to 4 significant digits; one a log's impossible
    magnitudes made infinite (1e308 kWh over 1e-300 s) says so, never "inf"."""
    return number_text(value, ".4g", "beyond a float's range")


def _where(frame: pd.DataFrame) -> str:
    """'001.csv lines 2, 3; 005.csv line 4' (at most 6 lines named)."""
    parts = []
    for source_file, part in frame.groupby("source_file", sort=True):
        lines = sorted({int(x) for x in part["source_line"]})
        shown = ", ".join(map(str, lines[:6])) + (f" (+{len(lines) - 6})" if len(lines) > 6 else "")
        parts.append(f"{source_file} line{'s' if len(lines) > 1 else ''} {shown}")
    return "; ".join(parts[:6]) + (f"; {len(parts) - 6} more log(s)" if len(parts) > 6 else "")


@check("integrity.validate", "integrity", suite=SUITE)
def validates(ctx: LogContext) -> Outcome:
    """The package validates: checksums, descriptor, every row against schemas/codecarbon_log.json."""
    report = ctx.integrity
    if report is None:
        raise Skip("not validated")
    rows = report.stats.get("codecarbon_log", {}).get("rows", len(ctx.rows))
    return Outcome.passed(f"{rows:,} CodeCarbon row(s) of {len(ctx.source_files)} "
                          "log(s); checksums and schema hold")


@cc_check("integrity.rows-read", "integrity",
          remedy=("stop the tracker on every path (`with EmissionsTracker(...) as tracker:`, or "
            "`tracker.stop()` in a `finally:`) so that a failed or interrupted run still writes "
            "whole rows"))
def rows_read(ctx: LogContext) -> Outcome:
    """Every row of every log was read: a row with another number of cells than its header (a
    torn last line, written when the run was killed) is not a measurement and was not imported;
    it is named here with its line, so that nothing is dropped silently."""
    torn = ctx.rejected_rows
    if torn.empty:
        return Outcome.passed(f"every row of the {len(ctx.source_files)} log(s) has its header's "
                              "cells")
    last = int(torn["last_row"].sum())
    return Outcome.failed(
        f"{len(torn)} row(s) not imported: another number of cells than the header "
        f"({_where(torn)}; {last} of them a log's last row, as a run killed while CodeCarbon "
        "wrote it leaves); the log's other rows are audited",
        rows=len(torn), details=evidence(torn))


@cc_check("integrity.cells", "integrity",
          remedy=("run CodeCarbon 2.0 or later (per-component power and energy, a run_id); an empty or nan "
            "cell is a reading CodeCarbon failed: rerun with `log_level=\"debug\"` to see which"))
def cells(ctx: LogContext) -> Outcome:
    """Every row holds CodeCarbon's measurement (duration, emissions, energy_consumed), from 2.x
    its run_id (without it a row cannot be told from another run's) and, in the layouts that
    have them, each component's power and energy; a cell that is empty,
    non-finite (nan, inf) or not a number is named with its row."""
    r = ctx.rows
    rec = ctx.records
    problems = []
    for i in r.index:
        missing = [c for c in NEEDED if pd.isna(rec[i][c])]
        if rec[i]["layout"] != "1.x" and pd.isna(rec[i]["run_id"]):
            missing.append("run_id")  # its rows cannot be told from another run's
        if rec[i]["layout"] != "1.x":
            missing += [f"{d}_{k}" for d in ("cpu", "gpu", "ram") for k in ("power_w", "energy_kwh")
                        if pd.isna(rec[i][f"{d}_{k}"])]
        bad = rec[i]["cell_problems"]
        if missing or isinstance(bad, str):
            problems.append({"source_file": rec[i]["source_file"],
                             "source_line": int(rec[i]["source_line"]),
                             "empty": ", ".join(missing) or None,
                             "not_a_value": bad if isinstance(bad, str) else None})
    if problems:
        frame = frame_of(problems)
        return Outcome.failed(f"{len(frame)} row(s) with empty or non-finite measurement cells "
                              f"({_where(frame)})", rows=len(frame), details=evidence(frame))
    return Outcome.passed(f"all {len(r):,} rows hold finite values in every measurement cell")


@cc_check("S5.cc-rows",
          remedy=("give each tracker its own file (`output_file=`, or `output_dir=` per run) and leave "
            "`allow_multiple_runs` off, so that two trackers never write one emissions.csv; do not "
            "concatenate logs by hand"))
def duplicated_rows(ctx: LogContext) -> Outcome:
    """Rows are CodeCarbon's: no row repeats another's measurement (same duration, energy and
    emissions at another line), a log's timestamps do not go back in file order, and the
    cumulative rows of one run (CodeCarbon's flushes) never decrease in duration or energy."""
    r = ctx.rows
    rec = ctx.records
    found = []
    key = ["source_file", "duration_s", "energy_consumed_kwh", "emissions_kg"]
    measured = r[[*key, "source_line"]].dropna(subset=key[1:])
    first_line = measured.groupby(key)["source_line"].transform("first")
    repeats = measured.duplicated(key, keep="first").to_numpy()
    problems: dict[int, str] = {}  # one text per repeated line: a long log repeats a few often
    for source_file, line, first in zip(measured["source_file"].to_numpy()[repeats],
                                        measured["source_line"].to_numpy()[repeats],
                                        first_line.to_numpy()[repeats]):
        if first not in problems:
            problems[first] = f"repeats line {int(first)}'s duration, energy and emissions"
        found.append({"source_file": source_file, "source_line": int(line),
                      "problem": problems[first]})
    # each log's timestamps, and each run's cumulative rows, against the rows above them;
    # listed log by log (in file order), its timestamps first, then its runs in order of appearance
    files = r["source_file"]
    stamps = pd.to_datetime(r["timestamp"], errors="coerce", format="ISO8601", utc=True)
    back = (stamps < stamps.groupby(files).cummax().groupby(files).shift(1)).fillna(False)
    later: list[tuple[tuple, dict]] = []
    file_rank = {f: k for k, f in enumerate(pd.unique(files))}
    for i in r.index[back.to_numpy()]:
        later.append(((file_rank[rec[i]["source_file"]], 0, 0, 0, i),
                      {"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                       "problem": f"timestamp {rec[i]['timestamp']} is earlier than a row above it"}))
    runs = [files, r["run_key"]]
    run_rank = r.groupby(runs, sort=False).ngroup()
    several = r.groupby(runs, sort=False)["run_key"].transform("size") > 1
    for k, column in enumerate(("duration_s", "energy_consumed_kwh")):
        values = r[column].astype(float)
        drop = several & (values < values.groupby(runs).cummax().groupby(runs).shift(1)).fillna(False)
        for i in r.index[drop.to_numpy()]:
            later.append(((file_rank[rec[i]["source_file"]], 1, int(run_rank[i]), k, i),
                          {"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                           "problem": f"run {rec[i]['run_key']}: {column} {values[i]:.6g} is below an "
                                      "earlier row of the same run (not a cumulative flush)"}))
    found += [entry for _, entry in sorted(later, key=lambda pair: pair[0])]
    flushes = int((~r["final_row"]).sum())
    # a run's last row is stop()'s or, for a run killed after a flush, that flush: the two
    # are written alike, so the words never claim the run ended
    note = (f"; {flushes} row(s) are cumulative flushes that a later row of the same run "
            "follows (a run's last row is stop()'s, or the last flush of a run killed after "
            "it: the log cannot tell which)" if flushes else "")
    if found:
        frame = frame_of(found).drop_duplicates()
        return Outcome.failed(f"{len(frame)} row(s) duplicated or out of order ({_where(frame)})"
                              + note, rows=len(frame), details=evidence(frame))
    return Outcome.passed(f"no duplicated or out-of-order rows in {len(r):,}" + note)


def _component_outcome(ctx, comp: str, what: str) -> Outcome:
    c = ctx.components
    c = c[(c["component"] == comp) & c["final_row"].astype(bool)]
    if c.empty:
        raise Skip("the log has no rows")
    if (c["status"] == "not logged").all():
        raise NotApplicable("CodeCarbon 1.x logs no per-component power")
    flagged = c[c["status"].isin([MODELLED, NOT_TRACKED, UNVERIFIED])]
    if flagged.empty:
        used = c[c["status"] == "measured"]
        return Outcome.passed(f"{comp.upper()} power measured in all {len(used)} run(s) that "
                              f"track it ({what})")
    counts = flagged.groupby(["status", "how"]).size().sort_values(ascending=False)
    text = "; ".join(f"{n} run(s) {status}: {how}" for (status, how), n in counts.items())
    frame = flagged.assign(energy_j=flagged["energy_kwh"] * J_PER_KWH)[
        ["source_file", "source_line", "run_key", "power_w", "energy_j", "status", "how"]]
    return Outcome.failed(f"{comp.upper()} power not measured in {len(flagged)} of {len(c)} run(s): "
                          + text, rows=len(flagged), details=evidence(frame))


@cc_check("S5.cc-cpu-power", severity="warning",
          remedy=("let CodeCarbon read the CPU's counter: on Linux make RAPL readable (`sudo chmod -R a+r "
            "/sys/class/powercap/intel-rapl`, or a udev rule; 2.x and 3.x read "
            "/sys/class/powercap/intel-rapl*/energy_uj); on macOS allow `sudo powermetrics` without "
            "a password; without one CodeCarbon models the CPU (a TDP constant, or its load model "
            "from 2.8), and the energy must be reported as modelled"))
def cpu_power(ctx: LogContext) -> Outcome:
    """Whether each run's CPU power was measured or modelled: CodeCarbon's TDP-fraction constant
    (0.5 x TDP, 2.x and 3.x), its generic-TDP constant (0.5 x 85 W for a CPU it does not know),
    3.0's TDP counted once per logical CPU, 3.x's load-model floor (0.1 x TDP), a constant
    repeated across runs, or a CPU not tracked at all (0 W); TDPs from CodeCarbon's own
    data/hardware/cpu_power.csv.  Under CodeCarbon 3 a varying power may be its load model:
    said so, not counted as measured."""
    return _component_outcome(ctx, "cpu", "a power counter's readings vary")


@cc_check("S5.cc-ram-power", severity="warning",
          remedy=("report the RAM energy as modelled: CodeCarbon never measures RAM power (3 W per 8 GB "
            "in 2.x, per DIMM in 3.x); `tracking_mode=\"machine\"` keeps the model one constant"))
def ram_power(ctx: LogContext) -> Outcome:
    """Which RAM model gave each run's RAM power: 3 W per 8 GB (2.x), the DIMM model (3.x: 5 W
    per x86 DIMM, 1.5 W on ARM), or a process-mode share. CodeCarbon never measures RAM power,
    so a run with RAM energy always has a modelled part."""
    return _component_outcome(ctx, "ram", "")


@cc_check("S5.cc-gpu-power", severity="warning",
          remedy=("let CodeCarbon read NVML: install `nvidia-ml-py` (pynvml) in the environment it runs "
            "in, with the NVIDIA driver visible (`--gpus all` in a container) and `gpu_ids` naming the "
            "GPUs the run used"))
def gpu_power(ctx: LogContext) -> Outcome:
    """Whether each run's GPU power was read (NVML, powermetrics) or is one constant repeated
    to every digit across runs (no GPU reading repeats like that)."""
    return _component_outcome(ctx, "gpu", "NVML or powermetrics")


@cc_check("S5.cc-cpu-power-max",
          remedy=("check the CPU CodeCarbon recorded (`cpu_model`, `cpu_count`): a power above what it "
            "can draw comes from a wrong TDP (3.0's TDP per logical CPU: upgrade to 3.1 or later) or "
            "from a `force_cpu_power` set for another machine"))
def cpu_power_max(ctx: LogContext) -> Outcome:
    """No CPU power above what the CPU model can draw: its TDP in CodeCarbon's own table times
    the sockets its family is sold for (1 for client CPUs, 2 for EPYC, 8 for Xeon), both the
    reported power and the mean power of the CPU energy over the duration.  Apple silicon is
    not held to a TDP: CodeCarbon measures it with powermetrics, whose package power a table's
    TDP does not bound."""
    r = ctx.rows
    rec = ctx.records
    found, checked, unknown, measured = [], 0, set(), set()
    for i in r.index:
        if hardware.is_apple_silicon(rec[i]["cpu_model"]) and not hardware.cpu_models(
                _number(rec[i]["cpu_power_w"]), rec[i]["cpu_model"], _number(rec[i]["cpu_count"]),
                rec[i]["major"]):
            measured.add(rec[i]["cpu_model"])
            continue
        limit = hardware.cpu_maximum(rec[i]["cpu_model"])
        powers = {"reported": rec[i]["cpu_power_w"]}
        if pd.notna(rec[i]["cpu_energy_kwh"]) and pd.notna(rec[i]["duration_s"]) and rec[i]["duration_s"] > 0:
            powers["mean (energy / duration)"] = rec[i]["cpu_energy_kwh"] * J_PER_KWH / rec[i]["duration_s"]
        if all(pd.isna(v) for v in powers.values()):
            continue
        if limit is None:
            if isinstance(rec[i]["cpu_model"], str):
                unknown.add(rec[i]["cpu_model"])
            continue
        checked += 1
        for label, p in powers.items():
            if pd.notna(p) and p > limit[0] * (1 + hardware.MODEL_RELATIVE_TOLERANCE):
                found.append({"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                              "cpu_model": rec[i]["cpu_model"], "power": label, "power_w": float(p),
                              "maximum_w": limit[0], "source": limit[1]})
    if not checked:
        raise NotApplicable("no row's CPU is in CodeCarbon's table"
                   + (f" ({', '.join(sorted(unknown)[:3])})" if unknown else ""))
    tail = (f"; {len(unknown)} CPU model(s) not in {hardware.cpu_table()[1]}, not checked: "
            + ", ".join(sorted(unknown)[:4]) if unknown else f"; TDPs from {hardware.cpu_table()[1]}")
    if measured:
        tail += ("; Apple silicon measured by powermetrics, not held to a TDP: "
                 + ", ".join(sorted(measured)[:4]))
    if found:
        frame = frame_of(found)
        worst = frame.loc[frame["power_w"].idxmax()]
        return Outcome.failed(f"{frame[['source_file', 'source_line']].drop_duplicates().shape[0]} row(s) "
                              f"report more CPU power than the CPU can draw (up to {_g(worst['power_w'])} W "
                              f"for {worst['source']}; {_where(frame)})" + tail,
                              rows=frame[["source_file", "source_line"]].drop_duplicates().shape[0],
                              details=evidence(frame))
    return Outcome.passed(f"{checked:,} row(s) within their CPU's TDP x sockets" + tail)


@cc_check("S5.cc-gpu-power-limit",
          remedy=("check `gpu_ids` and `gpu_count`: a GPU power above its board's limit sums boards the "
            "run did not use, or another machine's"))
def gpu_power_limit(ctx: LogContext) -> Outcome:
    """No GPU power above the board limit of its model (NVIDIA's specification, laptop GPUs at
    their top TGP with Dynamic Boost; hardware.GPU_BOARD_LIMIT_W) times the gpu count and
    gpu_power_limit_factor: both the reported power and energy / duration.  CodeCarbon's GPU
    power is NVML's energy counter's delta over the window, and the sensor behind the counter
    samples every 1/6 s to 1 s: over a run of d seconds the counter may hold up to
    nvml_sample_period_max_s more of the board's energy, so the limit is (d + that) / d times
    the board's (a 33 ms run may show 30 times it)."""
    r = ctx.rows
    rec = ctx.records
    t = ctx.tolerances
    factor = float(t.gpu_power_limit_factor)
    found, checked, unknown, short_runs = [], 0, set(), 0
    for i in r.index:
        p, e, d = rec[i]["gpu_power_w"], rec[i]["gpu_energy_kwh"], rec[i]["duration_s"]
        powers = {"reported": p}
        if pd.notna(e) and pd.notna(d) and d > 0:
            powers["mean (energy / duration)"] = e * J_PER_KWH / d
        if not any(pd.notna(v) and v > 0 for v in powers.values()):
            continue
        limit = hardware.gpu_limit(rec[i]["gpu_model"], t.gpu_board_power_limit_w)
        if limit is None:
            unknown.add(str(rec[i]["gpu_model"]))
            continue
        count = rec[i]["gpu_count"]
        count = int(count) if pd.notna(count) and count > 0 else 1
        checked += 1
        window = ((d + t.nvml_sample_period_max_s) / d) if pd.notna(d) and d > 0 else 1.0
        bound = limit[0] * count * factor * window
        if any(pd.notna(v) and limit[0] * count * factor < v <= bound for v in powers.values()):
            short_runs += 1   # above the board's limit only by what the sample period allows
        for label, value in powers.items():
            if pd.notna(value) and value > bound:
                found.append({"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                              "gpu_model": rec[i]["gpu_model"], "power": label, "power_w": float(value),
                              "limit_w": limit[0] * count, "bound_w": bound, "source": limit[1],
                              "duration_s": float(d) if pd.notna(d) else None})
    if not checked:
        raise NotApplicable("no row has a GPU power of a model in the board-limit table"
                   + (f" (not in it: {', '.join(sorted(unknown)[:3])})" if unknown else ""))
    tail = (f"; not in the board-limit table, not checked: {', '.join(sorted(unknown)[:4])}"
            if unknown else "")
    if found:
        frame = frame_of(found)
        worst = frame.loc[frame["power_w"].idxmax()]
        n = frame[["source_file", "source_line"]].drop_duplicates().shape[0]
        return Outcome.failed(f"{n} row(s) report GPU power above the board limit (up to "
                              f"{_g(worst['power_w'])} W on a {hardware.gpu_name(worst['gpu_model'])} "
                              f"whose limit is {worst['limit_w']:.4g} W; {_where(frame)})" + tail,
                              rows=n, details=evidence(frame))
    sampled = (f"; {short_runs:,} of them above it only over a window short beside NVML's "
               f"sample period (up to {t.nvml_sample_period_max_s:g} s), where CodeCarbon's "
               "counter delta is no draw" if short_runs else "")
    return Outcome.passed(f"{checked:,} row(s) within their GPU's board limit x {factor:g}"
                          + sampled + tail)


@cc_check("S5.cc-power-duration",
          remedy=("start one tracker per measured window and do not reuse a stopped tracker: its energy "
            "then covers another window than the duration beside it"))
def power_duration(ctx: LogContext) -> Outcome:
    """Where a component's power is a model's constant (CPU TDP constants, RAM models in machine
    mode, a constant repeated across runs), its energy covers a window of that power (energy /
    power, or energy / (power x pue) where CodeCarbon applied its PUE to the energy alone) that
    CodeCarbon's own window explains: no longer than the duration (within
    power_duration_relative_tolerance or power_duration_window_slack_s; in 2.x and earlier,
    which count whole measure intervals, plus codecarbon_v2_window_excess_max_s), no shorter
    than the duration less codecarbon_window_gap_max_s (its start-up and a last unmeasured
    interval).  Beyond that, a longer window means CodeCarbon accumulated the energy over
    another window than the duration beside it (e.g. a tracker restarted without resetting its
    RAM energy): energy and duration cannot both be right, a failure.  A shorter one the log
    cannot judge, and says so: each measure interval CodeCarbon reads its instruments one after
    another (RAM first, then the CPU, then the GPUs; 2.x and 3.x, emissions_tracker.py), each
    over the time since the previous interval's readings ended, so a component's window leaves
    out the time spent reading those after it, every interval (a CPU load reading blocks 0.5 s
    in 2.8.5-3.2, powermetrics for its sample); with a 1 s interval that is half of it or more,
    and the log does not record the interval."""
    c = ctx.components
    c = c[c["constant"] & c["power_w"].notna() & c["energy_kwh"].notna()]
    if c.empty:
        raise NotApplicable("no component with a modelled constant power")
    r = ctx.rows
    t = ctx.tolerances
    duration = r.loc[c["index"], "duration_s"].astype(float).to_numpy()
    pue = r.loc[c["index"], "pue"].astype(float).to_numpy()
    pue = np.where(np.isfinite(pue) & (pue >= 1), pue, 1.0)
    with np.errstate(all="ignore"):  # overflow of absurd cells is a finding, not a warning
        expected = c["power_w"].to_numpy() * duration
        found_j = c["energy_kwh"].to_numpy() * J_PER_KWH
        over = np.maximum(t.power_duration_relative_tolerance * duration, t.power_duration_window_slack_s)
        whole_intervals = (r.loc[c["index"], "major"] < 3).to_numpy()
        excess = over + np.where(whole_intervals, t.codecarbon_v2_window_excess_max_s, 0.0)
        explained, within = np.zeros(len(c), dtype=bool), np.zeros(len(c), dtype=bool)
        for factor in (np.ones(len(c)), pue):   # PUE in the power too, or in the energy alone
            window_s = found_j / (c["power_w"].to_numpy() * factor)
            explained |= window_s <= duration + excess
            within |= ((window_s <= duration + excess)
                       & (window_s >= duration - t.codecarbon_window_gap_max_s - over))
    tol = float(t.power_duration_relative_tolerance)
    bad = ~explained & np.isfinite(duration)
    short = explained & ~within & np.isfinite(duration)
    with np.errstate(all="ignore"):
        frame = c.assign(duration_s=duration, energy_j=found_j, power_x_duration_j=expected,
                         ratio=found_j / expected, seconds_of_power=found_j / c["power_w"].to_numpy())
    unjudged = ""
    if short.any():
        part = frame[short]
        least = part.loc[part["ratio"].astype(float).idxmin()]
        unjudged = (f"; {int(short.sum())} cover less than their duration, which the log cannot "
                    f"judge (least: {least['component'].upper()} {_g(least['power_w'])} W over "
                    f"{_g(least['seconds_of_power'])} s of a {least['duration_s']:.4g} s run, "
                    f"{least['source_file']} line {int(least['source_line'])}): each measure "
                    "interval CodeCarbon reads RAM, then the CPU, then the GPUs, and a "
                    "component's window leaves out the time spent reading those after it (a CPU "
                    "load reading blocks 0.5 s in 2.8.5-3.2, powermetrics its sample), so with a "
                    "short interval, which the log does not record, the window falls well short "
                    "of the duration")
    if bad.any():
        off = frame[bad][["source_file", "source_line", "run_key", "component", "power_w",
                          "duration_s", "energy_j", "power_x_duration_j", "ratio", "seconds_of_power"]]
        with np.errstate(all="ignore"):
            off = off.sort_values("ratio", key=lambda s: np.abs(np.log(np.abs(s.astype(float)))),
                                  ascending=False)
        worst = off.iloc[0]
        rows = off[["source_file", "source_line"]].drop_duplicates().shape[0]
        return Outcome.failed(
            f"{rows} row(s) whose energy covers more than their constant power over CodeCarbon's "
            f"window ({', '.join(f'{k.upper()} {v}' for k, v in off['component'].value_counts().items())}; "
            f"worst: {worst['component'].upper()} {_g(worst['power_w'])} W beside an energy worth "
            f"{_g(worst['seconds_of_power'])} s of it in a {worst['duration_s']:.4g} s run, "
            f"{worst['source_file']} line {int(worst['source_line'])}){unjudged}",
            rows=rows, details=evidence(off))
    return Outcome.passed(f"{int(len(c) - short.sum()):,} constant-power component readings "
                          f"equal power x duration within {tol:.0%}, or less the window CodeCarbon "
                          f"does not measure (start-up, a last interval: up to "
                          f"{t.codecarbon_window_gap_max_s:g} s)" + unjudged)


@cc_check("S5.cc-task-totals",
          remedy=("read each task's own row in the task file (emissions_<experiment>_<run_id>.csv), not "
            "the run's row, whose duration CodeCarbon 3.x gives as the last task's"))
def task_totals(ctx: LogContext) -> Outcome:
    """A run measured with CodeCarbon's task API (start_task/stop_task, 2.5 and later) writes
    one row per task (its task file) and a row of the whole run: the run's row covers its
    tasks, its duration at least their durations' sum (less power_duration_window_slack_s a
    task) and its energy at least their energies' sum (less power_duration_relative_tolerance).
    CodeCarbon 3.x writes the run's row with the last task's duration but every task's energy
    (seen with 3.3.2): energy over that duration overstates the run's power by about its number
    of tasks, and the run's row is not a measurement of its window."""
    r = ctx.rows
    rec = ctx.records
    tasks = r[r["task_name"].notna() & r["run_id"].notna()]
    if tasks.empty:
        raise NotApplicable("no log holds a task's row (CodeCarbon's task API)")
    t = ctx.tolerances
    per_run = tasks.groupby("run_id").agg(tasks=("task_name", "size"), duration_s=("duration_s", "sum"),
                                          energy_kwh=("energy_consumed_kwh", "sum"),
                                          last_task_s=("duration_s", "last"))
    run_rows = r[r["task_name"].isna() & r["final_row"] & r["run_id"].isin(per_run.index)]
    if run_rows.empty:
        raise NotApplicable("the package holds tasks' rows but not their runs' rows (the "
                            "emissions.csv CodeCarbon wrote beside the task file)")
    found = []
    for i in run_rows.index:
        run = per_run.loc[rec[i]["run_id"]]
        short = rec[i]["duration_s"] < run["duration_s"] - run["tasks"] * t.power_duration_window_slack_s
        low = rec[i]["energy_consumed_kwh"] < run["energy_kwh"] * (1 - t.power_duration_relative_tolerance)
        if short or low:
            found.append({"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                          "run_id": rec[i]["run_id"], "tasks": int(run["tasks"]),
                          "duration_s": float(rec[i]["duration_s"]),
                          "tasks_duration_s": float(run["duration_s"]),
                          "last_task_duration_s": float(run["last_task_s"]),
                          "energy_kwh": float(rec[i]["energy_consumed_kwh"]),
                          "tasks_energy_kwh": float(run["energy_kwh"])})
    if not found:
        return Outcome.passed(f"{len(run_rows)} run row(s) cover their tasks' durations and energies")
    frame = frame_of(found)
    last = sum(abs(f["duration_s"] - f["last_task_duration_s"]) <= t.power_duration_window_slack_s
               for f in found)
    return Outcome.failed(
        f"{len(frame)} run row(s) shorter than their tasks or holding less energy ({_where(frame)}); "
        f"{last} of them report the last task's duration with every task's energy, as CodeCarbon "
        "3.x does in task mode: read each task's row (the task file), not the run's, whose "
        "energy over its duration overstates the power", rows=len(frame), details=evidence(frame))


@cc_check("S5.cc-short-runs", severity="warning",
          remedy=("set `measure_power_secs` well below the run's length (e.g. 1) so that the energy "
            "rests on readings across the run, not one at stop"))
def short_runs(ctx: LogContext) -> Outcome:
    """Runs shorter than CodeCarbon's default sampling interval (measure_power_secs, 15 s unless
    set): unless the interval was set below their length, which the log does not record, their
    energy rests on the reading taken at stop."""
    f = ctx.finals
    d = f["duration_s"].astype(float)
    short = f[d < hardware.DEFAULT_INTERVAL_S]
    if short.empty:
        return Outcome.passed(f"every run lasts at least {hardware.DEFAULT_INTERVAL_S:g} s")
    frame = short[["source_file", "source_line", "run_key", "duration_s"]]
    return Outcome.failed(f"{len(short)} of {len(f)} run(s) shorter than CodeCarbon's default "
                          f"{hardware.DEFAULT_INTERVAL_S:g} s sampling interval (shortest "
                          f"{d.min():.3g} s; {_where(frame)})", rows=len(short), details=evidence(frame))


@cc_check("S5.cc-magnitudes",
          remedy=("report CodeCarbon's energies in kWh as it writes them (energy_consumed, *_energy), "
            "and its durations in seconds"))
def magnitudes(ctx: LogContext) -> Outcome:
    """Energies are possible in kWh: no negative energy, duration or emissions; the mean power
    of the total energy over the duration at most what the machine can draw (the CPU and RAM
    ranges of [audit] plus each GPU's board limit, 1 kW when unknown) and, in machine mode, at
    least kwh_suspect_power_w (in process mode the process's shares may be smaller); outside it
    the figure is in another unit (J, Wh) or over another window."""
    r = ctx.rows
    rec = ctx.records
    t = ctx.tolerances
    found = []
    for i in r.index:
        values = {c: rec[i][c] for c in ("duration_s", "emissions_kg", "energy_consumed_kwh",
                                          "cpu_energy_kwh", "gpu_energy_kwh", "ram_energy_kwh")}
        negative = [c for c, v in values.items() if pd.notna(v) and v < 0]
        e, d = values["energy_consumed_kwh"], values["duration_s"]
        problem = f"negative {', '.join(negative)}" if negative else None
        # in process mode the CPU and RAM are the process's shares, which may be tiny
        machine = rec[i]["tracking_mode"] != "process"
        if problem is None and pd.notna(e) and pd.notna(d) and d > 0 and e > 0:
            with np.errstate(all="ignore"):
                mean = e * J_PER_KWH / d
            limit = hardware.gpu_limit(rec[i]["gpu_model"], t.gpu_board_power_limit_w)
            gpus = rec[i]["gpu_count"]
            gpus = int(gpus) if pd.notna(gpus) else (1 if isinstance(rec[i]["gpu_model"], str) else 0)
            pue = rec[i]["pue"] if pd.notna(rec[i]["pue"]) and rec[i]["pue"] >= 1 else 1.0
            most = (float(t.cpu_power_range_w[1]) + float(t.ram_power_range_w[1])
                    + gpus * (limit[0] * float(t.gpu_power_limit_factor) if limit else 1000.0)) * pue
            if mean > most:
                problem = (f"{e:.4g} kWh in {d:.4g} s is a mean {_g(mean)} W, above the {most:.4g} W "
                           "this machine can draw")
            elif machine and mean < float(t.kwh_suspect_power_w):
                problem = f"{e:.4g} kWh in {d:.4g} s is a mean {mean:.3g} W: not kWh"
        if problem:
            found.append({"source_file": rec[i]["source_file"], "source_line": int(rec[i]["source_line"]),
                          "problem": problem})
    if found:
        frame = frame_of(found)
        return Outcome.failed(f"{len(frame)} row(s) with impossible magnitudes ({_where(frame)}): "
                              + frame["problem"].iloc[0], rows=len(frame), details=evidence(frame))
    return Outcome.passed(f"{len(r):,} rows: energies, durations and emissions possible in their units")


#: What must not change within one project or experiment: column -> what it is.
HELD_FIXED = {"country_iso_code": "location (country)", "region": "location (region)",
              "cloud_provider": "location (cloud provider)", "cloud_region": "location (cloud region)",
              "cpu_model": "CPU", "gpu_model": "GPU", "cpu_count": "CPU count", "gpu_count": "GPU count",
              "ram_total_size_gb": "RAM size", "os": "OS", "codecarbon_version": "CodeCarbon version",
              "tracking_mode": "tracking mode", "python_version": "interpreter", "pue": "PUE"}
#: Where an empty cell is a value of its own: CodeCarbon found no location (and took another
#: carbon intensity) where it found one in the other rows.
EMPTY_IS_A_VALUE = ("country_iso_code", "region", "cloud_provider", "cloud_region")
#: The hardware, held fixed within a whole log too: a log's projects are one machine's runs.
HARDWARE = ("cpu_model", "gpu_model", "cpu_count", "gpu_count", "ram_total_size_gb")


def _texts(column: pd.Series, lower: bool, empty: str | None) -> np.ndarray:
    """Each cell as its text (None where empty, or `empty`), computed once per distinct value."""
    values = column.to_numpy(dtype=object)
    seen: dict = {}

    def text(v):
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return empty
        found = seen.get(v)
        if found is None:
            found = seen[v] = (str(v).lower() if lower else str(v))
        return found
    out = np.empty(len(values), dtype=object)
    out[:] = [text(v) for v in values]
    return out


def _codes(texts: np.ndarray) -> np.ndarray:
    """One number per distinct text, NaN where there is none (groupby's nunique skips it)."""
    codes, _ = pd.factorize(texts, use_na_sentinel=True)
    return np.where(codes < 0, np.nan, codes.astype(float))


@cc_check("S6.cc-constancy", "S6", severity="warning",
          remedy=("fix what CodeCarbon may guess per run: `OfflineEmissionsTracker(country_iso_code=..., "
            "region=...)` for one location, one `tracking_mode`, one pinned codecarbon version and "
            "one machine per project (`project_name=`)"))
def constancy(ctx: LogContext) -> Outcome:
    """Location (country, region, cloud provider and region), hardware, OS, CodeCarbon version,
    tracking mode and interpreter stay one value within a project (a log's project_name) and
    within an experiment (a non-default experiment_id), and the hardware within the whole log:
    runs measured on other hardware or software, or located elsewhere (another carbon
    intensity), are not comparable. RAM size counts as changed beyond 1 %. An empty cell is not
    a value, except a location's beside a filled one (CodeCarbon found no location there)."""
    rows = ctx.rows
    # each value as its text, empty as empty (None), or as "(empty)" where that is a value;
    # the groups compare integer codes, one per distinct text, not the texts
    texts = {c: _texts(rows[c], lower=c == "region", empty="(empty)" if c in EMPTY_IS_A_VALUE
                       else None) for c in HELD_FIXED if c != "ram_total_size_gb"}
    r = pd.DataFrame({"source_file": rows["source_file"], "project_name": rows["project_name"],
                      "experiment_id": rows["experiment_id"], "whole log": "all rows",
                      "ram_total_size_gb": rows["ram_total_size_gb"],
                      **{c: _codes(values) for c, values in texts.items()}})
    texts["ram_total_size_gb"] = rows["ram_total_size_gb"].to_numpy(dtype=object)
    all_lines = rows["source_line"].to_numpy()
    groups = []
    for label, column, held in (("project", "project_name", tuple(HELD_FIXED)),
                                ("experiment", "experiment_id", tuple(HELD_FIXED)),
                                ("log", "whole log", HARDWARE)):
        scope = r if column != "experiment_id" else r[r[column] != hardware.DEFAULT_EXPERIMENT_ID]
        by = scope.groupby(["source_file", column], sort=True)
        coded = [c for c in held if c != "ram_total_size_gb"]
        changed = by[coded].nunique() > 1
        if "ram_total_size_gb" in held:
            ram = by["ram_total_size_gb"]
            changed["ram_total_size_gb"] = ram.max() > ram.min() * (1 + hardware.RAM_SIZE_RELATIVE_CHANGE)
        if label == "log":  # one project and experiment: their scopes said it
            several = (by["project_name"].nunique(dropna=False) > 1) | (by["experiment_id"].nunique() > 1)
            changed = changed[several]
        positions = by.indices
        rows_of_scope = scope.index.to_numpy()  # rows' labels are their positions
        for (source_file, name), flags in changed[changed.any(axis=1)].iterrows():
            at = rows_of_scope[positions[(source_file, name)]]
            for c in (c for c in held if flags[c]):
                values = texts[c][at]
                known = ~pd.isna(values)
                counts = pd.Series(values[known]).astype(str).value_counts()
                groups.append({"source_file": source_file, "scope": f"{label} {name}",
                               "column": c, "what": HELD_FIXED[c], "values": "; ".join(
                                   f"{v} ({n} row(s))" for v, n in counts.items()),
                               "lines": ", ".join(str(int(x)) for x in all_lines[at][known][:12])})
    if groups:
        frame = frame_of(groups)
        text = "; ".join(f"{g['source_file']} {g['scope']}: {g['what']} {g['values']}"
                         for g in groups[:4])
        return Outcome.failed(f"{len(frame)} setting(s) change within a project, experiment or log: "
                              + text + (f"; {len(groups) - 4} more" if len(groups) > 4 else ""),
                              rows=len(frame), details=evidence(frame))
    return Outcome.passed("location, hardware, versions, tracking mode and interpreter are one "
                          "value within every project and experiment, the hardware within every log")
