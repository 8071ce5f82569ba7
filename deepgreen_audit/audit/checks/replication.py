"""S6 replication: completeness, seeds, processes, interleaving, the schedule, warm-up and
outlier blocks, and labels that mean the same thing in every stack."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from deepgreen_audit.audit.context import CONFIG_COLUMNS, describe_counts
from deepgreen_audit.audit.registry import Outcome, Skip, check


@check("S6.completeness-runs", "S6", table="runs")
def completeness_runs(ctx):
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
                              details={"missing": sorted("/".join(map(str, k)) for k in missing)[:50]})
    return Outcome.passed(f"{n_cfg} configurations x {reps} repetitions, all completed")


@check("S6.completeness-blocks", "S6", table="blocks")
def completeness_blocks(ctx):
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
                              details={"runs": list(short.index[:50])})
    return Outcome.passed(f"{len(runs):,} runs x {epochs} epochs x 2 phases present")


@check("S6.distinct-seeds", "S6", table="runs")
def distinct_seeds(ctx):
    """Every run records its seed, and no two runs share one."""
    runs = ctx.runs
    missing = runs["seed"].isna()
    dup = runs["seed"].notna() & runs["seed"].duplicated(keep=False)
    bad = missing | dup
    if bad.any():
        return Outcome.failed(f"{int(missing.sum())} run(s) record no seed, {int(dup.sum())} "
                              "share a seed with another run", rows=int(bad.sum()))
    return Outcome.passed(f"{len(runs):,} distinct seeds")


@check("S6.independent-processes", "S6", table="runs")
def independent_processes(ctx):
    """Every run was its own operating-system process (distinct process ids) and no two
    runs overlap in time on the host."""
    runs = ctx.runs
    missing = runs["process_id"].isna()
    dup = runs["process_id"].notna() & runs["process_id"].duplicated(keep=False)
    order = runs.sort_values("started_at_utc")
    overlap_next = order["ended_at_utc"] > order["started_at_utc"].shift(-1)
    overlapping = overlap_next | overlap_next.shift(1, fill_value=False)
    overlapping = overlapping.reindex(runs.index)
    bad = missing | dup | overlapping
    if bad.any():
        return Outcome.failed(f"{int(missing.sum())} run(s) record no process id, "
                              f"{int(dup.sum())} share one, {int(overlapping.sum())} overlap "
                              "another run in time", rows=int(bad.sum()))
    return Outcome.passed(f"{len(runs):,} runs in distinct processes, none overlapping")


def _schedule(ctx) -> tuple[pd.DataFrame, str]:
    runs = ctx.runs
    if runs["schedule_position"].notna().all():
        return runs.sort_values("schedule_position"), "schedule_position"
    return runs.sort_values("started_at_utc"), "start times (schedule_position not recorded)"


@check("S6.interleaving", "S6", table="runs")
def interleaving(ctx):
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
                              f"({', '.join(blocked)})", rows=int(bad.sum()))
    return Outcome.passed(f"{len(order):,} runs interleaved (by {basis})")


@check("S6.schedule-gaps", "S6", table="runs")
def schedule_gaps(ctx):
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
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()) + len(holes if pos.notna().all() else ()))
    return Outcome.passed(f"no gaps: longest wait between runs {gap.max():.0f} s, between "
                          f"blocks {idle.max():.1f} s")


def _duration_ratio(ctx) -> pd.DataFrame:
    b = ctx.block_runs[["run_id", "ecosystem", "epoch", "phase", "duration_s"]].copy()
    later = b[b["epoch"] >= 2]
    median = later.groupby(["run_id", "phase"])["duration_s"].median().rename("median_s")
    b = b.join(median, on=["run_id", "phase"])
    b["ratio"] = b["duration_s"] / b["median_s"]
    return b


@check("S6.warmup", "S6", severity="warning", table="blocks")
def warmup(ctx):
    """Warm-up blocks: epoch-1 blocks slower than warmup_duration_ratio x their run's median
    for that phase. Expected and excluded by the analysis; warns when a run shows no warm-up
    where most do, so the exclusion is not applied blindly."""
    b = _duration_ratio(ctx)
    if b["median_s"].isna().all():
        raise Skip("no run has blocks after epoch 1 to compare epoch 1 with")
    first = b[b["epoch"] == 1]
    slow = first["ratio"] > float(ctx.tolerances["warmup_duration_ratio"])
    train = first["phase"] == "train"
    share = slow[train].mean() if train.any() else 0.0
    no_warmup = train & ~slow if share > 0.5 else pd.Series(False, index=first.index)
    msg = (f"{int(slow.sum()):,} warm-up block(s) in epoch 1 ("
           + (describe_counts(first.loc[slow, "phase"]) if slow.any() else "none")
           + f"); median epoch-1 train ratio x{first.loc[train, 'ratio'].median():.2f}")
    if no_warmup.any():
        return Outcome.failed(msg + f"; {int(no_warmup.sum())} run(s) show none where most do",
                              rows=int(no_warmup.sum()))
    return Outcome.passed(msg + "; the analysis excludes epoch 1", rows=int(slow.sum()))


@check("S6.outlier-blocks", "S6", severity="warning", table="blocks")
def outlier_blocks(ctx):
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
                              rows=int(out.sum()))
    return Outcome.passed(f"{len(later):,} blocks after epoch 1 within x{r} of their run's median")


@check("S6.labels", "S6", table="runs")
def labels(ctx):
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
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()))
    return Outcome.passed("every label is in the specification's vocabulary"
                          + (" and spelled one way in the sources" if pairs else ""))


#: Source-label keys that name the normalised columns (from the importers' conventions).
SOURCE_KEYS = {"language": "ecosystem", "lang": "ecosystem", "ecosystem": "ecosystem",
               "modello": "architecture", "model": "architecture", "architecture": "architecture",
               "dataset": "dataset"}


def _normalised_column(key: str) -> str | None:
    base = key.split(".")[-1]
    return SOURCE_KEYS.get(base)


HARDWARE_COLUMNS = ("cpu_model", "gpu_model", "gpu_count")


@check("S6.host-design", "S6", table="environment")
def host_design(ctx):
    """The configurations compared were measured on one kind of hardware (CPU model, GPU model
    and count), or in the host design the package declares (its plan's [hosts]): with design
    "replicates", every repetition round whole on one host, and on the node replicate_nodes
    assigns to it when the plan names them.  Two kinds of hardware are two treatments: without
    a declared design, runs on them cannot be compared."""
    env = ctx.environment.merge(ctx.runs[["run_id", "repetition"]], on="run_id", how="inner")
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
