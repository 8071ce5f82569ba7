"""What the Python stack programs share around their framework code.

A stack program (stacks/python_*/train.py) is run by the collection runner:
`check(job)`, then `run(harness, job)`, with `sync()` called before every
counter read.  The pieces here carry no framework: the recipe guard, the
run's inputs (the canonical store and the canonical weights, both hashed),
what a run reports to the harness (the device its framework placed the work
on among it: `DeviceReport`), batch limits and a bounded prefetcher.

Every stack also defines ``device()``: where its framework places the work once
``set_precision_policy()`` has run, as a `DeviceReport` the run reports and
preflight asks for before the first run (`deepgreen_audit.collect.device_probe`).

Every stack also defines the two hooks the parity checks call on the stack's
own code (`deepgreen_audit.collect.parity`):

* ``eval_batches(x_uint8, y, batch_size)``: its evaluation loader, yielding
  (inputs, labels) as its model receives them;
* ``probe(architecture, classes, tensors, x_uint8, y, train)``: load the
  canonical tensors into its model, run one forward pass (train or eval mode;
  in train mode dropout is off, as each framework draws its own masks) and
  return ``{"logits", "loss", "state"}`` with the state (after the pass) under
  the canonical names in PyTorch layout.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np

from deepgreen_audit.errors import UserError
from deepgreen_audit.spec import load_spec
from deepgreen_audit.stacks import data, weights

#: Recipe values whose meaning a stack implements in code (the numbers it reads from the job).
IMPLEMENTED = {"optimizer": "adam", "lr_schedule": "none", "input_scaling": "unit-interval",
               "input_normalisation": "none"}


def check_recipe(recipe: dict) -> None:
    """Refuse a recipe this code does not implement (rather than train something else)."""
    wrong = {k: recipe.get(k) for k, v in IMPLEMENTED.items() if recipe.get(k) != v}
    if recipe.get("precision_policy") != load_spec()["S4_backend"]["precision_policy"]:
        wrong["precision_policy"] = recipe.get("precision_policy")
    if wrong:
        raise RuntimeError(f"the stacks implement {IMPLEMENTED} and the specification's precision "
                           f"policy only; the job asks for {wrong}")


def check_job(job, architectures) -> None:
    """What every Python stack checks before its run: architecture, recipe, data present."""
    if job.architecture not in architectures:
        raise RuntimeError(f"architecture {job.architecture!r} is not implemented "
                           f"(has: {', '.join(architectures)})")
    check_recipe(job.recipe)
    if job.dataset != "digits" and not (Path(job.data_dir) / job.dataset / "manifest.json").is_file():
        raise UserError(f"the {job.dataset} store is missing; convert it with 'deepgreen data convert "
                        f"{job.dataset} ...'", path=Path(job.data_dir) / job.dataset, code="missing-input")


@dataclass(frozen=True)
class RunInputs:
    store: data.Store
    tensors: dict            # canonical tensors, PyTorch layout
    weights_sha256: str


def run_inputs(job) -> RunInputs:
    """The run's pixels and its canonical initial weights (written on first use)."""
    store = data.ensure_store(job.data_dir, job.dataset)
    tensors, sha = weights.ensure(job.data_dir, job.architecture, job.classes, job.seed,
                                  job.initialiser)
    return RunInputs(store, tensors, sha)


class DeviceReportError(ValueError):
    """A stack's device report that cannot be read (a missing key, a device outside the schema's)."""


@dataclass(frozen=True)
class DeviceReport:
    """Where a framework placed (or would place) a run's work, as the framework itself says:
    the runs columns device, device_name, cudnn_enabled, tf32_enabled.  Asked of the framework
    rather than assumed from the plan, because TensorFlow or JAX can fall back to the CPU on a
    GPU host without an error."""

    device: str
    device_name: str
    cudnn_enabled: bool
    tf32_enabled: bool

    def __post_init__(self):
        from deepgreen_audit.package.schema import load_schema

        devices = load_schema("runs").field("device").allowed
        if self.device not in devices:
            raise DeviceReportError(f"device {self.device!r} is not one of {', '.join(devices)}")
        if not isinstance(self.device_name, str) or not self.device_name.strip():
            raise DeviceReportError("the device report names no device (empty device_name)")
        for key in ("cudnn_enabled", "tf32_enabled"):
            if not isinstance(getattr(self, key), bool):
                raise DeviceReportError(f"{key}={getattr(self, key)!r} is not true or false")

    def values(self) -> dict:
        """The four runs columns, as `harness.report` takes them."""
        return asdict(self)

    def line(self) -> str:
        """The one line a built stack's `device` subcommand prints (values percent-encoded, as
        in the line protocol; booleans true/false)."""
        return " ".join(f"{k}={quote(str(v).lower() if isinstance(v, bool) else v, safe='')}"
                        for k, v in self.values().items())

    @classmethod
    def parse_line(cls, line: str) -> DeviceReport:
        """The report a built stack's `device` subcommand printed; DeviceReportError if bad."""
        pairs = dict(token.partition("=")[::2] for token in line.split())
        fields = tuple(cls.__dataclass_fields__)
        missing = [k for k in fields if k not in pairs]
        if missing:
            raise DeviceReportError(f"the device line {line.strip()[:200]!r} lacks {', '.join(missing)}")
        flags = {}
        for key in ("cudnn_enabled", "tf32_enabled"):
            if pairs[key] not in ("true", "false"):
                raise DeviceReportError(f"{key}={pairs[key]!r} is not true or false")
            flags[key] = pairs[key] == "true"
        return cls(unquote(pairs["device"]), unquote(pairs["device_name"]), **flags)


def report(harness, job, inputs: RunInputs, device: DeviceReport, **environment) -> None:
    """Tell the harness what the run actually used, the device its framework placed it on too."""
    r = job.recipe
    harness.report(**{k: r[k] for k in ("optimizer", "learning_rate", "batch_size", "lr_schedule",
                                        "weight_decay", "input_scaling", "input_normalisation",
                                        "loader_workers", "eval_batch_size", "precision_policy")},
                   input_resolution_px=inputs.store.side_px,
                   initial_weights_sha256=inputs.weights_sha256,
                   data_fingerprint_sha256=inputs.store.fingerprint, **device.values(), **environment)


class PhaseTally:
    """One block's metrics, computed the same way in every stack.

    `add` takes a batch's size, its mean loss and (eval) its correct
    predictions; `report` writes samples processed, the sample-weighted mean
    loss and, for eval blocks, the accuracy onto the harness block.
    """

    def __init__(self) -> None:
        self.seen, self.loss_sum, self.correct = 0, 0.0, 0

    def add(self, batch_size: int, mean_loss: float, correct: int = 0) -> None:
        self.seen += batch_size
        self.loss_sum += mean_loss * batch_size
        self.correct += correct

    def report(self, block, accuracy: bool = False) -> None:
        block.samples_processed, block.loss = self.seen, self.loss_sum / self.seen
        if accuracy:
            block.test_accuracy = self.correct / self.seen


def limited(batches, limit: int | None):
    """At most `limit` batches (the plan's smoke-run limits); all when None."""
    for i, batch in enumerate(batches):
        if limit is not None and i >= limit:
            return
        yield batch


def batch_indices(n: int, batch_size: int, order: np.ndarray | None = None):
    order = np.arange(n) if order is None else order
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def prefetch(fn, items, workers: int):
    """fn(item) for each item, computed by `workers` threads at most 2 * workers ahead, in order."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > 2 * max(1, workers):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
