"""S1 model: the architectures, the canonical initial weights, and what the data say ran."""

from __future__ import annotations

import numpy as np
import pandas as pd

from deepgreen_audit.audit.context import labels_in_spec
from deepgreen_audit.audit.registry import Outcome, Skip, check
from deepgreen_audit.units import J_PER_KWH

FEATURES = {"time": "train seconds per sample", "power": "train GPU power"}


@check("S1.architectures", "S1", table="runs")
def architectures(ctx):
    """Every run's architecture is one the specification (S1 architectures) names."""
    return labels_in_spec(ctx.runs, "architecture", ctx.spec["S1_model"]["architectures"], "S1")


@check("S1.initial-weights", "S1", table="runs")
def initial_weights(ctx):
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
        return Outcome.failed("; ".join(problems), rows=int(missing.sum() + shared.sum()))
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


@check("S1.architecture-profile", "S1", table="blocks")
def architecture_profile(ctx):
    """A configuration whose time and GPU-power profile says it ran another architecture
    than its label. Within an ecosystem the contrast between the two architectures (log
    ratio of train time per sample and of train GPU power) is the same for every dataset;
    a dataset whose contrast departs from its ecosystem's by more than the tolerance points
    at the configuration that departs from its same-label siblings. An ecosystem whose
    contrast is reversed against the campaign's consensus is flagged whole (which of its
    labels is wrong cannot be told from the data)."""
    archs = list(ctx.spec["S1_model"]["architectures"])
    if len(archs) != 2:
        raise Skip("the profile check compares exactly two architectures")
    prof = config_profiles(ctx)
    if prof.empty:
        raise Skip("no train blocks to profile")
    tol = float(ctx.tolerances["architecture_profile_log_tolerance"])
    a0, a1 = archs
    flagged: dict[tuple, str] = {}
    contrasts = {}
    for (eco, ds), group in prof.groupby(level=["ecosystem", "dataset"]):
        by_arch = group.droplevel(["ecosystem", "dataset"])
        if a0 in by_arch.index and a1 in by_arch.index:
            contrasts[(eco, ds)] = by_arch.loc[a1] - by_arch.loc[a0]
    if not contrasts:
        raise Skip("no (ecosystem, dataset) ran both architectures: nothing to compare")
    contrast = pd.DataFrame(contrasts).T
    contrast.index.names = ["ecosystem", "dataset"]
    consensus = contrast.median()
    for eco, group in contrast.groupby(level="ecosystem"):
        eco_median = group.median()
        # the ecosystem against the campaign: a reversed contrast
        if contrast.index.get_level_values("ecosystem").nunique() >= 2:
            for feat in FEATURES:
                c = consensus[feat]
                if abs(c) >= tol / 2 and np.sign(c) * eco_median[feat] <= -tol / 2:
                    for ds in group.index.get_level_values("dataset"):
                        for arch in archs:
                            flagged.setdefault((eco, arch, ds), (
                                f"{eco}: {a1}/{a0} {FEATURES[feat]} ratio "
                                f"{np.exp(eco_median[feat]):.2f}, campaign {np.exp(c):.2f}"))
        # each dataset against its ecosystem
        if len(group) < 3:
            continue
        for (_, ds), row in group.iterrows():
            off = (row - eco_median).abs()
            if not (off > tol).any():
                continue
            feat = off.idxmax()
            worst, worst_dev = None, -1.0
            for arch in archs:
                siblings = prof.loc[eco].xs(arch, level="architecture").drop(index=ds)[feat]
                dev = abs(prof.loc[(eco, arch, ds), feat] - siblings.median())
                if dev > worst_dev:
                    worst, worst_dev = arch, dev
            other = a1 if worst == a0 else a0
            flagged.setdefault((eco, worst, ds), (
                f"{eco}/{worst}/{ds}: {FEATURES[feat]} x{np.exp(worst_dev):.2f} off its "
                f"{worst} siblings; {a1}/{a0} ratio {np.exp(row[feat]):.2f} against "
                f"{np.exp(eco_median[feat]):.2f} in {eco}'s other datasets (closer to {other})"))
    if not flagged:
        return Outcome.passed(f"{len(contrast)} (ecosystem, dataset) pairs: every "
                              f"{a1}/{a0} contrast agrees with its ecosystem and the campaign "
                              f"(time x{np.exp(consensus['time']):.2f}, GPU power "
                              f"x{np.exp(consensus['power']):.2f})")
    b = ctx.block_runs
    key = list(zip(b["ecosystem"], b["architecture"], b["dataset"]))
    rows = int(sum(k in flagged for k in key))
    messages = sorted(set(flagged.values()))
    return Outcome.failed(f"{len(flagged)} configuration(s) profile as another architecture: "
                          + "; ".join(messages), rows=rows,
                          details={"configurations": sorted("/".join(k) for k in flagged)})
