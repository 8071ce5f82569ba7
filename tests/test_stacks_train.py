"""The six stacks train under the harness on the digits smoke data; their run directories
flatten and validate.  Kept to one train batch and one eval batch per run (each run is its own
process and pays its framework's import and compilation); ResNet-18 always, VGG-16 on request.
The built stacks (C++, Rust, Java) are built by the set-up (`deepgreen build`); an unbuilt one
fails here, naming the command that builds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.package.checksums import sha256_file
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.package.validate import validate
from deepgreen_audit.spec import load_spec
from deepgreen_audit.stacks import data, native, weights

STACKS = ("python-pytorch", "python-tensorflow", "python-jax", "cpp-libtorch", "rust-tch", "java-dl4j")
HEAVY = os.environ.get("DEEPGREEN_HEAVY_STACK_TESTS") == "1"


def require_built(ecosystems) -> None:
    for eco in ecosystems:
        stack = native.NATIVE_STACKS.get(eco)
        if stack is not None and (not stack.product_path.is_file() or stack.stale_inputs()):
            pytest.fail(f"{eco} is not built or out of date: {stack.fix()}")


def collect_and_flatten(tmp: Path, architectures: list[str], limits: dict):
    require_built(STACKS)
    plan = load_plan(write_scoped_plan(tmp / "plan.toml", "stacks", tmp / "data", {
        "ecosystems": list(STACKS), "architectures": architectures, "datasets": ["digits"],
        "repetitions": 1, "epochs": 1, "device": "cpu", **limits}))
    prepare_plan(plan)
    summary = collect(plan, tmp / "out", allow_missing_counters=True)
    assert summary.ok, summary.failed
    flatten(summary.runs_dir, tmp / "pkg")
    report = validate(tmp / "pkg")
    assert report.valid, report.format_text()
    return plan, Package.open(tmp / "pkg")


def check_runs(plan, package, architectures):
    runs = {r["run_id"]: r for r in package.table("runs").to_pylist()}
    env = {r["run_id"]: r for r in package.table("environment").to_pylist()}
    blocks = package.table("blocks").to_pylist()
    assert len(runs) == len(STACKS) * len(architectures) and len(blocks) == 2 * len(runs)
    store = data.load_store(plan.jobs[0].data_dir, "digits")
    frameworks, pins = load_spec()["S4_backend"]["frameworks"], load_spec()["S4_backend"]["pinned_versions"]
    for job in plan.jobs:
        run, environment = runs[job.run_id], env[job.run_id]
        assert run["status"] == "completed" and run["missing_reason"] is None, run
        assert run["data_fingerprint_sha256"] == store.fingerprint          # the same pixels everywhere
        export = weights.Export.at(weights.weights_dir(job.data_dir), job.architecture, job.classes, job.seed)
        assert run["initial_weights_sha256"] == sha256_file(export.path)
        assert run["learning_rate"] == job.recipe["learning_rate"] and run["batch_size"] == job.recipe["batch_size"]
        assert environment["framework"] == frameworks[job.ecosystem]
        release = environment["framework_version"].split("+")[0]          # torch: 2.13.0+cu130
        assert release == pins[frameworks[job.ecosystem]]                    # S4 holds on this install
        assert environment["cudnn_available"] is not None
        # every stack says where its framework placed the work: this host has no GPU
        assert (run["device"], run["cudnn_enabled"], run["tf32_enabled"]) == ("cpu", False, False), run
        assert run["device_name"]
    assert all(e["cudnn_available"] is False for e in env.values() if e["framework"] == "dl4j")
    # the backend each framework loaded: DL4J's is the one its build holds (nd4j-native on a CPU host)
    backends = {e["framework"]: e["framework_backend"] for e in env.values()}
    assert backends["dl4j"] == native.built_backend(native.NATIVE_STACKS["java-dl4j"])
    assert all(backends[f] for f in ("torch", "tensorflow", "jax")), backends
    # LibTorch's build, as the C++ and Rust stacks loaded it: the torch wheel's (issue 40)
    assert backends["libtorch"] == backends["tch"] == wheel_libtorch_backend(), backends
    finding = audit(package.base, select=["S4.backend-device"]).finding("S4.backend-device")
    assert finding.status == "pass", finding.message
    for b in blocks:
        assert b["samples_processed"] > 0 and b["loss"] > 0 and b["duration_s"] > 0
        assert (b["test_accuracy"] is not None) == (b["phase"] == "eval")


def wheel_libtorch_backend() -> str:
    """The installed torch wheel's build in the stacks' form: cpu, or cuda-<version> with
    +cudnn-<major>.<minor>.<patch> (cuDNN 9 numbers its versions 10000 major + 100 minor + patch)."""
    import torch

    if not torch.version.cuda:
        return "cpu"
    cudnn = torch.backends.cudnn.version()
    if not cudnn:
        return f"cuda-{torch.version.cuda}"
    unit = 10000 if cudnn >= 90000 else 1000
    return f"cuda-{torch.version.cuda}+cudnn-{cudnn // unit}.{cudnn % unit // 100}.{cudnn % 100}"


def test_six_stacks_train_resnet18_under_the_harness(tmp_path):
    plan, package = collect_and_flatten(tmp_path, ["resnet18"], {"max_train_batches": 1, "max_eval_batches": 1})
    check_runs(plan, package, ["resnet18"])


@pytest.mark.skipif(not HEAVY, reason="VGG-16 (134 M parameters) in six processes takes many minutes on "
                                      "2 cores; set DEEPGREEN_HEAVY_STACK_TESTS=1")
def test_six_stacks_train_both_architectures_for_one_epoch(tmp_path):
    plan, package = collect_and_flatten(tmp_path, ["resnet18", "vgg16"], {})
    check_runs(plan, package, ["resnet18", "vgg16"])
    train = [b for b in package.table("blocks").to_pylist() if b["phase"] == "train"]
    assert all(b["samples_processed"] == len(data.load_store(plan.jobs[0].data_dir, "digits").y_train)
               for b in train)
