"""Parity of the six stacks: names, initial weights, logits and loss, BatchNorm statistics,
pixels, the control group's exact agreement, recipe literals; and deliberate mistakes in one
stack that the checks must catch (in the built stacks: a copy of the sources with one
convention changed, built beside the real one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.collect import parity
from deepgreen_audit.stacks import models_flax, models_tf, native, sources, weights

HEAVY = os.environ.get("DEEPGREEN_HEAVY_STACK_TESTS") == "1"
heavy = pytest.mark.skipif(not HEAVY, reason="VGG-16 in every stack takes minutes on 2 cores; "
                                             "set DEEPGREEN_HEAVY_STACK_TESTS=1")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("parity-data")


def built(*ecosystems) -> dict:
    """The built stacks' executables (the set-up builds them; an unbuilt one fails, naming the fix)."""
    for eco in ecosystems:
        stack = native.NATIVE_STACKS[eco]
        if not stack.product_path.is_file() or stack.stale_inputs():
            pytest.fail(f"{eco} is not built or out of date: {stack.fix()}")
    return {eco: native.NATIVE_STACKS[eco].executable for eco in ecosystems}


def statuses(report, stack=None):
    return {(f.id, f.resource): f.status for f in report.findings if stack in (None, f.resource)}


def test_all_six_stacks_agree_on_resnet18(data_dir):
    report = parity.run_parity("resnet18", data_dir, executables=built(*parity.EXTERNAL_STACKS))
    assert {f.resource for f in report.findings} == {*parity.STACKS, "all"}
    assert report.valid, report.format_text()
    assert all(f.status == "pass" for f in report.findings), report.format_text()
    train = [f for f in report.findings if f.id == "S1.logits-train" and f.resource != parity.reference_stack()]
    assert all(0 < f.details["measured"] <= f.details["tolerance"] for f in train)     # real float differences, within tolerance
    group = [f for f in report.findings if f.id == "S6.control-group" and f.resource in parity.TORCHSCRIPT_STACKS]
    assert len(group) == 2 and all(f.details["measured"] == 0.0 for f in group)   # same module, same LibTorch: bit-equal
    assert (data_dir / "weights" / "resnet18-c10-s0.torchscript.pt").is_file()


@heavy
def test_all_six_stacks_agree_on_vgg16(data_dir):
    report = parity.run_parity("vgg16", data_dir, executables=built(*parity.EXTERNAL_STACKS), count=8)
    assert report.valid, report.format_text()


def test_wrong_batchnorm_epsilon_in_one_stack_is_caught(data_dir, monkeypatch, capsys):
    monkeypatch.setattr(models_flax, "BN_EPSILON", 1e-3)          # Keras' default, typed into the JAX stack
    code = main(["parity", "--architecture", "resnet18", "--stack", "python-jax", "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert code == 1
    failing = [line for line in out.splitlines() if line.strip().startswith("FAIL")]
    assert any("S1.logits-eval" in line and "python-jax" in line for line in failing), out
    assert any("S1.logits-train" in line and "python-jax" in line for line in failing), out
    assert not any("S1.initial-weights" in line for line in failing)      # the weights themselves are right


def test_framework_default_initialiser_and_momentum_are_caught(data_dir, monkeypatch):
    monkeypatch.setattr(models_tf, "load_state", lambda model, tensors: None)   # keeps Keras' own initialisers
    report = parity.run_parity("resnet18", data_dir, stacks=("python-tensorflow",))
    got = statuses(report, "python-tensorflow")
    assert got[("S1.initial-weights", "python-tensorflow")] == "fail"
    assert got[("S1.logits-eval", "python-tensorflow")] == "fail"
    assert got[("S1.parameter-names", "python-tensorflow")] == "pass"
    monkeypatch.undo()
    monkeypatch.setattr(models_flax, "BN_DECAY", 0.99)              # Flax's default momentum
    report = parity.run_parity("resnet18", data_dir, stacks=("python-jax",))
    got = statuses(report, "python-jax")
    assert got[("S1.batchnorm-statistics", "python-jax")] == "fail"
    assert got[("S1.logits-train", "python-jax")] == "pass"         # only the running statistics betray it


def test_unbuilt_stack_is_a_skip_not_a_pass(data_dir, tmp_path):
    report = parity.run_parity("resnet18", data_dir, stacks=("cpp-libtorch", "rust-tch", "java-dl4j"),
                               executables={"rust-tch": tmp_path / "missing"})
    findings = [f for f in report.findings if f.resource in parity.EXTERNAL_STACKS]
    assert {f.resource for f in findings} == set(parity.EXTERNAL_STACKS)
    assert findings and all(f.status == "skip" and "not built" in f.message for f in findings)


def planted_copy(tmp_path: Path, ecosystem: str, replace: str, by: str) -> Path:
    """The stack's sources copied to tmp_path with one text replaced (which must occur once)."""
    stack = native.NATIVE_STACKS[ecosystem]
    copy = tmp_path / ecosystem
    shutil.copytree(stack.source_dir, copy, ignore=shutil.ignore_patterns("target", "build"))
    hits = [p for p in copy.rglob("*") if p.is_file() and replace in p.read_text(errors="replace")]
    assert len(hits) == 1 and hits[0].read_text().count(replace) == 1, hits
    hits[0].write_text(hits[0].read_text().replace(replace, by))
    return copy


def test_rust_stack_training_batchnorm_on_running_statistics_is_caught(data_dir, tmp_path):
    """The Rust stack's train-mode pass switched to eval mode (BatchNorm on running statistics):
    built from a copy (its own package name, the real build's compiled dependencies)."""
    copy = planted_copy(tmp_path, "rust-tch", "self.module.set_train();\n        self.module.method_is",
                        "self.module.set_eval();\n        self.module.method_is")
    manifest = copy / "Cargo.toml"
    manifest.write_text(manifest.read_text().replace('name = "deepgreen-tch"', 'name = "deepgreen-tch-planted"'))
    real = native.NATIVE_STACKS["rust-tch"]
    env = dict(os.environ, LIBTORCH_USE_PYTORCH="1", VIRTUAL_ENV=sys.prefix,
               CARGO_TARGET_DIR=str(real.source_dir / "target"),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    subprocess.run(["cargo", "build", "--release", "--offline", "--quiet"], cwd=copy, env=env, check=True)
    planted = real.source_dir / "target" / "release" / "deepgreen-tch-planted"
    try:
        report = parity.run_parity("resnet18", data_dir, stacks=("cpp-libtorch", "rust-tch"),
                                   executables={**built("cpp-libtorch"), "rust-tch": planted},
                                   source_root=copy.parent)
    finally:
        planted.unlink(missing_ok=True)
    got = statuses(report, "rust-tch")
    assert got[("S1.logits-train", "rust-tch")] == "fail"
    assert got[("S1.batchnorm-statistics", "rust-tch")] == "fail"
    assert got[("S6.control-group", "rust-tch")] == "fail"       # no longer bit-equal to the C++ stack
    assert got[("S1.logits-eval", "rust-tch")] == "pass" and got[("S1.initial-weights", "rust-tch")] == "pass"
    assert statuses(report, "cpp-libtorch")[("S1.logits-train", "cpp-libtorch")] == "pass"


@pytest.mark.parametrize("replace,by,failing", [
    # Keras' BatchNorm epsilon typed into the Java stack: every pass through BatchNorm moves
    ("BATCHNORM_EPSILON = 1e-5;", "BATCHNORM_EPSILON = 1e-3;",
     {"S1.logits-eval", "S1.logits-train", "S1.batchnorm-statistics"}),
    # DL4J's own running-variance update (the biased batch variance) instead of PyTorch's unbiased one
    ("batch.var(true,", "batch.var(false,", {"S1.batchnorm-statistics"}),
], ids=["batchnorm-epsilon", "dl4j-biased-running-variance"])
def test_java_stack_wrong_convention_is_caught(data_dir, tmp_path, replace, by, failing):
    """A copy of the Java stack with one convention changed, built offline beside the real one."""
    copy = planted_copy(tmp_path, "java-dl4j", replace, by)
    subprocess.run(["mvn", "-q", "-B", "-o", "package", "-DskipTests"], cwd=copy, check=True,
                   stdout=subprocess.DEVNULL)
    report = parity.run_parity("resnet18", data_dir, stacks=("java-dl4j",),
                               executables={"java-dl4j": copy / "deepgreen-dl4j"}, source_root=copy.parent)
    got = statuses(report, "java-dl4j")
    assert {check for (check, _), status in got.items() if status == "fail"} == failing, report.format_text()
    stats = next(f for f in report.findings if f.id == "S1.batchnorm-statistics")
    assert stats.details["measured"] > stats.details["tolerance"]                    # by how much is in the report


def test_recipe_literals_are_found_and_the_stacks_have_none(tmp_path):
    assert sources.recipe_literals() == []
    stack = tmp_path / "stacks" / "python_x"
    stack.mkdir(parents=True)
    (stack / "train.py").write_text("LR = 1e-4\nBATCH = 128  # comment 256\nname = '30'\n"
                                    "bits = 32  # not-recipe: word size\n")
    (stack / "main.cpp").write_text("// eval batch 256\nint epochs = 30;\nauto s = \"128\";\n")
    hits = {(p.name, line, key) for p, line, _, key in sources.recipe_literals(tmp_path / "stacks")}
    assert hits == {("train.py", 1, "learning_rate"), ("train.py", 2, "batch_size"), ("main.cpp", 2, "epochs")}


def test_export_is_deterministic_and_checked_against_its_manifest(tmp_path):
    first = weights.export(tmp_path / "a", "resnet18", 10, 7, torchscript=False)
    second = weights.export(tmp_path / "b", "resnet18", 10, 7, torchscript=False)
    assert first.sha256 == second.sha256
    tensors, sha = weights.ensure(tmp_path / "nowhere", "resnet18", 10, 7)     # in memory, same bytes
    assert sha == first.sha256 and not (tmp_path / "nowhere").exists()
    other = weights.export(tmp_path / "a", "resnet18", 10, 8, torchscript=False)
    assert other.sha256 != first.sha256
    blob = bytearray(first.path.read_bytes())
    blob[-1] ^= 1
    first.path.write_bytes(bytes(blob))
    with pytest.raises(Exception, match="does not match the manifest"):
        weights.load(first.path)
    conv = tensors["conv1.weight"]
    assert np.array_equal(weights.to_channels_first(weights.to_channels_last(conv)), conv)
    assert weights.to_channels_last(conv).shape == (7, 7, 3, 64)


def test_export_reads_with_the_safetensors_library(tmp_path):
    """The hand-written encoder (deterministic header) is the format the library reads."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    exp = weights.export(tmp_path, "resnet18", 10, 1, torchscript=False)
    ours, _ = weights.load(exp.path)
    theirs = safetensors_numpy.load_file(str(exp.path))
    assert set(ours) == set(theirs) and all(np.array_equal(ours[k], theirs[k]) for k in ours)
