"""S1 model: the architectures, the canonical initial weights, and what the data say ran."""

from __future__ import annotations

import numpy as np
import pandas as pd

from deepgreen_audit.audit.context import AuditContext, evidence, labels_in_spec
from deepgreen_audit.registry import Outcome, Skip, check
from deepgreen_audit.units import J_PER_KWH

FEATURES = {"time": "train seconds per sample", "power": "train GPU power"}


@check("S1.architectures", "S1", table="runs")
def architectures(ctx: AuditContext) -> Outcome:
    """Every run's architecture is one the specification (S1 architectures) names."""
    return labels_in_spec(ctx.runs, "architecture", ctx.spec["S1_model"]["architectures"], "S1")


@check("S1.initial-weights", "S1", table="runs")
def initial_weights(ctx: AuditContext) -> Outcome:
    """Every run records the SHA-256 of the canonical initial-weight export it loaded, and
    runs of different (architecture, classes) never share one export."""
    runs = ctx.runs
    missing = runs["initial_weights_sha256"].isna()
    classes = runs["dataset"].map(ctx.spec["S3_data"]["classes"])
    shape = runs["architecture"] + "/" + classes.astype(str)
    recorded = runs[~missing].assign(shape=shape[~missing])
    shared = recorded.groupby("initial_weights_sha256")["shape"].transform("nunique") > 1
    problems = []
    if missing.any():
        problems.append(f"{int(missing.sum())} run(s) record no initial-weight hash")
    if shared.any():
        problems.append(f"{int(shared.sum())} run(s) share one export across different "
                        "(architecture, classes)")
    if problems:
        return Outcome.failed("; ".join(problems), rows=int(missing.sum() + shared.sum()),
                              unrecorded=int(missing.sum()),
                              details=evidence(runs.loc[missing | shared.reindex(runs.index, fill_value=False),
                                                        ["run_id", "architecture", "dataset",
                                                         "initial_weights_sha256"]]))
    return Outcome.passed(f"{len(runs):,} runs record their initial-weight export")


def config_profiles(ctx) -> pd.DataFrame:
    """Per configuration, the median log train time per sample and log GPU power.

    Training blocks after the first epoch (warm-up) are used.  Time per sample
    uses samples_processed, or the dataset's S3 train size when the source
    recorded none; GPU power the counter energy, or CodeCarbon's when there are
    no counters.
    """
    b = ctx.block_runs
    train = b[b["phase"] == "train"]
    if (train["epoch"] >= 2).any():
        train = train[train["epoch"] >= 2]
    sizes = train["dataset"].map(ctx.spec["S3_data"].get("train_samples", {}))
    samples = train["samples_processed"].astype("Float64").fillna(sizes.astype("Float64"))
    gpus = train["gpu_count"].astype("Float64").where(train["gpu_count"].astype("Float64") > 0)
    counter_w = train["gpu_energy_j"] / train["duration_s"] / gpus
    cc_w = train["codecarbon_gpu_energy_kwh"] * J_PER_KWH / train["codecarbon_duration_s"] / gpus
    with np.errstate(divide="ignore", invalid="ignore"):
        frame = pd.DataFrame({
            "ecosystem": train["ecosystem"], "architecture": train["architecture"],
            "dataset": train["dataset"],
            "time": np.log((train["duration_s"] / samples).astype(float)),
            "power": np.log(counter_w.fillna(cc_w).astype(float))})
    frame = frame.replace([np.inf, -np.inf], np.nan)
    return frame.groupby(["ecosystem", "architecture", "dataset"])[list(FEATURES)].median()


def _contrasts(prof: pd.DataFrame, archs: list[str]) -> pd.DataFrame:
    """Per (ecosystem, dataset) that ran both architectures: profile(a1) - profile(a0)."""
    a0, a1 = archs
    rows = {}
    for (eco, ds), group in prof.groupby(level=["ecosystem", "dataset"]):
        by_arch = group.droplevel(["ecosystem", "dataset"])
        if a0 in by_arch.index and a1 in by_arch.index:
            rows[(eco, ds)] = by_arch.loc[a1] - by_arch.loc[a0]
    frame = pd.DataFrame(rows).T
    if not frame.empty:
        frame.index.names = ["ecosystem", "dataset"]
    return frame


def _predicted(prof: pd.DataFrame, eco: str, arch: str, ds: str, references: list[str]) -> pd.Series:
    """The profile `arch` would have in (eco, ds), from the same ecosystem's `arch` on its
    reference datasets moved by how the dataset changes `arch` in the other ecosystems."""
    preds = []
    others = [e for e in prof.index.get_level_values("ecosystem").unique() if e != eco]
    for ref in references:
        shifts = [prof.loc[(e, arch, ds)] - prof.loc[(e, arch, ref)] for e in others
                  if (e, arch, ds) in prof.index and (e, arch, ref) in prof.index]
        shift = pd.concat(shifts, axis=1).median(axis=1) if shifts else 0.0
        preds.append(prof.loc[(eco, arch, ref)] + shift)
    return pd.concat(preds, axis=1).median(axis=1)


@check("S1.architecture-identity", "S1", table="blocks")
def architecture_identity(ctx: AuditContext) -> Outcome:
    """A label that names the wrong architecture. Two architectures differ in train time per
    sample and in GPU power; where an ecosystem's two labels on one dataset profile the same
    (both log ratios within architecture_collapse_log_tolerance) while the same ecosystem
    separates them on its other datasets, the two labels measured one network. Which label is
    wrong is the likelier of two hypotheses, each predicting both configurations from the
    ecosystem's own profile of one architecture on its other datasets, moved by how the
    dataset changes that architecture in the other ecosystems. A drifting window or a stale
    dataset changes one configuration's work, not two architectures into one; an ecosystem
    whose contrast is reversed against the campaign's but alike on every dataset differs as a stack
    (implementation, hardware window), and a dataset whose time contrast alone departs moved
    in work per sample, not in identity: both are reported as explained, not flagged."""
    archs = list(ctx.spec["S1_model"]["architectures"])
    if len(archs) != 2:
        raise Skip("the identity check compares exactly two architectures")
    prof = config_profiles(ctx).dropna()
    contrast = _contrasts(prof, archs)
    if contrast.empty:
        raise Skip("no (ecosystem, dataset) ran both architectures: nothing to compare")
    t = ctx.tolerances
    collapse_tol = float(t["architecture_collapse_log_tolerance"])
    tol = float(t["architecture_profile_log_tolerance"])
    a0, a1 = archs
    collapsed = (contrast.abs() < collapse_tol).all(axis=1)
    flagged, explained = [], []
    for eco, group in contrast.groupby(level="ecosystem"):
        datasets = list(group.index.get_level_values("dataset"))
        intact = [ds for ds in datasets if not collapsed[(eco, ds)]]
        for ds in datasets:
            if not collapsed[(eco, ds)] or not intact:
                continue
            reference = contrast.loc[[(eco, d) for d in intact]].median()
            obs = {a: prof.loc[(eco, a, ds)] for a in archs}
            pred = {a: _predicted(prof, eco, a, ds, intact) for a in archs}
            # hypothesis "label a is wrong": both configurations ran the other architecture
            score = {a: float(sum((obs[x] - pred[b]).abs().sum() for x in archs))
                     for a, b in ((a0, a1), (a1, a0))}
            wrong = min(score, key=score.__getitem__)
            ran = a1 if wrong == a0 else a0
            flagged.append({
                "configuration": f"{eco}/{wrong}/{ds}", "ran": ran,
                "time_ratio": round(float(np.exp(contrast.loc[(eco, ds), "time"])), 3),
                "power_ratio": round(float(np.exp(contrast.loc[(eco, ds), "power"])), 3),
                "reference_time_ratio": round(float(np.exp(reference["time"])), 3),
                "reference_power_ratio": round(float(np.exp(reference["power"])), 3),
                "reference_datasets": ",".join(intact),
                f"score_{a0}_label_wrong": round(score[a0], 3),
                f"score_{a1}_label_wrong": round(score[a1], 3)})
        explained += _explained(eco, group, contrast, collapsed, tol)
    details = {"evidence": flagged, "evidence_total": len(flagged), "explained": explained}
    b = ctx.block_runs
    key = b["ecosystem"] + "/" + b["architecture"] + "/" + b["dataset"]
    note = ("; not flagged: " + "; ".join(e["why"] for e in explained)) if explained else ""
    if flagged:
        rows = int(key.isin([f["configuration"] for f in flagged]).sum())
        found = "; ".join(
            f"{f['configuration']} ran {f['ran']} (its {a1}/{a0} ratios on that dataset: time "
            f"x{f['time_ratio']}, GPU power x{f['power_ratio']}; on {f['reference_datasets']}: "
            f"x{f['reference_time_ratio']}, x{f['reference_power_ratio']}; hypothesis scores "
            f"{f[f'score_{a0}_label_wrong']} vs {f[f'score_{a1}_label_wrong']})" for f in flagged)
        return Outcome.failed(f"{len(flagged)} label(s) name the wrong architecture: {found}{note}",
                              rows=rows, details=details)
    consensus = contrast.median()
    return Outcome.passed(f"{len(contrast)} (ecosystem, dataset) pairs: no two labels measured "
                          f"one network (campaign {a1}/{a0}: time x{np.exp(consensus['time']):.2f}, "
                          f"GPU power x{np.exp(consensus['power']):.2f}){note}", details=details)


def _explained(eco: str, group: pd.DataFrame, contrast: pd.DataFrame, collapsed: pd.Series,
               tol: float) -> list[dict]:
    """Contrast anomalies of one ecosystem that another explanation than a label accounts for."""
    out = []
    eco_median = group.median()
    others = contrast.drop(index=eco, level="ecosystem")
    # the campaign's contrast: the median over the other ecosystems' own medians
    consensus = others.groupby(level="ecosystem").median().median() if not others.empty else eco_median
    spread = (group - eco_median).abs().max()
    reversed_ = [f for f in FEATURES if abs(consensus[f]) >= tol / 2
                 and np.sign(consensus[f]) * eco_median[f] <= -tol / 2]
    if reversed_ and (spread[reversed_] <= tol).all():
        out.append({"ecosystem": eco, "kind": "stack-wide", "why": (
            f"{eco}: its contrast is reversed against the campaign's alike on every dataset ("
            + ", ".join(f"{FEATURES[f]} x{np.exp(eco_median[f]):.2f} vs x{np.exp(consensus[f]):.2f}"
                        for f in reversed_) + "): a property of the stack (implementation, "
            "hardware or time window), not of one label")})
    if len(group) >= 3:
        for (_, ds), row in group.iterrows():
            if collapsed[(eco, ds)]:
                continue
            siblings = group.drop(index=(eco, ds)).median()
            off = (row - siblings).abs()
            if off["time"] > tol and off["power"] <= tol:
                out.append({"ecosystem": eco, "dataset": ds, "kind": "work", "why": (
                    f"{eco}/{ds}: time contrast x{np.exp(row['time']):.2f} against "
                    f"x{np.exp(siblings['time']):.2f} on its other datasets while its GPU-power "
                    f"contrast holds (x{np.exp(row['power']):.2f}): one configuration's work per "
                    "sample changed (a stale dataset or a drifting window), not its identity")})
    return out
