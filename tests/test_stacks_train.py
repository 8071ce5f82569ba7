"""The four stacks train under the harness on the digits smoke data; their run directories
flatten and validate.  Kept to one train batch and one eval batch per run (each run is its own
process and pays its framework's import and compilation); ResNet-18 always, VGG-16 on request."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.package.validate import validate
from deepgreen_audit.stacks import cpp, data, weights
from deepgreen_audit.stacks.prepare import prepare_plan

STACKS = {"python-pytorch": "torch", "python-tensorflow": "tensorflow", "python-jax": "jax",
          "cpp-libtorch": "libtorch"}
HEAVY = os.environ.get("DEEPGREEN_HEAVY_STACK_TESTS") == "1"


def write_plan(tmp: Path, executable: Path, architectures: list[str], batches: str) -> Path:
    stacks = "".join(f'[stacks.{eco}]\nkind = "python"\nprogram = "stacks/{eco.replace("-", "_")}/train.py"\n'
                     for eco in STACKS if eco.startswith("python"))
    stacks += f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["{executable}", "train"]\n'
    path = tmp / "plan.toml"
    path.write_text(f'campaign = "stacks"\nmaster_seed = 5\nrun_timeout_s = 900\ndata_dir = "{tmp / "data"}"\n'
                    f"{stacks}[scope]\necosystems = {list(STACKS)}\narchitectures = {architectures}\n"
                    f'datasets = ["digits"]\nrepetitions = 1\nepochs = 1\n{batches}\n'.replace("'", '"'))
    return path


def collect_and_flatten(tmp: Path, architectures: list[str], batches: str):
    plan = load_plan(write_plan(tmp, cpp.build(), architectures, batches))
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
    for job in plan.jobs:
        run = runs[job.run_id]
        assert run["status"] == "completed" and run["missing_reason"] is None, run
        assert run["data_fingerprint_sha256"] == store.fingerprint          # the same pixels everywhere
        export = weights.Export.at(weights.weights_dir(job.data_dir), job.architecture, job.classes, job.seed)
        assert run["initial_weights_sha256"] == weights.sha256_file(export.path)
        assert run["learning_rate"] == job.recipe["learning_rate"] and run["batch_size"] == job.recipe["batch_size"]
        assert env[job.run_id]["framework"] == STACKS[job.ecosystem]
    for b in blocks:
        assert b["samples_processed"] > 0 and b["loss"] > 0 and b["duration_s"] > 0
        assert (b["test_accuracy"] is not None) == (b["phase"] == "eval")


def test_four_stacks_train_resnet18_under_the_harness(tmp_path):
    plan, package = collect_and_flatten(tmp_path, ["resnet18"], "max_train_batches = 1\nmax_eval_batches = 1")
    check_runs(plan, package, ["resnet18"])


@pytest.mark.skipif(not HEAVY, reason="VGG-16 (134 M parameters) in four processes takes minutes on 2 "
                                      "cores; set DEEPGREEN_HEAVY_STACK_TESTS=1")
def test_four_stacks_train_both_architectures_for_one_epoch(tmp_path):
    plan, package = collect_and_flatten(tmp_path, ["resnet18", "vgg16"], "")
    check_runs(plan, package, ["resnet18", "vgg16"])
    train = [b for b in package.table("blocks").to_pylist() if b["phase"] == "train"]
    assert all(b["samples_processed"] == len(data.load_store(plan.jobs[0].data_dir, "digits").y_train)
               for b in train)
