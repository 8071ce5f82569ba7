"""S6 replication: completeness, seeds, processes, interleaving, the schedule, warm-up and
outlier blocks, and labels that mean the same thing in every stack."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from deepgreen_audit.audit.context import CONFIG_COLUMNS, AuditContext, describe_counts, evidence
from deepgreen_audit.registry import Outcome, Skip, check


@check("S6.completeness-runs", "S6", table="runs")
def completeness_runs(ctx: AuditContext) -> Outcome:
    """Every configuration (each ecosystem x architecture x dataset present in the package)
    has every repetition 1..R of S6, once, completed; rows_affected counts missing,
    duplicate, surplus and failed runs."""
    runs = ctx.runs
    reps = int(ctx.spec["S6_replication"]["repetitions"])
    levels = [sorted(runs[c].unique()) for c in CONFIG_COLUMNS]
    expected = {(*cfg, r) for cfg in itertools.product(*levels) for r in range(1, reps + 1)}
    keys = list(zip(*(runs[c] for c in CONFIG_COLUMNS), runs["repetition"]))
    seen = pd.Series(keys).value_counts()
    missing = expected - set(seen.index)
    duplicate = int((seen[seen > 1] - 1).sum())
    surplus = sum(int(n) for k, n in seen.items() if k not in expected)
    failed = int((runs["status"] != "completed").sum())
    bad = len(missing) + duplicate + surplus + failed
    n_cfg = int(np.prod([len(x) for x in levels]))
    if bad:
        return Outcome.failed(f"{n_cfg} configurations x {reps} repetitions: {len(missing)} "
                              f"missing, {duplicate} duplicate, {surplus} beyond repetition "
                              f"{reps}, {failed} failed", rows=bad,
                              details=evidence(pd.DataFrame(
                                  sorted(missing), columns=[*CONFIG_COLUMNS, "repetition"])))
    return Outcome.passed(f"{n_cfg} configurations x {reps} repetitions, all completed")


@check("S6.completeness-blocks", "S6", table="blocks")
def completeness_blocks(ctx: AuditContext) -> Outcome:
    """Every completed run has every epoch x phase block (epochs of S2, train and eval);
    rows_affected counts the missing and surplus blocks."""
    runs = ctx.runs[ctx.runs["status"] == "completed"]
    epochs = int(ctx.spec["S2_optimisation"]["epochs"])
    have = ctx.blocks.groupby("run_id").size()
    expected_per_run = epochs * 2
    counts = have.reindex(runs["run_id"], fill_value=0)
    over = ctx.blocks[ctx.blocks["epoch"] > epochs]
    missing = int((expected_per_run - counts).clip(lower=0).sum())
    surplus = len(over)
    if missing or surplus:
        short = counts[counts < expected_per_run]
        return Outcome.failed(f"{missing:,} block(s) missing in {len(short)} run(s), "
                              f"{surplus:,} beyond epoch {epochs}", rows=missing + surplus,
                              details=evidence(short.rename("blocks").rename_axis("run_id")
                                               .reset_index().assign(expected=expected_per_run)))
    return Outcome.passed(f"{len(runs):,} runs x {epochs} epochs x 2 phases present")


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
    missing = runs[column].isna()
    shared = runs[column].notna() & runs[column].duplicated(keep=False)
    bad = missing | shared
    if bad.any():
        return Outcome.failed(f"{int(missing.sum())} run(s) record no {what}, {int(shared.sum())} "
                              f"share a {what} with another run", rows=int(bad.sum()),
                              details=evidence(runs.loc[bad, ["run_id", "ecosystem", column]]),
                              unrecorded=int(missing.sum()))
    return Outcome.passed(passed)


@check("S6.no-overlap", "S6", table="runs")
def no_overlap(ctx: AuditContext) -> Outcome:
    """No two runs overlap in time on the host (a run measured beside another measures it too)."""
    runs = ctx.runs
    order = runs.sort_values("started_at_utc")
    overlap_next = order["ended_at_utc"] > order["started_at_utc"].shift(-1)
    overlapping = (overlap_next | overlap_next.shift(1, fill_value=False)).reindex(runs.index)
    if overlapping.any():
        cols = ["run_id", "ecosystem", "started_at_utc", "ended_at_utc"]
        return Outcome.failed(f"{int(overlapping.sum())} run(s) overlap another run in time",
                              rows=int(overlapping.sum()),
                              details=evidence(order.loc[overlapping.reindex(order.index), cols]))
    return Outcome.passed(f"{len(runs):,} runs, none overlapping another in time")


def _schedule(ctx) -> tuple[pd.DataFrame, str]:
    runs = ctx.runs
    if runs["schedule_position"].notna().all():
        return runs.sort_values("schedule_position"), "schedule_position"
    return runs.sort_values("started_at_utc"), "start times (schedule_position not recorded)"


@check("S6.interleaving", "S6", table="runs")
def interleaving(ctx: AuditContext) -> Outcome:
    """Runs are interleaved: no configuration runs twice in a row, and no ecosystem's runs
    form one uninterrupted stretch of the schedule (which would confound the ecosystem with
    the time it ran)."""
    order, basis = _schedule(ctx)
    if len(order) < 2:
        raise Skip("fewer than two runs")
    cfg = ctx.config_of_run.reindex(order["run_id"]).to_numpy()
    repeat = np.r_[False, cfg[1:] == cfg[:-1]]
    eco = order["ecosystem"].to_numpy()
    stretch = np.zeros(len(order), dtype=bool)
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
                              details=evidence(order.loc[bad, ["run_id", "ecosystem", "started_at_utc"]]
                                               .assign(follows_own_configuration=repeat[bad],
                                                       ecosystem_as_one_block=stretch[bad])))
    return Outcome.passed(f"{len(order):,} runs interleaved (by {basis})")


@check("S6.schedule-gaps", "S6", table="runs")
def schedule_gaps(ctx: AuditContext) -> Outcome:
    """The schedule has no gaps: positions run 1..n without holes and follow start time;
    no run waited longer than max_run_gap_s after the previous one; no run idled longer than
    max_block_gap_s between two of its blocks."""
    runs = ctx.runs
    t = ctx.tolerances
    bad = pd.Series(False, index=runs.index)
    parts = []
    pos = runs["schedule_position"]
    if pos.notna().all():
        holes = set(range(1, len(runs) + 1)) - set(pos.astype(int))
        by_pos = runs.sort_values("schedule_position")
        misordered = by_pos["started_at_utc"].diff().dt.total_seconds() < 0
        if holes:
            parts.append(f"{len(holes)} schedule position(s) missing")
        if misordered.any():
            parts.append(f"{int(misordered.sum())} run(s) started before the previous position")
            bad[misordered[misordered].index] = True
    order = runs.sort_values("started_at_utc")
    gap = (order["started_at_utc"] - order["ended_at_utc"].shift(1)).dt.total_seconds()
    long_gap = gap > float(t["max_run_gap_s"])
    if long_gap.any():
        parts.append(f"{int(long_gap.sum())} run(s) started over {t['max_run_gap_s']:.0f} s after "
                     f"the previous one ended (longest {gap.max() / 3600:.1f} h)")
        bad[long_gap[long_gap].index] = True
    b = ctx.blocks
    start = b["started_at_utc"]
    end = start + pd.to_timedelta(b["duration_s"], unit="s")
    idle = (start - end.groupby(b["run_id"]).shift(1)).dt.total_seconds()
    idle_bad = idle > float(t["max_block_gap_s"])
    if idle_bad.any():
        runs_hit = set(b.loc[idle_bad, "run_id"])
        parts.append(f"{len(runs_hit)} run(s) idled over {t['max_block_gap_s']:.0f} s between "
                     f"blocks ({int(idle_bad.sum())} gap(s), longest {idle.max():.0f} s)")
        bad |= runs["run_id"].isin(runs_hit)
    if parts:
        gaps = runs.loc[bad, ["run_id", "ecosystem", "started_at_utc"]].assign(
            wait_after_previous_run_s=gap.reindex(runs.index)[bad],
            longest_idle_between_blocks_s=runs.loc[bad, "run_id"].map(idle.groupby(b["run_id"]).max()))
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()) + len(holes if pos.notna().all() else ()),
                              details=evidence(gaps))
    return Outcome.passed(f"no gaps: longest wait between runs {gap.max():.0f} s, between "
                          f"blocks {idle.max():.1f} s")


def _duration_ratio(ctx) -> pd.DataFrame:
    """Each block's duration over its run's median for the phase after epoch 1 (a Skip
    when there are no blocks: pandas cannot join onto an empty grouping's index)."""
    b = ctx.block_runs[["run_id", "ecosystem", "epoch", "phase", "duration_s"]].copy()
    if b.empty:
        raise Skip("no blocks")
    later = b[b["epoch"] >= 2]
    median = later.groupby(["run_id", "phase"])["duration_s"].median().rename("median_s")
    b = b.join(median, on=["run_id", "phase"])
    b["ratio"] = b["duration_s"] / b["median_s"]
    return b


@check("S6.warmup", "S6", severity="warning", table="blocks")
def warmup(ctx: AuditContext) -> Outcome:
    """Warm-up blocks: epoch-1 blocks slower than warmup_duration_ratio x their run's median
    for that phase. Expected; the phase totals leave out the first [analysis]
    warmup_epochs_excluded epochs (0: they include the warm-up, as the paper says), and the
    message says which. Warns when a run shows no warm-up where most do: its first epoch ran
    unlike its peers' (and, were the warm-up left out, a normal epoch would be dropped)."""
    b = _duration_ratio(ctx)
    if b["median_s"].isna().all():
        raise Skip("no run has blocks after epoch 1 to compare epoch 1 with")
    first = b[b["epoch"] == 1]
    slow = first["ratio"] > float(ctx.tolerances["warmup_duration_ratio"])
    train = first["phase"] == "train"
    share = slow[train].mean() if train.any() else 0.0
    most = float(ctx.tolerances["warmup_majority_share"])
    no_warmup = train & ~slow if share > most else pd.Series(False, index=first.index)
    msg = (f"{int(slow.sum()):,} warm-up block(s) in epoch 1 ("
           + (describe_counts(first.loc[slow, "phase"]) if slow.any() else "none")
           + f"); median epoch-1 train ratio x{first.loc[train, 'ratio'].median():.2f}")
    if no_warmup.any():
        return Outcome.failed(msg + f"; {int(no_warmup.sum())} run(s) show none where most do; "
                              + _warmup_rule(ctx),
                              rows=int(no_warmup.sum()),
                              details=evidence(first.loc[no_warmup, ["run_id", "phase", "ratio"]]))
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
    later = b[b["epoch"] >= 2]
    if later.empty:
        raise Skip("no blocks after epoch 1")
    r = float(ctx.tolerances["outlier_duration_ratio"])
    out = (later["ratio"] > r) | (later["ratio"] < 1 / r)
    if out.any():
        return Outcome.failed(f"{int(out.sum()):,} outlier block(s) (duration beyond x{r} or "
                              f"/{r} of the run's median): "
                              + describe_counts(later.loc[out, "ecosystem"] + "/"
                                                + later.loc[out, "phase"]),
                              rows=int(out.sum()), details=evidence(
                                  later.loc[out, ["run_id", "epoch", "phase", "duration_s", "ratio"]]
                                  .sort_values("ratio", ascending=False)))
    return Outcome.passed(f"{len(later):,} blocks after epoch 1 within x{r} of their run's median")


@check("S6.labels", "S6", table="runs")
def labels(ctx: AuditContext) -> Outcome:
    """Labels mean the same thing in every stack: each ecosystem is one the specification
    names, and each normalised label was written one way in the sources (runs.source_labels);
    rows_affected counts runs outside the vocabulary or spelled the minority way."""
    runs = ctx.runs
    allowed = set(ctx.spec["S6_replication"]["ecosystems"])
    outside = ~runs["ecosystem"].isin(allowed)
    spelled = pd.Series(False, index=runs.index)
    notes = []
    pairs = []
    for i, text in runs["source_labels"].items():
        if isinstance(text, str):
            for item in text.split(";"):
                key, _, value = item.partition("=")
                pairs.append((i, key, value))
    if pairs:
        src = pd.DataFrame(pairs, columns=["row", "key", "value"])
        for key, group in src.groupby("key"):
            column = _normalised_column(key)
            if column is None:
                continue
            group = group.assign(norm=runs.loc[group["row"], column].to_numpy())
            for norm, g in group.groupby("norm"):
                counts = g["value"].value_counts()
                if len(counts) > 1:
                    minority = g["value"] != counts.index[0]
                    spelled[g.loc[minority, "row"]] = True
                    notes.append(f"{column} {norm} written as " + ", ".join(
                        f"{v!r} ({n})" for v, n in counts.items()) + f" in source key {key!r}")
    bad = outside | spelled
    if bad.any():
        parts = []
        if outside.any():
            parts.append(f"{int(outside.sum())} run(s) of ecosystems outside S6 ("
                         + describe_counts(runs.loc[outside, "ecosystem"]) + ")")
        parts += notes
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()), details=evidence(
            runs.loc[bad, ["run_id", "ecosystem", "architecture", "dataset", "source_labels"]]))
    return Outcome.passed("every label is in the specification's vocabulary"
                          + (" and spelled one way in the sources" if pairs else ""))


#: Source-label keys that name the normalised columns (from the importers' conventions).
SOURCE_KEYS = {"language": "ecosystem", "lang": "ecosystem", "ecosystem": "ecosystem",
               "modello": "architecture", "model": "architecture", "architecture": "architecture",
               "dataset": "dataset"}


def _normalised_column(key: str) -> str | None:
    base = key.split(".")[-1]
    return SOURCE_KEYS.get(base)


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
    for table, frame, columns in (("environment", env, s6.get("held_fixed_environment", [])),
                                  ("blocks", blocks, s6.get("held_fixed_blocks", []))):
        for column in columns:
            if column not in frame or frame[column].nunique() <= 1:  # (an empty cell is none)
                continue
            values = frame[["run_id", column]].dropna()
            for value, rows in values.groupby(column, sort=True):
                run_ids = rows["run_id"].unique()
                groups.append({"column": column, "value": str(value), "runs": len(run_ids),
                               "blocks": len(rows) if table == "blocks" else None,
                               "ecosystems": describe_counts(ctx.runs.set_index("run_id").loc[
                                   run_ids, "ecosystem"]),
                               "run_ids": ";".join(sorted(run_ids)[:10])})
    if not groups:
        checked = len(s6.get("held_fixed_environment", [])) + len(s6.get("held_fixed_blocks", []))
        return Outcome.passed(f"{checked} held-fixed columns take one value across all "
                              f"{len(ctx.runs):,} runs")
    found = pd.DataFrame(groups)
    # the runs off each column's most common value differ from the campaign
    differing = set()
    parts = []
    for column, rows in found.groupby("column", sort=False):
        rows = rows.sort_values("runs", ascending=False)
        majority = rows.iloc[0]["value"]
        frame = env if column in env else blocks
        differing |= set(frame.loc[frame[column].notna() & (frame[column].astype(str) != majority),
                                   "run_id"])
        parts.append(f"{column}: " + "; ".join(
            f"{r.value} ({r.runs} run(s){f', {int(r.blocks)} block(s)' if pd.notna(r.blocks) else ''}: "
            f"{r.ecosystems})" for r in rows.itertuples()))
    return Outcome.failed(f"{found['column'].nunique()} held-fixed column(s) vary: " + " | ".join(parts),
                          rows=len(differing), details=evidence(found))


@check("S6.contemporaneous", "S6", table="runs")
def contemporaneous(ctx: AuditContext) -> Outcome:
    """The stacks ran in one time window: no ecosystem's runs lie more than
    max_ecosystem_offset_days before or after the span of the other ecosystems' runs. The
    ecosystem furthest from the rest is taken out first (of two equally far, the later), and
    the test repeats on those left; each one taken out is a finding with its dates (another
    window means another driver, firmware, load or room: a confound of the ecosystem)."""
    runs = ctx.runs
    if runs["ecosystem"].nunique() < 2:
        raise Skip("one ecosystem: nothing to be contemporaneous with")
    limit = pd.Timedelta(days=float(ctx.tolerances["max_ecosystem_offset_days"]))
    windows = runs.groupby("ecosystem").agg(first=("started_at_utc", "min"),
                                             last=("ended_at_utc", "max"),
                                             runs=("run_id", "size")).sort_values("first")
    rows, remaining = [], list(windows.index)
    while len(remaining) > 1:
        gaps = {}
        for eco in remaining:
            rest = windows.loc[[e for e in remaining if e != eco]]
            before = rest["first"].min() - windows.at[eco, "last"]
            after = windows.at[eco, "first"] - rest["last"].max()
            gaps[eco] = (max(before, after), "before" if before > after else "after",
                         rest["first"].min(), rest["last"].max())
        # the ecosystem furthest from the rest (a tie: the later one) is the odd one out
        eco = max(remaining, key=lambda e: (gaps[e][0], windows.at[e, "first"]))
        offset, side, span_first, span_last = gaps[eco]
        if offset <= limit:
            break
        w = windows.loc[eco]
        rows.append({"ecosystem": eco, "runs": int(w["runs"]), "first": w["first"].isoformat(),
                     "last": w["last"].isoformat(), "others_first": span_first.isoformat(),
                     "others_last": span_last.isoformat(),
                     "offset_days": round(offset.total_seconds() / 86400, 2), "side": side})
        remaining.remove(eco)
    if rows:
        found = pd.DataFrame(rows)
        text = "; ".join(f"{r.ecosystem} ran {r.first[:10]} to {r.last[:10]}, {r.offset_days} days "
                         f"{r.side} the campaign's window ({r.others_first[:10]} to {r.others_last[:10]})"
                         for r in found.itertuples())
        return Outcome.failed(f"{len(found)} ecosystem(s) in another time window: {text}",
                              rows=int(found["runs"].sum()), details=evidence(found))
    return Outcome.passed(f"{len(windows)} ecosystems within {limit.days} days of one another "
                          f"({runs['started_at_utc'].min():%Y-%m-%d} to "
                          f"{runs['ended_at_utc'].max():%Y-%m-%d})")


@check("S6.phase-work", "S6", table="blocks")
def phase_work(ctx: AuditContext) -> Outcome:
    """Each phase in step with its work: in every epoch the eval phase's time per sample
    against the train phase's (samples processed, or the split's S3 size where the source
    recorded none) stays within phase_work_log_tolerance of its run's median ratio over all its
    epochs (the warm-up epoch counts in the median, and is not itself judged). An epoch
    that departs was measured over another window than its phase (a tracker started late or
    stopped early, a phase that waited on something else); a wrong architecture shifts every
    epoch of a run alike and is the business of S1.architecture-identity."""
    b = ctx.block_runs
    s3 = ctx.spec["S3_data"]
    sizes = np.where(b["phase"] == "train", b["dataset"].map(s3.get("train_samples", {})),
                     b["dataset"].map(s3.get("eval_samples", {})))
    samples = b["samples_processed"].astype("Float64").fillna(pd.Series(sizes, index=b.index,
                                                                       dtype="Float64"))
    per_sample = (b["duration_s"] / samples).astype(float)
    frame = pd.DataFrame({"run_id": b["run_id"], "ecosystem": b["ecosystem"], "epoch": b["epoch"],
                          "phase": b["phase"], "per_sample": per_sample})
    wide = frame.pivot_table(index=["run_id", "epoch"], columns="phase", values="per_sample")
    if not {"train", "eval"} <= set(wide.columns):
        raise Skip("no epoch with both phases")
    ratio = np.log(wide["eval"] / wide["train"]).replace([np.inf, -np.inf], np.nan).dropna()
    if ratio.empty:
        raise Skip("no epoch whose phases both have a time per sample")
    deviation = ratio - ratio.groupby(level="run_id").transform("median")
    epochs = deviation.index.get_level_values("epoch")
    if (epochs >= 2).any():
        deviation = deviation[epochs >= 2]     # epoch 1 is the warm-up (S6.warmup): reference only
    tol = float(ctx.tolerances["phase_work_log_tolerance"])
    off = deviation[deviation.abs() > tol]
    if off.empty:
        return Outcome.passed(f"{len(ratio):,} epochs: eval/train time per sample within "
                              f"x{np.exp(tol):.2f} of their run's median (largest "
                              f"x{np.exp(deviation.abs().max()):.2f})")
    found = off.rename("log_deviation").reset_index()
    found["ratio_vs_run_median"] = np.exp(found["log_deviation"]).round(3)
    found["ecosystem"] = found["run_id"].map(ctx.runs.set_index("run_id")["ecosystem"])
    found = found.sort_values("log_deviation", key=abs, ascending=False).drop(columns="log_deviation")
    return Outcome.failed(
        f"{len(found):,} epoch(s) in {found['run_id'].nunique()} run(s) whose eval/train time per "
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
    env = ctx.environment.merge(ctx.runs[["run_id", "repetition"]], on="run_id", how="inner")
    if env.empty:
        raise Skip("no runs")
    declared = ctx.package.descriptor.get("hosts") or {}
    design = declared.get("design", "one-kind")
    kinds = env[list(HARDWARE_COLUMNS)].astype("string").fillna("?").agg(" / ".join, axis=1)
    hosts = env["host"].astype("string").fillna("?")
    if design == "one-kind":
        if kinds.nunique() > 1:
            minority = kinds != kinds.value_counts().index[0]
            return Outcome.failed(f"{kinds.nunique()} kinds of hardware without a declared host "
                                  f"design: {describe_counts(kinds, limit=4)}", rows=int(minority.sum()))
        return Outcome.passed(f"{len(env):,} runs on one kind of hardware ({kinds.iloc[0]}), "
                              f"{hosts.nunique()} host(s)")
    nodes = declared.get("replicate_nodes")
    host_of_round = hosts.groupby(env["repetition"]).agg(lambda h: h.mode().iloc[0])
    expected = env["repetition"].map(host_of_round)
    if nodes:
        expected = env["repetition"].map(lambda r: nodes[(int(r) - 1) % len(nodes)])
    off = hosts.str.split(".").str[0] != expected.astype("string").str.split(".").str[0]
    if off.any():
        return Outcome.failed(f"{int(off.sum())} run(s) outside the declared design 'replicates' "
                              f"(each repetition round whole on "
                              + ("its declared node" if nodes else "one host") + ")", rows=int(off.sum()))
    return Outcome.passed(f"declared design 'replicates': {env['repetition'].nunique()} round(s), each "
                          f"whole on one host ({hosts.nunique()} host(s), "
                          f"{kinds.nunique()} kind(s) of hardware)")
