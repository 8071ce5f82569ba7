"""The contrast cell (S7) as a package of its own: the audit holds a package that declares the
contrast cell to S3_data.contrast_cell (its scope, its runs, the utilisation samples inside its
training blocks), and leaves every other package alone."""

from __future__ import annotations

import csv
import shutil

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.spec import contrast_cell, declares_contrast_cell, load_spec
from deepgreen_audit.synth import write_synthetic
from package_edits import rehash

SPEC = load_spec()
CELL = contrast_cell(SPEC)
#: a contrast cell cut down to what a test needs: two LibTorch stacks and one other, one
#: architecture, two repetitions of two epochs
SMALL = {"ecosystems": ["python-pytorch", "cpp-libtorch", "python-jax"],
         "architectures": ["resnet18"], "repetitions": 2, "epochs": 2}


def s7(report) -> dict[str, object]:
    return {f.id: f for f in report.findings if f.id.startswith("S7.")}


@pytest.fixture(scope="module")
def conforming(tmp_path_factory):
    """A synthetic contrast cell at S7's dataset, resolution and batch size."""
    out = tmp_path_factory.mktemp("contrast") / "pkg"
    write_synthetic(out, seed=5, datasets=[CELL["dataset"]], batch_size=CELL["batch_size"],
                    input_resolution_px=CELL["input_resolution_px"], **SMALL)
    return out


def test_a_package_that_declares_the_contrast_cell_passes_s7(conforming):
    found = s7(audit(conforming, select=["S7"]))
    assert set(found) == {"S7.scope", "S7.runs", "S7.utilisation-windows"}
    assert all(f.status == "pass" for f in found.values()), [f.message for f in found.values()]
    assert "imagenette at 224 px in batches of 32" in found["S7.runs"].message


def test_a_contrast_scope_at_the_main_designs_resolution_and_batch_fails_s7(tmp_path):
    """Imagenette declared, but at 32 px in batches of 128: the scoped recipe checks pass (the
    runs did what the scope says), and S7 says the scope and its runs are not the cell."""
    out = tmp_path / "pkg"
    write_synthetic(out, seed=6, datasets=[CELL["dataset"]], **SMALL)
    report = audit(out)
    found = s7(report)
    assert found["S7.scope"].status == "fail"
    assert "input_resolution_px not declared (S7: 224)" in found["S7.scope"].message
    assert "batch_size not declared (S7: 32)" in found["S7.scope"].message
    runs = found["S7.runs"]
    assert runs.status == "fail" and runs.rows_affected == 6 and runs.basis == "contradicted"
    assert "input_resolution_px differs in 6 (32: 6; S7 224)" in runs.message
    assert "batch_size differs in 6 (128: 6; S7 32)" in runs.message
    assert {f.id: f.status for f in report.findings}["S2.recipe"] == "pass"


def test_a_training_block_without_a_utilisation_sample_fails_s7(conforming, tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(conforming, pkg)
    samples = pkg / "samples.csv"
    with samples.open(newline="") as f:
        rows = list(csv.reader(f))
    victim = rows[1][0]
    for row in rows[1:]:
        if row[0] == victim:
            row[2] = ""  # gpu_utilization_pct: the sampler read nothing of this run's GPU
    with samples.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    rehash(pkg)
    found = s7(audit(pkg, select=["S7"]))["S7.utilisation-windows"]
    assert found.status == "fail" and found.rows_affected == SMALL["epochs"]
    assert {row["run_id"] for row in found.details["evidence"]} == {victim}


def test_a_package_that_is_not_the_contrast_cell_is_not_applicable(tmp_path):
    out = tmp_path / "pkg"
    write_synthetic(out, seed=7, **SMALL)
    found = s7(audit(out, select=["S7"]))
    assert {f.status for f in found.values()} == {"skip"}
    assert {f.basis for f in found.values()} == {"not applicable"}


def test_only_a_scope_naming_the_contrast_dataset_declares_the_cell():
    assert declares_contrast_cell({"datasets": ["imagenette"]}, SPEC)
    assert not declares_contrast_cell({"datasets": ["digits"]}, SPEC)
    assert not declares_contrast_cell(None, SPEC)
