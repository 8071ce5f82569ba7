"""S2 optimisation, S3 data pipeline, S4 backend: the recipe every run actually used."""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit.context import AuditContext, labels_in_spec
from deepgreen_audit.columnar.evidence import describe_counts, evidence
from deepgreen_audit.columnar.frame import Frame, Groups, cell_text, lookup
from deepgreen_audit.spec import RECIPE_SECTIONS, declared_device, dl4j_backend, recipe
from deepgreen_audit.suite.registry import NotApplicable, Outcome, Skip, check


def _recipe_outcome(ctx, section: str) -> Outcome:
    """Runs whose recorded recipe cells of `section` differ from the spec or are empty."""
    runs = ctx.runs
    wanted = recipe(ctx.spec)
    rtol = float(ctx.tolerances.recipe_relative_tolerance)
    bad = np.zeros(len(runs), dtype=bool)
    contradicted = np.zeros(len(runs), dtype=bool)
    problems = []
    for col in RECIPE_SECTIONS[section]:
        values = runs[col]
        missing = runs.missing(col)
        if isinstance(wanted[col], float):
            differs = ~np.isclose(values.astype(float), wanted[col], rtol=rtol, atol=0) & ~missing
        else:
            differs = np.asarray(values != wanted[col], dtype=bool) & ~missing
        if missing.any():
            problems.append(f"{col} not recorded in {int(missing.sum())}")
        if differs.any():
            whole = col in runs.integer
            labels = [None if eco is None else f"{eco}: {cell_text(value, whole)}"
                      for eco, value in zip(runs["ecosystem"][differs], values[differs])]
            problems.append(f"{col} differs in {int(differs.sum())} ("
                            + describe_counts(labels) + f"; spec {wanted[col]})")
        bad |= missing | differs
        contradicted |= differs
    if bad.any():
        cols = ["run_id", "ecosystem", *RECIPE_SECTIONS[section]]
        return Outcome.failed("; ".join(problems), rows=int(bad.sum()),
                              details=evidence(runs.take(bad).select(cols)),
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
    recorded = ~b.missing("samples_processed")
    if not recorded.any():
        raise Skip("no block records samples_processed")
    s3 = ctx.spec["S3_data"]
    expected = np.where(b["phase"] == "train", lookup(b["dataset"], s3["train_samples"]),
                        lookup(b["dataset"], s3["eval_samples"]))
    # a smoke scope's batch limits cap what a block processes (its last batch may be short)
    scope = ctx.spec.get("scope") or {}
    for phase, limit_key, batch in (("train", "max_train_batches", ctx.spec["S2_optimisation"]["batch_size"]),
                                    ("eval", "max_eval_batches", s3["eval_batch_size"])):
        if scope.get(limit_key):
            limited = b["phase"] == phase
            expected = np.where(limited, np.minimum(expected, int(scope[limit_key]) * int(batch)),
                                expected)
    differs = recorded & ~np.isnan(expected) & (b["samples_processed"] != expected)
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
    missing = runs.missing("device")
    other = ~missing & np.asarray(recorded != wanted, dtype=bool)
    elsewhere = Groups(runs["ecosystem"][other], recorded[other])
    problems = [f"{eco}: {n} run(s) on {dev}, the campaign declares {wanted}"
                for eco, dev, n in zip(*elsewhere.keys, elsewhere.size)]
    if missing.any():
        problems.append(f"{int(missing.sum())} run(s) record no device ("
                        + describe_counts(runs["ecosystem"][missing]) + ")")
    bad = other | missing
    if bad.any():
        return Outcome.failed("; ".join(problems), rows=int(bad.sum()), details=evidence(
            runs.take(bad).select(["run_id", "ecosystem", "device", "device_name"])),
            unrecorded=int(missing.sum()))
    names = ["unnamed" if name is None else name for name in runs["device_name"]]
    return Outcome.passed(f"all {len(runs):,} runs placed their work on {wanted} "
                          f"({describe_counts(names)})")


@check("S4.pinned-versions", "S4", table="environment")
def pinned_versions(ctx: AuditContext) -> Outcome:
    """Every run used the pinned version of its framework (S4 pinned_versions).  A local
    version label (PEP 440 `+cu130`, the wheel's build variant) is kept in the record and not
    compared: the pin is the release."""
    env = ctx.environment
    pins = ctx.spec["S4_backend"].get("pinned_versions", {})
    framework, version = env["framework"], env["framework_version"]
    if env.missing("framework").all():
        raise Skip("no run records its framework")
    pinned = np.array([None if fw is None else pins.get(fw) for fw in framework], dtype=object)
    unknown = ~env.missing("framework") & np.array([pin is None for pin in pinned], dtype=bool)
    unrecorded = env.missing("framework") | env.missing("framework_version")
    differs = np.array([not (gone or unpinned) and str(v).split("+")[0] != pin
                        for gone, unpinned, v, pin in zip(unrecorded, unknown, version, pinned)],
                       dtype=bool)
    bad = unrecorded | unknown | differs
    if bad.any():
        parts = []
        if differs.any():
            parts.append(f"{int(differs.sum())} run(s) on unpinned versions ("
                         + describe_counts([f"{fw} {v}" for fw, v in
                                            zip(framework[differs], version[differs])]) + ")")
        if unknown.any():
            parts.append(f"{int(unknown.sum())} run(s) of frameworks without a pin ("
                         + describe_counts(framework[unknown]) + ")")
        if unrecorded.any():
            parts.append(f"{int(unrecorded.sum())} run(s) record no framework version")
        return Outcome.failed("; ".join(parts), rows=int(bad.sum()), details=evidence(
            env.take(bad).select(["run_id", "framework", "framework_version"])
            .assign(pinned=pinned[bad])),
            unrecorded=int((unrecorded & ~unknown).sum()))
    return Outcome.passed(f"all {len(env):,} runs used their framework's pinned version")


#: The ecosystem whose framework has a backend of its own per device (S4_backend.dl4j_backend).
DL4J = "java-dl4j"


def _left_join(run_ids: np.ndarray, table: Frame, column: str) -> Frame:
    """`run_ids` with `table`'s `column` of each (pandas' left merge on run_id: a run the table
    lacks once, with an empty cell; one it holds several times once per row, in its order)."""
    rows_of: dict[str, list[int]] = {}
    for i, run_id in enumerate(table["run_id"]):
        rows_of.setdefault(run_id, []).append(i)
    pairs = [(run_id, row) for run_id in run_ids for row in rows_of.get(run_id, [-1])]
    values = table[column]
    return Frame.of({"run_id": [run_id for run_id, _ in pairs],
                     column: [values[row] if row >= 0 else None for _, row in pairs]})


@check("S4.dl4j-backend", "S4", table="environment")
def dl4j_backend_of_device(ctx: AuditContext) -> Outcome:
    """Every Java/DL4J run loaded the ND4J backend the specification names for the declared
    device (S4_backend.dl4j_backend: nd4j-cuda on the GPU, nd4j-native on the CPU).  DL4J's
    backend is a build choice, not the host's: a CPU build on a GPU host trains on the CPU, a
    different treatment from the other stacks'.  The backend is what the run reported loading
    (environment.framework_backend); an empty cell fails (unverifiable)."""
    run_ids = ctx.runs["run_id"][ctx.runs["ecosystem"] == DL4J]
    if not len(run_ids):
        raise NotApplicable(f"no {DL4J} runs")
    device = declared_device(ctx.spec)
    wanted = dl4j_backend(device, ctx.spec)
    env = _left_join(run_ids, ctx.environment, "framework_backend")
    recorded = env["framework_backend"]
    unrecorded = env.missing("framework_backend")
    bad = unrecorded | np.asarray(recorded != wanted, dtype=bool)
    if bad.any():
        named = describe_counts(["not recorded" if v is None else v for v in recorded[bad]])
        return Outcome.failed(f"{int(bad.sum())} of {len(env):,} {DL4J} run(s) did not load {wanted}, the "
                              f"backend for the declared device {device} ({named})", rows=int(bad.sum()),
                              details=evidence(env.take(bad).assign(expected=wanted)),
                              unrecorded=int(unrecorded.sum()))
    return Outcome.passed(f"all {len(env):,} {DL4J} runs loaded {wanted} (declared device {device})")


#: Backends that can place work on the CPU only, as the stacks record them (environment.
#: framework_backend): torch's, TensorFlow's, LibTorch's and JAX's `cpu`, DL4J's nd4j-native.
CPU_ONLY_BACKENDS = ("cpu", "nd4j-native")
#: How the backends of a GPU build begin: torch's, TensorFlow's and LibTorch's `cuda-<version>`
#: (LibTorch's with `+cudnn-<version>`), JAX's platform `gpu`, DL4J's nd4j-cuda-<version>.
GPU_BACKEND_PREFIXES = ("cuda-", "gpu", "nd4j-cuda")


def backend_reach(backend: str | None) -> str | None:
    """Where a recorded backend can place work: "cpu" (a CPU-only build), "cuda" (a GPU build,
    which can also run on the CPU), None (empty, or a backend this check does not know)."""
    if backend is None:
        return None
    if backend in CPU_ONLY_BACKENDS or backend.startswith("nd4j-native"):
        return "cpu"
    return "cuda" if backend.startswith(GPU_BACKEND_PREFIXES) else None


def _backend_problem(backend: str | None, device: str | None, declared: str) -> str | None:
    """Why a run's recorded backend and device contradict each other or the declared device
    (None: they agree)."""
    reach = backend_reach(backend)
    if backend is None:
        return "no backend recorded"
    if reach is None:
        return f"a backend this check does not know ({backend})"
    if reach == "cpu" and device == "cuda":
        return "a CPU-only build, yet work on cuda"
    if reach == "cpu" and declared == "cuda":
        return "a CPU-only build in a cuda campaign"
    if reach == "cuda" and device == "cpu" and declared == "cuda":
        return "a GPU build that placed its work on the CPU in a cuda campaign"
    return None


@check("S4.backend-device", "S4", table="environment")
def backend_of_device(ctx: AuditContext) -> Outcome:
    """Every run's recorded framework backend (environment.framework_backend: the build it
    loaded, e.g. LibTorch's cuda-13.0+cudnn-9.20.0 or cpu) could place its work where the run
    says it did (runs.device) and where the campaign declares (S4_backend.device or the
    scope's).  A CPU-only build cannot have run on the GPU, and in a cuda campaign it measured
    another treatment; a GPU build on the CPU is a fallback in a cuda campaign but what a cpu
    campaign asks of it (PyPI's torch wheel is a CUDA build, which runs on a CPU host).  An
    empty backend fails (unverifiable: a LibTorch CPU build and a CUDA one look alike)."""
    declared = declared_device(ctx.spec)
    run_ids = ctx.runs["run_id"]
    env = _left_join(run_ids, ctx.environment, "framework_backend")
    device_of = dict(zip(ctx.runs["run_id"], ctx.runs["device"]))
    ecosystem_of = dict(zip(ctx.runs["run_id"], ctx.runs["ecosystem"]))
    devices = [device_of[run_id] for run_id in env["run_id"]]
    problems = [_backend_problem(b, d, declared) for b, d in zip(env["framework_backend"], devices)]
    bad = np.array([p is not None for p in problems], dtype=bool)
    if not bad.any():
        return Outcome.passed(f"all {len(env):,} runs recorded a backend that could place their work "
                              f"where they did and where the campaign declares ({declared}): "
                              + describe_counts(env["framework_backend"]))
    ecosystems = np.array([ecosystem_of[run_id] for run_id in env["run_id"]], dtype=object)
    found = np.array(problems, dtype=object)
    named = describe_counts([f"{why} ({eco})" for eco, why in zip(ecosystems[bad], found[bad])])
    unrecorded = env.missing("framework_backend")
    table = env.assign(ecosystem=ecosystems, device=np.array(devices, dtype=object),
                       declared_device=declared, problem=found).take(bad)
    return Outcome.failed(f"{int(bad.sum())} of {len(env):,} run(s): {named}", rows=int(bad.sum()),
                          details=evidence(table.select(["run_id", "ecosystem", "framework_backend", "device",
                                                         "declared_device", "problem"])),
                          unrecorded=int(unrecorded.sum()))
