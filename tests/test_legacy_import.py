"""`deepgreen import legacy` on the study's first campaign (read from ../shared, never copied)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.cli import main
from deepgreen_audit.importers.legacy import REPORT_FILE, SOURCE_ROWS_FILE
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.validate import validate

LEGACY = Path(__file__).resolve().parents[1].parent / "shared" / "legacy-campaign"
pytestmark = pytest.mark.skipif(not LEGACY.is_dir(), reason="../shared/legacy-campaign is absent")


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("legacy") / "pkg"
    assert main(["import", "legacy", str(LEGACY), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def report(legacy):
    return audit(legacy)


def test_import_validates_and_keeps_every_row(legacy):
    assert validate(legacy).valid
    package = Package.open(legacy)
    assert not package.synthetic
    runs, blocks = package.table("runs").to_pandas(), package.table("blocks").to_pandas()
    assert len(runs) == 48 and len(blocks) == 2880 and package.table("samples").num_rows == 0
    assert sorted(runs["ecosystem"].unique()) == ["cpp-libtorch", "java-dl4j", "matlab",
                                                  "python-jax", "python-pytorch",
                                                  "python-tensorflow", "r-torch", "rust-tch"]
    # nothing invented: no seed, process, schedule, counters; reasons given
    assert runs[["seed", "process_id", "schedule_position", "learning_rate"]].isna().all().all()
    assert runs["missing_reason"].str.contains("NOT known to be UTC").all()
    assert blocks[["energy_j", "nvml_start_mj", "rapl_wraps", "test_accuracy"]].isna().all().all()
    assert blocks["energy_missing_reason"].notna().all()


def test_kwh_kept_and_joules_derived_and_originals_recoverable(legacy):
    blocks = Package.open(legacy).table("blocks").to_pandas()
    with open(legacy / SOURCE_ROWS_FILE, newline="") as handle:
        source = list(csv.DictReader(handle))
    assert len(source) == 2880
    row = next(r for r in source if r["package_run_id"] == "r-torch.resnet18.cifar100.r1"
               and r["package_epoch"] == "1" and r["package_phase"] == "train")
    assert row["timestamp"] == "2025-09-04T15:55:20" and row["language"] == "R"
    b = blocks[(blocks.run_id == row["package_run_id"]) & (blocks.epoch == 1) & (blocks.phase == "train")].iloc[0]
    assert b["codecarbon_energy_kwh"] == float(row["energy_consumed"])
    assert b["codecarbon_energy_j"] == float(row["energy_consumed"]) * 3.6e6
    assert b["codecarbon_cpu_power_w"] == 42.5


def test_labels_normalised_with_originals(legacy):
    runs = Package.open(legacy).table("runs").to_pandas().set_index("run_id")
    assert runs.loc["rust-tch.resnet18.tiny-imagenet.r1", "source_labels"] == \
        "language=Rust;modello=resnet;dataset=tinyimagenet;model=resnet"
    assert runs.loc["python-jax.vgg16.fashion-mnist.r1", "source_labels"].startswith("language=Jax;")


def test_duplicates_compared_with_the_source_of_truth(legacy):
    consistency = {c["comparison"]: c for c in
                   json.loads((legacy / REPORT_FILE).read_text())["consistency"]}
    merged = consistency["results/data/combined_data.csv"]
    assert merged["compared"] == 2880 and merged["differing"] == 6
    assert consistency["R/emissions/R_combined_data.csv"]["differing"] == 0
    assert consistency["results/old_data/tensorflow_combined_data.csv"]["repeated_keys"] == 120


def test_audit_finds_the_campaigns_defects_with_row_counts(report):
    expected = {  # check id -> rows affected, found from the data
        "S5.both-readings": 2880, "S5.modelled-cpu-power": 2880, "S5.codecarbon-version": 30,
        "S5.tracking-mode": 6, "S5.short-blocks": 6, "S6.distinct-seeds": 48,
        "S6.independent-processes": 48, "S6.completeness-runs": 192, "S6.interleaving": 48,
        "S6.labels": 12, "S1.architecture-identity": 120, "S6.contemporaneous": 6,
        "S6.constancy": 42, "S5.power-duration": 1084, "S6.phase-work": 132,
    }
    for check_id, rows in expected.items():
        finding = report.finding(check_id)
        assert (finding.status, finding.rows_affected) == ("fail", rows), (check_id, finding.message)
    identity = report.finding("S1.architecture-identity")
    # the revision history of the campaign: TensorFlow's ResNet-18 scripts for Fashion-MNIST and
    # Tiny ImageNet imported the VGG-16 model; JAX and Rust differ for other reasons
    assert [(e["configuration"], e["ran"]) for e in identity.details["evidence"]] == [
        ("python-tensorflow/resnet18/fashion-mnist", "vgg16"),
        ("python-tensorflow/resnet18/tiny-imagenet", "vgg16")]
    explained = {(e["ecosystem"], e["kind"]) for e in identity.details["explained"]}
    assert ("python-jax", "stack-wide") in explained and ("rust-tch", "work") in explained
    window = report.finding("S6.contemporaneous")
    assert "python-jax ran 2025-08-01 to 2025-08-03" in window.message
    constancy = report.finding("S6.constancy").message
    for varying in ("python_version", "codecarbon_version", "ram_total_gb",
                    "codecarbon_country_iso_code: ITA", "CAN (1 run(s), 1 block(s): python-jax: 1)"):
        assert varying in constancy, varying
    assert "CodeCarbon 3.0.4" in report.finding("S5.power-duration").message
    assert "constant 42.5 W" in report.finding("S5.modelled-cpu-power").message
    assert report.finding("S5.counter-recompute").status == "skip" and not report.finished
    assert report.finding("S5.rapl-wraps").status == "skip"
    assert report.finding("integrity.round-trip").status == "pass"
    # what is true of the campaign is confirmed, not merely not flagged
    for check_id in ("S6.completeness-blocks", "S6.no-overlap", "S5.energy-domains", "S5.units",
                     "S5.carbon-intensity", "S5.emissions-rate", "S1.architectures", "S3.datasets"):
        assert report.finding(check_id).status == "pass", (check_id, report.finding(check_id).message)


def test_missing_source_is_one_clear_error(tmp_path, capsys):
    assert main(["import", "legacy", str(tmp_path), "--out", str(tmp_path / "pkg")]) == 2
    err = capsys.readouterr().err
    assert "results/data" in err and "Traceback" not in err
