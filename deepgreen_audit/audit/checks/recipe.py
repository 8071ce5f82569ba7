"""S2 optimisation, S3 data pipeline, S4 backend: the recipe every run actually used."""

from __future__ import annotations

import numpy as np
import pandas as pd

from deepgreen_audit.audit.context import AuditContext, describe_counts, evidence, labels_in_spec
from deepgreen_audit.registry import Outcome, Skip, check
from deepgreen_audit.spec import RECIPE_SECTIONS, declared_device, dl4j_backend, recipe


def _recipe_outcome(ctx, section: str) -> Outcome:
    """Runs whose recorded recipe cells of `section` differ from the spec or are empty."""
    runs = ctx.runs
    wanted = recipe(ctx.spec)
    rtol = float(ctx.tolerances["recipe_relative_tolerance"])
    bad = np.zeros(len(runs), dtype=bool)
    contradicted = np.zeros(len(runs), dtype=bool)
    problems = []
    for col in RECIPE_SECTIONS[section]:
        values = runs[col]
        missing = values.isna().to_numpy()
        if isinstance(wanted[col], float):
            differs = ~np.isclose(values.astype("Float64").to_numpy(dtype=float, na_value=np.nan),
                                  wanted[col], rtol=rtol, atol=0) & ~missing
        else:
            differs = (values.astype(object) != wanted[col]).to_numpy() & ~missing
        if missing.any():
            problems.append(f"{col} not recorded in {int(missing.sum())}")
        if differs.any():
            problems.append(f"{col} differs in {int(differs.sum())} ("
                            + describe_counts(runs.loc[differs, "ecosystem"] + ": "
                                              + values[differs].astype(str)) + f"; spec {wanted[col]})")
        bad |= missing | differs
        contradicted |= differs
    if bad.any():
        cols = ["run_id", "ecosystem", *RECIPE_SECTIONS[section]]
        return Outcome.failed("; ".join(problems), rows=int(bad.sum()),
                              details=evidence(runs.loc[bad, cols]),
                              unrecorded=int((bad & ~contradicted).sum()))
    used = ", ".join(f"{c}={wanted[c]}" for c in RECIPE_SECTIONS[section])
    return Outcome.passed(f"all {len(runs):,} runs used {used}")


@check("S2.recipe", "S2", table="runs")
def optimisation_recipe(ctx: AuditContext) -> Outcome:
    """Every run recorded the specified optimizer, learning rate, batch size, epochs,
    learning-rate schedule and weight decay (an empty cell is a failure: unverifiable)."""
    return _recipe_outcome(ctx, "S2_optimisation")


@check("S3.recipe", "S3", table="runs")
def data_recipe(ctx: AuditContext) -> Outcome:
    """Every run recorded the specified input resolution, scaling, normalisation, number of
    loader workers and evaluation batch size."""
    return _recipe_outcome(ctx, "S3_data")


@check("S3.datasets", "S3", table="runs")
def datasets(ctx: AuditContext) -> Outcome:
    """Every run's dataset is one the specification (S3 datasets) names."""
    return labels_in_spec(ctx.runs, "dataset", ctx.spec["S3_data"]["datasets"], "S3")


@check("S3.samples-processed", "S3", table="blocks")
def samples_processed(ctx: AuditContext) -> Outcome:
    """Every block processed the dataset's specified number of samples (train or eval split)."""
    b = ctx.block_runs
    recorded = b["samples_processed"].notna()
    if not recorded.any():
        raise Skip("no block records samples_processed")
    s3 = ctx.spec["S3_data"]
    expected = np.where(b["phase"] == "train", b["dataset"].map(s3["train_samples"]),
                        b["dataset"].map(s3["eval_samples"]))
    expected = pd.Series(expected, index=b.index, dtype="Float64")
    differs = recorded & expected.notna() & (b["samples_processed"].astype("Float64") != expected)
    missing = ~recorded
    bad = differs | missing
    if bad.any():
        return Outcome.failed(f"{int(differs.sum())} block(s) processed another number of "
                              f"samples than S3 says, {int(missing.sum())} record none",
                              rows=int(bad.sum()))
    return Outcome.passed(f"all {len(b):,} blocks processed their split's specified size")


@check("S4.precision-policy", "S4", table="runs")
def precision_policy(ctx: AuditContext) -> Outcome:
    """Every run recorded the specified numeric precision policy (one flag changed one
    stack's energy 3.14x)."""
    return _recipe_outcome(ctx, "S4_backend")


@check("S4.device", "S4", table="runs")
def device(ctx: AuditContext) -> Outcome:
    """Every run placed its work on the declared device (S4_backend.device, or the device the
    campaign's scope declares), as its framework reported it during the run: a stack that
    silently fell back to the CPU in a GPU campaign measured another experiment, and a run that
    recorded no device cannot show it did not."""
    runs = ctx.runs
    wanted = declared_device(ctx.spec)
    recorded = runs["device"]
    missing = recorded.isna().to_numpy()
    other = ~missing & (recorded.astype(object) != wanted).to_numpy()
    problems = [f"{eco}: {n} run(s) on {dev}, the campaign declares {wanted}"
                for (eco, dev), n in runs[other].groupby(["ecosystem", "device"]).size().items()]
    if missing.any():
        problems.append(f"{int(missing.sum())} run(s) record no device ("
                        + describe_counts(runs.loc[missing, "ecosystem"]) + ")")
    bad = other | missing
    if bad.any():
        return Outcome.failed("; ".join(problems), rows=int(bad.sum()), details=evidence(
            runs.loc[bad, ["run_id", "ecosystem", "device", "device_name"]]),
            unrecorded=int(missing.sum()))
    return Outcome.passed(f"all {len(runs):,} runs placed their work on {wanted} "
                          f"({describe_counts(runs['device_name'].fillna('unnamed'))})")


@check("S4.pinned-versions", "S4", table="environment")
def pinned_versions(ctx: AuditContext) -> Outcome:
    """Every run used the pinned version of its framework (S4 pinned_versions).  A local
    version label (PEP 440 `+cu130`, the wheel's build variant) is kept in the record and not
    compared: the pin is the release."""
    env = ctx.environment
    pins = ctx.spec["S4_backend"].get("pinned_versions", {})
    if env["framework"].isna().all():
        raise Skip("no run records its framework")
    pinned = env["framework"].map(pins)
    unknown = env["framework"].notna() & pinned.isna()
    missing = env["framework"].isna() | env["framework_version"].isna()
    release = env["framework_version"].astype("string").str.split("+").str[0]
    differs = ~missing & ~unknown & (release != pinned)
    bad = missing | unknown | differs
    if bad.any():
        parts = []
        if differs.any():
            parts.append(f"{int(differs.sum())} run(s) on unpinned versions ("
                         + describe_counts(env.loc[differs, "framework"] + " "
                                           + env.loc[differs, "framework_version"]) + ")")
        if unknown.any():
            parts.append(f"{int(unknown.sum())} run(s) of frameworks without a pin ("
                         + describe_counts(env.loc[unknown, "framework"]) + ")")
        if missing.any():
            parts.append(f"{int(missing.sum())} run(s) record no framework version")
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()), details=evidence(
            env.loc[bad, ["run_id", "framework", "framework_version"]].assign(pinned=pinned[bad])),
            unrecorded=int((missing & ~unknown).sum()))
    return Outcome.passed(f"all {len(env):,} runs used their framework's pinned version")


#: The ecosystem whose framework has a backend of its own per device (S4_backend.dl4j_backend).
DL4J = "java-dl4j"


@check("S4.dl4j-backend", "S4", table="environment")
def dl4j_backend_of_device(ctx: AuditContext) -> Outcome:
    """Every Java/DL4J run loaded the ND4J backend the specification names for the declared
    device (S4_backend.dl4j_backend: nd4j-cuda on the GPU, nd4j-native on the CPU).  DL4J's
    backend is a build choice, not the host's: a CPU build on a GPU host trains on the CPU, a
    different treatment from the other stacks'.  The backend is what the run reported loading
    (environment.framework_backend); an empty cell fails (unverifiable)."""
    runs = ctx.runs.loc[ctx.runs["ecosystem"] == DL4J, ["run_id"]]
    if runs.empty:
        raise Skip(f"no {DL4J} runs")
    device = declared_device(ctx.spec)
    wanted = dl4j_backend(device, ctx.spec)
    env = runs.merge(ctx.environment[["run_id", "framework_backend"]], on="run_id", how="left")
    recorded = env["framework_backend"]
    bad = recorded.isna() | (recorded.astype(object) != wanted)
    if bad.any():
        named = describe_counts(recorded[bad].astype(object).fillna("not recorded"))
        return Outcome.failed(f"{int(bad.sum())} of {len(env):,} {DL4J} run(s) did not load {wanted}, the "
                              f"backend for the declared device {device} ({named})", rows=int(bad.sum()),
                              details=evidence(env.loc[bad].assign(expected=wanted)),
                              unrecorded=int(recorded.isna().sum()))
    return Outcome.passed(f"all {len(env):,} {DL4J} runs loaded {wanted} (declared device {device})")
