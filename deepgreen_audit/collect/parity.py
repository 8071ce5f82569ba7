"""Parity of the stacks: same model, same initial state, same pixels, same recipe.

Each check is a small function with an id, a specification section and a
docstring (the suite `parity` of the check registry), run by one driver, `run_parity`,
over the probes of every stack.  A probe is what a stack's own code does with
the canonical weights and one fixed batch (the first `count` test images of
the canonical store): its loader's input tensor, its logits and loss in eval
and in train mode (dropout off: each framework draws its own masks), its state
after the train-mode pass (BatchNorm running statistics), and the hashes it
computed.  The Python stacks are probed in this process through their
`probe`/`eval_batches` hooks; the C++ stack through its executable's `probe`
mode, and likewise the Rust and Java stacks (`deepgreen_audit.stacks.native`).  The
reference (the specification's `[parity] reference`) is the Python/PyTorch stack
(the canonical layout).

The float32 tolerances are the specification's `[parity]` section (`tolerances`):
a logit difference <= abs + rel * max|reference logit|, a loss difference
<= rel * max(1, |reference loss|), a running statistic <= abs + rel *
max|reference|; the two stacks that run the same TorchScript module on the same LibTorch
(C++ and Rust, with the Python/PyTorch stack the control group) must agree with each
other exactly (`S6.control-group`).  A BatchNorm epsilon of 1e-3 instead of 1e-5, Keras' or Flax'
momentum, or a biased running variance each exceed them; weights and pixels
must be equal exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepgreen_audit.report import Report
from deepgreen_audit.resources import require_checkout, shipped_root
from deepgreen_audit.spec import load_spec, trainable_parameters
from deepgreen_audit.stacks import data, weights
from deepgreen_audit.stacks.sources import recipe_literals, spec_owned_numbers
from deepgreen_audit.suite.registry import Check, CheckFunc, Outcome, check, registered_checks, run_check

PYTHON_STACKS = {"python-pytorch": "stacks/python_pytorch/train.py",
                 "python-tensorflow": "stacks/python_tensorflow/train.py",
                 "python-jax": "stacks/python_jax/train.py"}
#: Built stacks probed through their executable's `probe` mode (one command line for all).
EXTERNAL_STACKS = ("cpp-libtorch", "rust-tch", "java-dl4j")
STACKS = (*PYTHON_STACKS, *EXTERNAL_STACKS)
#: The stacks that run the same TorchScript module (the specification's LibTorch control group).
TORCHSCRIPT_STACKS = ("cpp-libtorch", "rust-tch")



def reference_stack(spec: dict | None = None) -> str:
    """The stack every other is compared with: the specification's [parity] reference."""
    return (spec or load_spec())["parity"]["reference"]


def tolerances(spec: dict | None = None) -> dict:
    """The specification's [parity] tolerances, grouped by what they bound (as reports print them)."""
    p = (spec or load_spec())["parity"]
    return {
        "logits": {"atol": p["logits_abs_tolerance"], "rtol_of_max": p["logits_rel_tolerance_of_max"]},
        "loss": {"rtol_of_max_1": p["loss_rel_tolerance_of_max_1"]},
        "running_stats": {"atol": p["running_stats_abs_tolerance"],
                          "rtol_of_max": p["running_stats_rel_tolerance_of_max"]},
        **dict.fromkeys(p["exact"], "exact"),
    }


# ---------------------------------------------------------------- probes


@dataclass
class Probe:
    """What one stack's code did with the canonical weights and the fixed batch."""

    stack: str
    inputs: np.ndarray                # NHWC float32, as its loader produced them
    labels: np.ndarray
    logits: dict                      # mode -> logits
    loss: dict                        # mode -> float
    state: dict                       # canonical name -> array (PyTorch layout), after the eval pass
    state_after_train: dict           # ... after the train-mode pass
    weights_sha256: str
    data_fingerprint: str


def load_program(stack: str):
    """Import a Python stack program from its file, as the collection runner does."""
    from deepgreen_audit.collect.plan import Stack
    from deepgreen_audit.collect.runner import load_stack_module

    program = require_checkout("running the stacks") / PYTHON_STACKS[stack]
    return load_stack_module(Stack(stack, "python", program=program))


def _numpy(batch) -> np.ndarray:
    return np.asarray(batch.numpy() if hasattr(batch, "numpy") else batch, dtype=np.float32)


def probe_python(stack: str, export: weights.Export, store: data.Store, count: int) -> Probe:
    program = load_program(stack)
    tensors, sha = weights.load(export.path)
    manifest = json.loads(export.manifest_path.read_text(encoding="utf-8"))
    arch, classes = manifest["architecture"], manifest["classes"]
    x, y = store.x_test[:count], store.y_test[:count]
    first = next(iter(program.eval_batches(store.x_test, store.y_test, count)))
    inputs = _numpy(first[0])
    if getattr(program, "INPUT_LAYOUT", "NHWC") == "NCHW":
        inputs = inputs.transpose(0, 2, 3, 1)
    runs = {mode: program.probe(arch, classes, tensors, x, y, train=(mode == "train"))
            for mode in ("eval", "train")}
    labels = first[1].numpy() if hasattr(first[1], "numpy") else first[1]
    return Probe(stack, inputs, np.asarray(labels, dtype=np.int64),
                 {m: np.asarray(r["logits"]) for m, r in runs.items()},
                 {m: float(r["loss"]) for m, r in runs.items()},
                 runs["eval"]["state"], runs["train"]["state"], sha, store.fingerprint)


def probe_external(stack: str, executable: Path, export: weights.Export, data_dir: Path, dataset: str,
                   count: int) -> Probe:
    """Run a built stack's `probe` mode on the same files and read back what it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.safetensors"
        result = subprocess.run([str(executable), "probe", "--model", str(export.torchscript_path),
                                 "--weights", str(export.path), "--data", str(data_dir), "--dataset", dataset,
                                 "--count", str(count), "--out", str(out)], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{executable} probe failed: {result.stderr.strip()[-1000:]}")
        if not out.is_file():
            raise RuntimeError(f"{executable} probe exited 0 without writing {out.name}")
        arrays, meta = weights.read_safetensors(out.read_bytes(), out)

    def prefixed(prefix):
        return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}

    return Probe(stack, arrays["input"].transpose(0, 2, 3, 1), arrays["labels"].astype(np.int64),
                 {"eval": arrays["eval.logits"], "train": arrays["train.logits"]},
                 {"eval": float(arrays["eval.loss"][0]), "train": float(arrays["train.loss"][0])},
                 prefixed("loaded."), prefixed("state."), meta["weights_sha256"], meta["data_fingerprint_sha256"])


# ---------------------------------------------------------------- checks


SUITE = "parity"


def parity_checks() -> list[Check[object]]:
    """The checks of the suite `parity`, all of them in this module, in definition order: each
    reads one stack's probes (a `Context`), but the recipe literals' check the stacks' sources
    (a folder)."""
    return registered_checks(SUITE, (sys.modules[__name__],), object)


def parity_check(id: str, section: str) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check of the parity suite; it runs once per probed stack."""
    return check(id, section, suite=SUITE)


def _outcome(ok: bool, message: str, measured: float | None, tolerance: float | None) -> Outcome:
    """A parity outcome, with the largest difference measured and the tolerance it met or not."""
    return Outcome(bool(ok), message, details={"measured": measured, "tolerance": tolerance})


@dataclass
class Context:
    architecture: str
    classes: int
    canonical: dict
    canonical_sha256: str
    fingerprint: str
    reference: Probe
    probe: Probe
    torchscript_peers: dict          # the other probed stacks that run the same TorchScript module
    tolerances: dict                 # `tolerances()`: the specification's, read once per run


def _max_abs(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


@parity_check("S1.parameter-names", "S1")
def parameter_names(ctx: Context) -> Outcome:
    """The same tensor names and shapes as the canonical export, and the specification's
    trainable-parameter count."""
    names = set(ctx.probe.state)
    if names != set(ctx.canonical):
        return _outcome(False, f"names differ: missing {sorted(set(ctx.canonical) - names)[:3]}, "
                               f"extra {sorted(names - set(ctx.canonical))[:3]}", None, None)
    wrong = [k for k in names if tuple(np.shape(ctx.probe.state[k])) != tuple(ctx.canonical[k].shape)]
    if wrong:
        return _outcome(False, f"{len(wrong)} shape(s) differ, first {wrong[0]}", None, None)
    count = sum(int(np.size(v)) for k, v in ctx.probe.state.items()
                if not k.endswith(("running_mean", "running_var")))
    want = trainable_parameters(ctx.architecture, ctx.classes)
    return _outcome(count == want, f"{len(names)} tensors, {count:,} trainable parameters (spec {want:,})",
                    count, want)


@parity_check("S1.initial-weights", "S1")
def initial_weights(ctx: Context) -> Outcome:
    """The model holds the canonical initial weights exactly (a stack that re-initialises,
    or transposes a kernel wrongly, fails here), and reports the export's SHA-256."""
    diff = max((_max_abs(ctx.probe.state[k], v) for k, v in ctx.canonical.items() if k in ctx.probe.state),
               default=float("inf"))
    same_hash = ctx.probe.weights_sha256 == ctx.canonical_sha256
    return _outcome(diff == 0.0 and same_hash, f"largest weight difference {diff:.3g}; export hash "
                                               f"{'matches' if same_hash else 'differs'}", diff, 0.0)


def _compare_logits(ctx: Context, mode: str):
    ref, got = ctx.reference.logits[mode], ctx.probe.logits[mode]
    logits, loss = ctx.tolerances["logits"], ctx.tolerances["loss"]
    tol = logits["atol"] + logits["rtol_of_max"] * float(np.max(np.abs(ref)))
    diff = _max_abs(ref, got)
    loss_tol = loss["rtol_of_max_1"] * max(1.0, abs(ctx.reference.loss[mode]))
    loss_diff = abs(ctx.reference.loss[mode] - ctx.probe.loss[mode])
    return _outcome(diff <= tol and loss_diff <= loss_tol,
                    f"{mode} logits differ by {diff:.3g} (tolerance {tol:.3g}), loss by {loss_diff:.3g} "
                    f"(tolerance {loss_tol:.3g})", diff, tol)


@parity_check("S1.logits-eval", "S1")
def logits_eval(ctx: Context) -> Outcome:
    """Eval-mode logits and loss on the fixed batch equal the reference's within the stated
    float32 tolerance."""
    return _compare_logits(ctx, "eval")


@parity_check("S1.logits-train", "S1")
def logits_train(ctx: Context) -> Outcome:
    """Train-mode logits and loss (batch statistics, dropout off) equal the reference's within
    the stated float32 tolerance."""
    return _compare_logits(ctx, "train")


@parity_check("S1.batchnorm-statistics", "S1")
def batchnorm_statistics(ctx: Context) -> Outcome:
    """After one train-mode pass the BatchNorm running statistics equal the reference's
    (PyTorch momentum 0.1, unbiased running variance)."""
    names = [k for k in ctx.reference.state_after_train if k.endswith(("running_mean", "running_var"))]
    if not names:
        return _outcome(True, "no BatchNorm in this architecture", 0.0, 0.0)
    rows, bound = [], ctx.tolerances["running_stats"]
    for k in names:
        ref = ctx.reference.state_after_train[k]
        tol = bound["atol"] + bound["rtol_of_max"] * float(np.max(np.abs(ref)))
        rows.append((_max_abs(ref, ctx.probe.state_after_train.get(k, np.full_like(ref, np.inf))), tol, k))
    diff, tol, name = max(rows, key=lambda row: row[0] / row[1])
    return _outcome(diff <= tol, f"largest difference {diff:.3g} at {name} (tolerance {tol:.3g})", diff, tol)


@parity_check("S3.pixels", "S3")
def pixels(ctx: Context) -> Outcome:
    """The stack's evaluation loader yields exactly the reference's inputs (uint8 / 255,
    no normalisation) and labels for the same indices, and the store's fingerprint."""
    diff = _max_abs(ctx.reference.inputs, ctx.probe.inputs)
    labels = np.array_equal(ctx.reference.labels, ctx.probe.labels)
    fingerprint = ctx.probe.data_fingerprint == ctx.fingerprint
    return _outcome(diff == 0.0 and labels and fingerprint,
                    f"largest pixel difference {diff:.3g}; labels {'equal' if labels else 'differ'}; "
                    f"fingerprint {'matches' if fingerprint else 'differs: ' + ctx.probe.data_fingerprint[:12]}",
                    diff, 0.0)


@parity_check("S6.control-group", "S6")
def control_group(ctx: Context) -> Outcome:
    """The stacks that load the same TorchScript module on the same LibTorch (C++ and Rust)
    compute the same thing exactly: logits, losses and state after both passes are equal to
    the bit.  A difference means one of them does something the module does not (its own
    input pipeline, weight copy, mode switching or precision policy)."""
    if ctx.probe.stack not in TORCHSCRIPT_STACKS:
        return _outcome(True, "not a TorchScript stack (compared with the reference only)", None, None)
    if not ctx.torchscript_peers:
        return _outcome(True, "no other TorchScript stack probed", None, None)
    rows = []
    for peer, other in ctx.torchscript_peers.items():
        diffs = [_max_abs(ctx.probe.logits[m], other.logits[m]) for m in ("eval", "train")]
        diffs += [abs(ctx.probe.loss[m] - other.loss[m]) for m in ("eval", "train")]
        diffs += [_max_abs(v, other.state_after_train.get(k, np.full_like(v, np.inf)))
                  for k, v in ctx.probe.state_after_train.items()]
        diffs.append(_max_abs(ctx.probe.inputs, other.inputs))
        rows.append((max(diffs), peer))
    diff, peer = max(rows)
    return _outcome(diff == 0.0, f"largest difference from {peer} {diff:.3g} (logits, losses, state, inputs)",
                    diff, 0.0)


# ---------------------------------------------------------------- recipe parity (sources)


#: The check that reads the stacks' sources once, not a probe per stack.
RECIPE_CHECK = "S2.recipe-literals"


@parity_check(RECIPE_CHECK, "S2")
def recipe_literals_check(source_root: Path) -> Outcome:
    """No stack source writes down a number the specification owns (the recipe's learning
    rate, batch size, epochs, ...): each stack reads them from the specification."""
    hits = recipe_literals(source_root)
    return _outcome(not hits, "; ".join(
        f"{p.relative_to(shipped_root()) if p.is_relative_to(shipped_root()) else p}:{n} writes "
        f"{lit} ({key} belongs to the specification)" for p, n, lit, key in hits[:5])
        or f"no stack source writes a specification value ({', '.join(spec_owned_numbers())})",
        float(len(hits)), 0.0)


# ---------------------------------------------------------------- the driver


def default_executables() -> dict[str, Path]:
    """The built stacks' executables, where the build's product exists."""
    from deepgreen_audit.stacks import native

    return {eco: stack.executable for eco, stack in native.NATIVE_STACKS.items() if stack.product_path.is_file()}


def run_parity(architecture: str, data_dir: Path, dataset: str = "digits", seed: int = 0, count: int = 16,
               stacks: tuple[str, ...] = STACKS, executables: dict[str, Path] | None = None,
               source_root: Path | None = None) -> Report:
    """Probe every stack and run every check; a stack that cannot be probed is a skip, never a pass.
    `executables` maps built stacks to the program to probe (default: what `deepgreen build` made)."""
    executables = default_executables() if executables is None else executables
    classes = int(load_spec()["S3_data"]["classes"][dataset])
    if dataset == "digits" and not (Path(data_dir) / dataset / "manifest.json").is_file():
        data.convert_digits(data_dir)          # the built stacks read the store from disk
    store = data.load_store(data_dir, dataset)
    export = weights.export(weights.weights_dir(data_dir), architecture, classes, seed,
                            torchscript=any(s in TORCHSCRIPT_STACKS for s in stacks))
    canonical, sha = weights.load(export.path)
    reference_name, bounds = reference_stack(), tolerances()
    report = Report(architecture, SUITE, notes=[
        f"{architecture} ({classes} classes, seed {seed}) on {count} {dataset} test images; "
        f"reference {reference_name}; tolerances {json.dumps(bounds)}"], stats={
        "architecture": architecture, "classes": classes, "seed": seed, "dataset": dataset,
        "count": count, "reference": reference_name, "tolerances": bounds})
    probes, missing = {}, {}
    for stack in dict.fromkeys((reference_name, *stacks)):
        try:
            if stack in EXTERNAL_STACKS:
                executable = executables.get(stack)
                if executable is None or not Path(executable).is_file():
                    raise FileNotFoundError(f"the {stack} stack is not built ({executable or 'no executable'}; "
                                            f"'deepgreen build {stack}' builds it)")
                probes[stack] = probe_external(stack, Path(executable), export, data_dir, dataset, count)
            else:
                probes[stack] = probe_python(stack, export, store, count)
        except (FileNotFoundError, ImportError) as exc:      # not built or not installed here: a skip
            missing[stack] = ("skip", f"{type(exc).__name__}: {exc}")
        except Exception as exc:                              # the stack's own code broke: a failure
            missing[stack] = ("fail", f"the probe raised {type(exc).__name__}: {exc}")
    reference = probes.get(reference_name)
    checks = parity_checks()
    for stack in stacks:
        for chk in checks:
            if chk.id == RECIPE_CHECK:
                continue
            if stack not in probes or reference is None:
                status, why = missing.get(stack) or missing[reference_name]
                report.findings.append(chk.finding(
                    status, why if stack in missing else f"reference {reference_name}: {why}", resource=stack))
                continue
            ctx = Context(architecture, classes, canonical, sha, store.fingerprint, reference, probes[stack],
                          {k: v for k, v in probes.items() if k in TORCHSCRIPT_STACKS and k != stack},
                          bounds)
            report.findings.append(run_check(chk, ctx, resource=stack))
    recipe_check = next(c for c in checks if c.id == RECIPE_CHECK)
    report.findings.append(run_check(recipe_check, source_root, resource="all"))
    return report
