"""S6 replication: completeness, seeds, processes, interleaving, the schedule, warm-up and
outlier blocks, and labels that mean the same thing in every stack."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from deepgreen_audit.audit import figures
from deepgreen_audit.audit.context import CONFIG_COLUMNS, AuditContext
from deepgreen_audit.columnar.evidence import describe_counts, evidence
from deepgreen_audit.columnar.frame import (
    Frame,
    Groups,
    cell_text,
    counts,
    factorize,
    isin,
    largest,
    lookup,
    median,
    missing,
    mode,
    nunique,
    order,
    seconds,
    utc,
)
from deepgreen_audit.suite.registry import NotApplicable, Outcome, Skip, check


@check("S6.completeness-runs", "S6", table="runs")
def completeness_runs(ctx: AuditContext) -> Outcome:
    """Every configuration (each ecosystem x architecture x dataset present in the package;
    in an initialiser trial, x each initialiser its scope names) has every repetition 1..R of
    S6, once, completed; rows_affected counts missing, duplicate, surplus and failed runs."""
    runs = ctx.runs
    reps = int(ctx.spec["S6_replication"]["repetitions"])
    levels = [sorted(set(runs[c])) for c in CONFIG_COLUMNS]
    arms = list(ctx.initialisers or ("",))
    expected = {(*cfg, arm, r) for cfg in itertools.product(*levels) for arm in arms
                for r in range(1, reps + 1)}
    arm_of = ctx.initialiser_of_run
    # a repetition is a float of the integer column: it hashes and compares as the integer
    seen = Counter(zip(*(runs[c] for c in CONFIG_COLUMNS), (arm_of[r] for r in runs["run_id"]),
                       runs["repetition"]))
    missing_runs = expected - set(seen)
    duplicate = sum(n - 1 for n in seen.values() if n > 1)
    surplus = sum(n for k, n in seen.items() if k not in expected)
    failed = int((runs["status"] != "completed").sum())
    bad = len(missing_runs) + duplicate + surplus + failed
    n_cfg = int(np.prod([len(x) for x in levels]))
    design = f"{n_cfg} configurations x " + (f"{len(arms)} initialisers x " if ctx.initialisers
                                               else "") + f"{reps} repetitions"
    if bad:
        names = [*CONFIG_COLUMNS, "initialiser", "repetition"]
        rows = sorted(missing_runs)
        columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
        if not ctx.initialisers:
            del columns["initialiser"]
        beyond = f"beyond repetition {reps}" + (" or the trial's initialisers"
                                                 if ctx.initialisers else "")
        return Outcome.failed(f"{design}: {len(missing_runs)} missing, {duplicate} duplicate, "
                              f"{surplus} {beyond}, {failed} failed", rows=bad,
                              details=evidence(Frame.of(columns)))
    return Outcome.passed(f"{design}, all completed")


@check("S6.completeness-blocks", "S6", table="blocks")
def completeness_blocks(ctx: AuditContext) -> Outcome:
    """Every completed run has every epoch x phase block (epochs of S2, train and eval);
    rows_affected counts the missing and surplus blocks."""
    runs = ctx.runs
    run_ids = runs["run_id"][runs["status"] == "completed"]
    epochs = int(ctx.spec["S2_optimisation"]["epochs"])
    have = Counter(ctx.blocks["run_id"])
    expected_per_run = epochs * 2
    found = np.fromiter((have[r] for r in run_ids), dtype=np.int64, count=len(run_ids))
    missing_blocks = int(np.clip(expected_per_run - found, 0, None).sum())
    surplus = int((ctx.blocks["epoch"] > epochs).sum())
    if missing_blocks or surplus:
        short = found < expected_per_run
        return Outcome.failed(f"{missing_blocks:,} block(s) missing in {int(short.sum())} run(s), "
                              f"{surplus:,} beyond epoch {epochs}", rows=missing_blocks + surplus,
                              details=evidence(Frame.of({"run_id": run_ids[short],
                                                         "blocks": found[short]})
                                               .assign(expected=expected_per_run)))
    return Outcome.passed(f"{len(run_ids):,} runs x {epochs} epochs x 2 phases present")


@check("S6.distinct-seeds", "S6", table="runs")
def distinct_seeds(ctx: AuditContext) -> Outcome:
    """Every run records its seed, and no two runs share one."""
    return _one_per_run(ctx, "seed", "seed", f"{len(ctx.runs):,} distinct seeds")


@check("S6.independent-processes", "S6", table="runs")
def independent_processes(ctx: AuditContext) -> Outcome:
    """Every run was its own operating-system process: each records a process id, and no two
    runs share one."""
    return _one_per_run(ctx, "process_id", "process id", f"{len(ctx.runs):,} runs in distinct processes")


def _one_per_run(ctx, column: str, what: str, passed: str):
    """Every run records `column`, and no two runs share a value of it."""
    runs = ctx.runs
    codes = factorize(runs[column])[0]
    # bin 0 holds the runs without a value, bin v + 1 those with the v-th value
    per_value = np.bincount(codes + 1, minlength=1)
    absent = codes < 0
    shared = ~absent & (per_value[codes + 1] > 1)
    bad = absent | shared
    if bad.any():
        return Outcome.failed(f"{int(absent.sum())} run(s) record no {what}, {int(shared.sum())} "
                              f"share a {what} with another run", rows=int(bad.sum()),
                              details=evidence(runs.take(bad).select(["run_id", "ecosystem", column])),
                              unrecorded=int(absent.sum()))
    return Outcome.passed(passed)


@check("S6.no-overlap", "S6", table="runs", figure=figures.TIMELINE)
def no_overlap(ctx: AuditContext) -> Outcome:
    """No two runs overlap in time on the host (a run measured beside another measures it too)."""
    runs = ctx.runs
    by_start = runs.sort(runs["started_at_utc"])
    started, ended = by_start["started_at_utc"], by_start["ended_at_utc"]
    overlap_next = np.zeros(len(by_start), dtype=bool)
    overlap_next[:-1] = ended[:-1] > started[1:]
    overlapping = overlap_next.copy()
    overlapping[1:] |= overlap_next[:-1]
    if overlapping.any():
        cols = ["run_id", "ecosystem", "started_at_utc", "ended_at_utc"]
        return Outcome.failed(f"{int(overlapping.sum())} run(s) overlap another run in time",
                              rows=int(overlapping.sum()),
                              details=evidence(by_start.take(overlapping).select(cols)))
    return Outcome.passed(f"{len(runs):,} runs, none overlapping another in time")


def is_calibration(ctx: AuditContext) -> bool:
    """Whether the package is a between-window calibration (its declared scope's schedule,
    spec.SCHEDULES): one configuration repeated at points in time, by design."""
    return (ctx.spec.get("scope") or {}).get("schedule") == "calibration"


def _schedule(ctx) -> tuple[Frame, str]:
    runs = ctx.runs
    if not runs.missing("schedule_position").any():
        return runs.sort(runs["schedule_position"]), "schedule_position"
    return runs.sort(runs["started_at_utc"]), "start times (schedule_position not recorded)"


@check("S6.interleaving", "S6", table="runs", figure=figures.TIMELINE)
def interleaving(ctx: AuditContext) -> Outcome:
    """Runs are interleaved: no configuration runs twice in a row, and no ecosystem's runs
    form one uninterrupted stretch of the schedule (which would confound the ecosystem with
    the time it ran)."""
    if is_calibration(ctx):
        raise NotApplicable("a between-window calibration repeats one configuration by design "
                            "(its scope's schedule = calibration)")
    scheduled, basis = _schedule(ctx)
    if len(scheduled) < 2:
        raise NotApplicable("fewer than two runs")
    config_of_run = ctx.config_of_run
    cfg = np.array([config_of_run[r] for r in scheduled["run_id"]], dtype=object)
    repeat = np.r_[False, cfg[1:] == cfg[:-1]]
    eco = scheduled["ecosystem"]
    stretch = np.zeros(len(scheduled), dtype=bool)
    blocked = []
    if len(set(eco)) > 1:
        for e in sorted(set(eco)):
            pos = np.flatnonzero(eco == e)
            if len(pos) > 1 and pos[-1] - pos[0] + 1 == len(pos):
                stretch[pos] = True
                blocked.append(e)
    bad = repeat | stretch
    if bad.any():
        return Outcome.failed(f"by {basis}: {int(repeat.sum())} run(s) follow a run of their own "
                              f"configuration; {len(blocked)} ecosystem(s) ran as one block "
                              f"({', '.join(blocked)})", rows=int(bad.sum()),
                              details=evidence(scheduled.take(bad)
                                               .select(["run_id", "ecosystem", "started_at_utc"])
                                               .assign(follows_own_configuration=repeat[bad],
                                                       ecosystem_as_one_block=stretch[bad])))
    return Outcome.passed(f"{len(scheduled):,} runs interleaved (by {basis})")


@check("S6.schedule-gaps", "S6", table="runs", figure=figures.TIMELINE)
def schedule_gaps(ctx: AuditContext) -> Outcome:
    """The schedule has no gaps: positions run 1..n without holes and follow start time;
    no run waited longer than max_run_gap_s after the previous one; no run idled longer than
    max_block_gap_s between two of its blocks (a between-window calibration's runs wait
    between its points by design: only its blocks' gaps are held to the limit)."""
    runs = ctx.runs
    t = ctx.tolerances
    bad = np.zeros(len(runs), dtype=bool)
    parts = []
    pos = runs["schedule_position"]
    holes: set[int] = set()
    if not np.isnan(pos).any():
        holes = set(range(1, len(runs) + 1)) - set(pos.astype(int).tolist())
        by_pos = order(pos)
        started = runs["started_at_utc"][by_pos]
        misordered = np.zeros(len(runs), dtype=bool)
        misordered[1:] = started[1:] < started[:-1]
        if holes:
            parts.append(f"{len(holes)} schedule position(s) missing")
        if misordered.any():
            parts.append(f"{int(misordered.sum())} run(s) started before the previous position")
            bad[by_pos[misordered]] = True
    by_start = order(runs["started_at_utc"])
    # each run's wait after the run that started before it (none for the first)
    gap = np.full(len(runs), np.nan)
    gap[by_start[1:]] = seconds(runs["started_at_utc"][by_start[1:]] - runs["ended_at_utc"][by_start[:-1]])
    long_gap = (gap > float(t.max_run_gap_s)) & (not is_calibration(ctx))
    if long_gap.any():
        parts.append(f"{int(long_gap.sum())} run(s) started over {t.max_run_gap_s:.0f} s after "
                     f"the previous one ended (longest {largest(gap) / 3600:.1f} h)")
        bad |= long_gap
    b = ctx.blocks
    start = b["started_at_utc"].astype("datetime64[ns]")
    end = start + _timedelta_ns(b["duration_s"])
    per_run = Groups(b["run_id"])
    idle = seconds(start - per_run.shift(end))
    idle_bad = idle > float(t.max_block_gap_s)
    if idle_bad.any():
        runs_hit = set(b["run_id"][idle_bad])
        parts.append(f"{len(runs_hit)} run(s) idled over {t.max_block_gap_s:.0f} s between "
                     f"blocks ({int(idle_bad.sum())} gap(s), longest {largest(idle):.0f} s)")
        bad |= isin(runs["run_id"], runs_hit)
    if parts:
        longest_idle = dict(zip(per_run.keys[0], per_run.max(idle)))
        gaps = runs.take(bad).select(["run_id", "ecosystem", "started_at_utc"]).assign(
            wait_after_previous_run_s=gap[bad],
            longest_idle_between_blocks_s=np.array(
                [longest_idle.get(r, np.nan) for r in runs["run_id"][bad]], dtype=float))
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()) + len(holes),
                              details=evidence(gaps))
    return Outcome.passed(f"no gaps: longest wait between runs {largest(gap):.0f} s, between "
                          f"blocks {largest(idle):.1f} s")


def _timedelta_ns(duration_s: np.ndarray) -> np.ndarray:
    """Seconds as timedelta64[ns], converted as pandas' to_timedelta(unit="s") converts them
    (the whole seconds, then the fraction rounded to the nanosecond), so that the idle time
    between blocks is the same float the audit has always reported."""
    whole = np.trunc(duration_s)
    fraction_ns = (np.round(duration_s - whole, 9) * 1e9).astype(np.int64)
    return (whole.astype(np.int64) * 1_000_000_000 + fraction_ns).astype("timedelta64[ns]")


def _duration_ratio(ctx) -> Frame:
    """Each block's duration over its run's median for the phase after epoch 1 (a Skip
    when there are no blocks)."""
    blocks = ctx.block_runs
    if blocks.empty:
        raise Skip("no blocks")
    b = blocks.select(["run_id", "ecosystem", "epoch", "phase", "duration_s"])
    per_phase = Groups(b["run_id"], b["phase"])
    median = per_phase.spread(per_phase.median(np.where(b["epoch"] >= 2, b["duration_s"], np.nan)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return b.assign(median_s=median, ratio=b["duration_s"] / median)


@check("S6.warmup", "S6", severity="warning", table="blocks")
def warmup(ctx: AuditContext) -> Outcome:
    """Warm-up blocks: epoch-1 blocks slower than warmup_duration_ratio x their run's median
    for that phase. Expected; the phase totals leave out the first [analysis]
    warmup_epochs_excluded epochs (0: they include the warm-up, as the paper says), and the
    message says which. Warns when a run shows no warm-up where most do: its first epoch ran
    unlike its peers' (and, were the warm-up left out, a normal epoch would be dropped)."""
    b = _duration_ratio(ctx)
    if np.isnan(b["median_s"]).all():
        raise NotApplicable("no run has blocks after epoch 1 to compare epoch 1 with (one epoch a "
                            "run)")
    first = b.take(b["epoch"] == 1)
    slow = first["ratio"] > float(ctx.tolerances.warmup_duration_ratio)
    train = first["phase"] == "train"
    share = slow[train].mean() if train.any() else 0.0
    most = float(ctx.tolerances.warmup_majority_share)
    no_warmup = train & ~slow if share > most else np.zeros(len(first), dtype=bool)
    msg = (f"{int(slow.sum()):,} warm-up block(s) in epoch 1 ("
           + (describe_counts(first["phase"][slow]) if slow.any() else "none")
           + f"); median epoch-1 train ratio x{median(first['ratio'][train]):.2f}")
    if no_warmup.any():
        return Outcome.failed(msg + f"; {int(no_warmup.sum())} run(s) show none where most do; "
                              + _warmup_rule(ctx),
                              rows=int(no_warmup.sum()),
                              details=evidence(first.take(no_warmup).select(["run_id", "phase", "ratio"])))
    return Outcome.passed(msg + "; " + _warmup_rule(ctx), rows=int(slow.sum()))


def _warmup_rule(ctx) -> str:
    """What the specification says the phase totals do with the warm-up."""
    excluded = ctx.spec["analysis"]["warmup_epochs_excluded"]
    what = ("include every epoch, the warm-up included" if excluded == 0 else
            f"leave out epoch{'s 1-' if excluded > 1 else ' '}{excluded} as warm-up")
    return f"the phase totals {what} ([analysis] warmup_epochs_excluded = {excluded})"


@check("S6.outlier-blocks", "S6", severity="warning", table="blocks")
def outlier_blocks(ctx: AuditContext) -> Outcome:
    """Outlier blocks after the warm-up: blocks of epoch >= 2 whose duration departs from
    their run's median for the phase by more than outlier_duration_ratio (either way)."""
    b = _duration_ratio(ctx)
    later = b.take(b["epoch"] >= 2)
    if later.empty:
        raise NotApplicable("no blocks after epoch 1")
    r = float(ctx.tolerances.outlier_duration_ratio)
    out = (later["ratio"] > r) | (later["ratio"] < 1 / r)
    if out.any():
        outliers = later.take(out).select(["run_id", "epoch", "phase", "duration_s", "ratio"])
        return Outcome.failed(f"{int(out.sum()):,} outlier block(s) (duration beyond x{r} or "
                              f"/{r} of the run's median): "
                              + describe_counts(f"{e}/{p}" for e, p in zip(later["ecosystem"][out],
                                                                          later["phase"][out])),
                              rows=int(out.sum()), details=evidence(
                                  outliers.sort(outliers["ratio"], descending=True)))
    return Outcome.passed(f"{len(later):,} blocks after epoch 1 within x{r} of their run's median")


@check("S6.labels", "S6", table="runs")
def labels(ctx: AuditContext) -> Outcome:
    """Labels mean the same thing in every stack: each ecosystem is one the specification
    names, and each normalised label was written one way in the sources (runs.source_labels);
    rows_affected counts runs outside the vocabulary or spelled the minority way."""
    runs = ctx.runs
    allowed = set(ctx.spec["S6_replication"]["ecosystems"])
    outside = ~isin(runs["ecosystem"], allowed)
    spelled = np.zeros(len(runs), dtype=bool)
    notes = []
    # each source key's (row, value) pairs, in row order
    written: dict[str, list[tuple[int, str]]] = {}
    for i, text in enumerate(runs["source_labels"]):
        if isinstance(text, str):
            for item in text.split(";"):
                key, _, value = item.partition("=")
                written.setdefault(key, []).append((i, value))
    for key in sorted(written):
        column = _normalised_column(key)
        if column is None:
            continue
        # the spellings of each normalised label under this key
        spellings: dict[str, list[tuple[int, str]]] = {}
        for row, value in written[key]:
            spellings.setdefault(runs[column][row], []).append((row, value))
        for norm in sorted(spellings):
            found = counts(value for _, value in spellings[norm])
            if len(found) > 1:
                for row, value in spellings[norm]:
                    spelled[row] |= value != found[0][0]
                notes.append(f"{column} {norm} written as " + ", ".join(
                    f"{v!r} ({n})" for v, n in found) + f" in source key {key!r}")
    bad = outside | spelled
    if bad.any():
        parts = []
        if outside.any():
            parts.append(f"{int(outside.sum())} run(s) of ecosystems outside S6 ("
                         + describe_counts(runs["ecosystem"][outside]) + ")")
        parts += notes
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()), details=evidence(
            runs.take(bad).select(["run_id", "ecosystem", "architecture", "dataset", "source_labels"])))
    return Outcome.passed("every label is in the specification's vocabulary"
                          + (" and spelled one way in the sources" if written else ""))


#: Source-label keys that name the normalised columns (from the importers' conventions).
SOURCE_KEYS = {"language": "ecosystem", "lang": "ecosystem", "ecosystem": "ecosystem",
               "modello": "architecture", "model": "architecture", "architecture": "architecture",
               "dataset": "dataset"}


def _normalised_column(key: str) -> str | None:
    base = key.split(".")[-1]
    return SOURCE_KEYS.get(base)


def _text(frame: Frame, column: str) -> np.ndarray:
    """A column's cells as text, None where empty; an integer column's without the decimal
    point its float carries (as the audit has always written them)."""
    values = frame[column]
    whole = column in frame.integer
    return np.array([None if gone else cell_text(v, whole)
                     for v, gone in zip(values, missing(values))], dtype=object)


@check("S6.constancy", "S6", table="runs")
def constancy(ctx: AuditContext) -> Outcome:
    """Everything a campaign holds fixed is one value in every run: the environment columns
    of S6 held_fixed_environment (host hardware, OS, interpreter, RAM size, CodeCarbon's
    version, mode, configuration and PUE, ...) and what CodeCarbon assumed per block in
    held_fixed_blocks (its location, which sets the carbon intensity). A finding names the
    values, each with its runs grouped by ecosystem; an empty cell is not a value (unverified,
    not different)."""
    s6 = ctx.spec["S6_replication"]
    env, blocks = ctx.environment, ctx.blocks
    groups = []
    # the runs off each column's most common value differ from the campaign
    differing: set[str] = set()
    parts = []
    for table, frame, columns in (("environment", env, s6.get("held_fixed_environment", [])),
                                  ("blocks", blocks, s6.get("held_fixed_blocks", []))):
        for column in columns:
            if column not in frame or nunique(frame[column]) <= 1:  # (an empty cell is none)
                continue
            text = _text(frame, column)
            values = []
            for rows in Groups(frame[column]).rows():  # the values in order, an empty cell none
                run_ids = list(dict.fromkeys(frame["run_id"][rows]))
                values.append({"column": column, "value": text[rows[0]], "runs": len(run_ids),
                              "blocks": len(rows) if table == "blocks" else None,
                              "ecosystems": describe_counts(ctx.of_runs("ecosystem", run_ids)),
                              "run_ids": ";".join(sorted(run_ids)[:10])})
            groups += values
            by_runs = [values[i] for i in order(np.array([g["runs"] for g in values]), descending=True)]
            majority = by_runs[0]["value"]
            differing |= {r for r, t in zip(frame["run_id"], text) if t is not None and t != majority}
            described = []
            for g in by_runs:
                blocks_note = "" if g["blocks"] is None else f", {g['blocks']} block(s)"
                described.append(f"{g['value']} ({g['runs']} run(s){blocks_note}: {g['ecosystems']})")
            parts.append(f"{column}: " + "; ".join(described))
    if not groups:
        checked = len(s6.get("held_fixed_environment", [])) + len(s6.get("held_fixed_blocks", []))
        return Outcome.passed(f"{checked} held-fixed columns take one value across all "
                              f"{len(ctx.runs):,} runs")
    # the blocks column is written as integers, or as numbers where environment columns leave
    # cells of it empty (as the audit has always written it)
    block_counts = np.array([np.nan if g["blocks"] is None else g["blocks"] for g in groups])
    found = Frame.of({**{name: [g[name] for g in groups] for name in groups[0]},
                      "blocks": block_counts},
                     integer=() if np.isnan(block_counts).any() else ("blocks",))
    return Outcome.failed(f"{len(parts)} held-fixed column(s) vary: " + " | ".join(parts),
                          rows=len(differing), details=evidence(found))


@check("S6.contemporaneous", "S6", table="runs", figure=figures.TIMELINE)
def contemporaneous(ctx: AuditContext) -> Outcome:
    """The stacks ran in one time window: no ecosystem's runs lie more than
    max_ecosystem_offset_days before or after the span of the other ecosystems' runs. The
    ecosystem furthest from the rest is taken out first (of two equally far, the later), and
    the test repeats on those left; each one taken out is a finding with its dates (another
    window means another driver, firmware, load or room: a confound of the ecosystem)."""
    runs = ctx.runs
    if nunique(runs["ecosystem"]) < 2:
        raise NotApplicable("one ecosystem: nothing to be contemporaneous with")
    days = float(ctx.tolerances.max_ecosystem_offset_days)
    # to the nanosecond, as pandas' Timedelta(days=...) took it
    limit = np.timedelta64(int(days * 24 * 3600 * 1_000_000_000), "ns")
    per_eco = Groups(runs["ecosystem"])
    firsts, lasts = per_eco.min(runs["started_at_utc"]), per_eco.max(runs["ended_at_utc"])
    # each ecosystem's (first start, last end, runs), the earliest first
    windows = {per_eco.keys[0][i]: (firsts[i], lasts[i], int(per_eco.size[i])) for i in order(firsts)}
    rows, remaining = [], list(windows)
    while len(remaining) > 1:
        gaps = {}
        for eco in remaining:
            others_first = min(windows[e][0] for e in remaining if e != eco)
            others_last = max(windows[e][1] for e in remaining if e != eco)
            before = others_first - windows[eco][1]
            after = windows[eco][0] - others_last
            gaps[eco] = (max(before, after), "before" if before > after else "after",
                         others_first, others_last)
        # the ecosystem furthest from the rest (a tie: the later one) is the odd one out
        eco = max(remaining, key=lambda e: (gaps[e][0], windows[e][0]))
        offset, side, span_first, span_last = gaps[eco]
        if offset <= limit:
            break
        first, last, n_runs = windows[eco]
        rows.append({"ecosystem": eco, "runs": n_runs, "first": utc(first).isoformat(),
                     "last": utc(last).isoformat(), "others_first": utc(span_first).isoformat(),
                     "others_last": utc(span_last).isoformat(),
                     "offset_days": round(float(seconds(offset)) / 86400, 2), "side": side})
        remaining.remove(eco)
    if rows:
        text = "; ".join(f"{r['ecosystem']} ran {r['first'][:10]} to {r['last'][:10]}, "
                         f"{r['offset_days']} days {r['side']} the campaign's window "
                         f"({r['others_first'][:10]} to {r['others_last'][:10]})" for r in rows)
        return Outcome.failed(f"{len(rows)} ecosystem(s) in another time window: {text}",
                              rows=sum(r["runs"] for r in rows),
                              details=evidence(Frame.from_records(rows)))
    return Outcome.passed(f"{len(windows)} ecosystems within {limit // np.timedelta64(1, 'D')} days "
                          f"of one another ({utc(runs['started_at_utc'].min()):%Y-%m-%d} to "
                          f"{utc(runs['ended_at_utc'].max()):%Y-%m-%d})")


#: The fewest epochs a run needs for S6.phase-work to judge it (the warm-up is one of them).
MIN_PHASE_WORK_EPOCHS = 3


@check("S6.phase-work", "S6", table="blocks")
def phase_work(ctx: AuditContext) -> Outcome:
    """Each phase in step with its work: in every epoch the eval phase's time per sample
    against the train phase's (samples processed, or the split's S3 size where the source
    recorded none) stays within phase_work_log_tolerance of its run's median ratio over all its
    epochs (the warm-up epoch counts in the median, and is not itself judged). An epoch
    that departs was measured over another window than its phase (a tracker started late or
    stopped early, a phase that waited on something else); a wrong architecture shifts every
    epoch of a run alike and is the business of S1.architecture-identity.  A run of fewer than
    MIN_PHASE_WORK_EPOCHS epochs is not judged: its median is pulled halfway to the warm-up."""
    b = ctx.block_runs
    s3 = ctx.spec["S3_data"]
    phase = b["phase"]
    sizes = np.where(phase == "train", lookup(b["dataset"], s3.get("train_samples", {})),
                     lookup(b["dataset"], s3.get("eval_samples", {})))
    samples = np.where(b.missing("samples_processed"), sizes, b["samples_processed"])
    with np.errstate(divide="ignore", invalid="ignore"):
        per_sample = b["duration_s"] / samples
    # each epoch's mean time per sample in each phase (blocks without one left out)
    epochs = Groups(b["run_id"], b["epoch"])
    train = epochs.mean(np.where(phase == "train", per_sample, np.nan))
    evaluation = epochs.mean(np.where(phase == "eval", per_sample, np.nan))
    if np.isnan(train).all() or np.isnan(evaluation).all():
        raise Skip("no epoch with both phases")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(evaluation / train)
    kept = np.isfinite(log_ratio)
    if not kept.any():
        raise Skip("no epoch whose phases both have a time per sample")
    run_ids, epoch, ratio = epochs.keys[0][kept], epochs.keys[1][kept], log_ratio[kept]
    per_run = Groups(run_ids)
    deviation = ratio - per_run.spread(per_run.median(ratio))
    # with two epochs the median is half the warm-up's: a run is judged from its third epoch on
    enough = per_run.spread(per_run.size) >= MIN_PHASE_WORK_EPOCHS
    if not enough.any():
        raise NotApplicable(f"no run has {MIN_PHASE_WORK_EPOCHS} epochs or more: with fewer, the "
                            "median ratio a run's epochs are held to is half its warm-up epoch's")
    run_ids, epoch, ratio, deviation = (run_ids[enough], epoch[enough], ratio[enough],
                                        deviation[enough])
    judged = epoch >= 2
    if judged.any():     # epoch 1 is the warm-up (S6.warmup): reference only
        run_ids, epoch, deviation = run_ids[judged], epoch[judged], deviation[judged]
    tol = float(ctx.tolerances.phase_work_log_tolerance)
    off = np.abs(deviation) > tol
    if not off.any():
        return Outcome.passed(f"{len(ratio):,} epochs: eval/train time per sample within "
                              f"x{np.exp(tol):.2f} of their run's median (largest "
                              f"x{np.exp(np.abs(deviation).max()):.2f})")
    furthest = np.flatnonzero(off)[order(np.abs(deviation[off]), descending=True)]
    found = Frame.of({"run_id": run_ids[furthest], "epoch": epoch[furthest],
                      "ratio_vs_run_median": np.round(np.exp(deviation[furthest]), 3),
                      "ecosystem": ctx.of_runs("ecosystem", run_ids[furthest])}, integer=("epoch",))
    return Outcome.failed(
        f"{len(found):,} epoch(s) in {nunique(found['run_id'])} run(s) whose eval/train time per "
        f"sample departs from their run's by over x{np.exp(tol):.2f} ("
        + describe_counts(found["ecosystem"]) + f"; largest x{found['ratio_vs_run_median'].max():.2f} / "
        f"x{found['ratio_vs_run_median'].min():.2f})", rows=2 * len(found), details=evidence(found))


HARDWARE_COLUMNS = ("cpu_model", "gpu_model", "gpu_count")


@check("S6.host-design", "S6", table="environment")
def host_design(ctx: AuditContext) -> Outcome:
    """The configurations compared were measured on one kind of hardware (CPU model, GPU model
    and count), or in the host design the package declares (its plan's [hosts]): with design
    "replicates", every repetition round whole on one host, and on the node replicate_nodes
    assigns to it when the plan names them.  Two kinds of hardware are two treatments: without
    a declared design, runs on them cannot be compared."""
    run_ids = set(ctx.runs["run_id"])
    environment = ctx.environment
    env = environment.take(isin(environment["run_id"], run_ids))
    if env.empty:
        raise Skip("no runs")
    repetition = ctx.of_runs("repetition", env["run_id"])
    declared = ctx.package.descriptor.get("hosts") or {}
    design = declared.get("design", "one-kind")
    kinds = np.array([" / ".join("?" if cell is None else cell for cell in cells)
                      for cells in zip(*(_text(env, c) for c in HARDWARE_COLUMNS))], dtype=object)
    hosts = np.array(["?" if h is None else h for h in _text(env, "host")], dtype=object)
    if design == "one-kind":
        if nunique(kinds) > 1:
            minority = kinds != counts(kinds)[0][0]
            return Outcome.failed(f"{nunique(kinds)} kinds of hardware without a declared host "
                                  f"design: {describe_counts(kinds, limit=4)}", rows=int(minority.sum()))
        return Outcome.passed(f"{len(env):,} runs on one kind of hardware ({kinds[0]}), "
                              f"{nunique(hosts)} host(s)")
    nodes = declared.get("replicate_nodes")
    if nodes:
        expected = [nodes[(int(r) - 1) % len(nodes)] for r in repetition]
    else:
        rounds = Groups(repetition)
        host_of_round = {r: mode(hosts[rows]) for r, rows in zip(rounds.keys[0], rounds.rows())}
        expected = [host_of_round[r] for r in repetition]
    off = np.array([h.split(".")[0] != str(e).split(".")[0] for h, e in zip(hosts, expected)],
                   dtype=bool)
    if off.any():
        return Outcome.failed(f"{int(off.sum())} run(s) outside the declared design 'replicates' "
                              f"(each repetition round whole on "
                              + ("its declared node" if nodes else "one host") + ")", rows=int(off.sum()))
    return Outcome.passed(f"declared design 'replicates': {nunique(repetition)} round(s), each "
                          f"whole on one host ({nunique(hosts)} host(s), "
                          f"{nunique(kinds)} kind(s) of hardware)")
