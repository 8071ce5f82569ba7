"""Shared fixtures: small packages built through the real writer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable, rows_from_columns
from deepgreen_audit.package.writer import write_package

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def shared_data(*parts: str) -> Path:
    """Data of an earlier study under ../shared, read where it lies; the test is skipped, with
    the path named, where a checkout has no ../shared beside it."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared beside the checkout)")
    return path
SHA = "ab" * 32


def tiny_columns() -> dict[str, dict[str, list]]:
    """Two runs of two epochs, with awkward values: 17-digit floats, empties, non-ASCII."""
    run_ids = ["python-pytorch.resnet18.cifar100.r1", "r-torch.vgg16.cifar100.r1"]
    runs = {f.name: [None, None] for f in load_schema("runs").fields}
    runs.update({
        "run_id": run_ids, "campaign": ["tiny", "tiny"],
        "ecosystem": ["python-pytorch", "r-torch"], "architecture": ["resnet18", "vgg16"],
        "dataset": ["cifar100", "cifar100"],
        "source_labels": [None, "language=R;modello=vgg16;note=évaluation, \"quoted\""],
        "repetition": [1, 1], "seed": [11, 12], "schedule_position": [1, 2],
        "process_id": [4242, 4243],
        "started_at_utc": ["2026-03-02T08:00:00Z", "2026-03-02T09:00:00.25Z"],
        "ended_at_utc": ["2026-03-02T08:10:00Z", "2026-03-02T09:10:00Z"],
        "status": ["completed", "completed"], "optimizer": ["adam", "adam"],
        "learning_rate": [0.0001, 0.0001], "batch_size": [128, 128], "epochs": [2, 2],
        "lr_schedule": ["none", "none"], "weight_decay": [0.0, 0.0],
        "initial_weights_sha256": [SHA, SHA],
        "missing_reason": [None, "data fingerprint not recorded by this stack"],
    })
    blocks = {f.name: [] for f in load_schema("blocks").fields}
    for run_id in run_ids:
        for epoch in (1, 2):
            for phase in ("train", "eval"):
                row = {f.name: None for f in load_schema("blocks").fields}
                row.update({
                    "run_id": run_id, "epoch": epoch, "phase": phase,
                    "started_at_utc": f"2026-03-02T08:0{epoch}:00Z",
                    "duration_s": 12.345678901234567 if phase == "train" else 1.0000000000000002,
                    "nvml_start_mj": "1000", "nvml_end_mj": "3500",
                    "rapl_start_uj": "262143328000;5", "rapl_end_uj": "150;1000005",
                    "rapl_max_energy_range_uj": "262143328850;262143328850",
                    "gpu_energy_j": 2.5, "cpu_energy_j": 2.000001, "energy_j": 4.500001,
                    "codecarbon_duration_s": 13.0, "codecarbon_energy_kwh": 1.2345678901234567e-06,
                    "codecarbon_energy_j": 4.444444404444444, "codecarbon_cpu_method": "rapl",
                    "codecarbon_gpu_method": "nvml", "samples_processed": 128, "loss": 2.3,
                    "test_accuracy": 0.1 if phase == "eval" else None,
                })
                for k, v in row.items():
                    blocks[k].append(v)
    samples = {f.name: [] for f in load_schema("samples").fields}
    for run_id in run_ids:
        for t in range(3):
            for k, v in {"run_id": run_id, "t_s": float(t), "gpu_utilization_pct": 97.5,
                         "gpu_power_w": None if t == 1 else 210.25, "gpu_memory_used_mib": 5120.0,
                         "cpu_utilization_pct": 12.5}.items():
                samples[k].append(v)
    env = {f.name: [None, None] for f in load_schema("environment").fields}
    env.update({"run_id": run_ids, "host": ["hôte-Zürich", "hôte-Zürich"],
                "gpu_model": ["NVIDIA L40S", "NVIDIA L40S"], "gpu_count": [1, 1],
                "codecarbon_version": ["3.0.4", "3.0.4"], "nvml_energy_available": [True, True],
                "rapl_available": [True, False], "rapl_domains": ["package-0;package-1", None],
                "counters_missing_reason": [None, "RAPL not readable: permission denied"]})
    return {"runs": runs, "blocks": blocks, "samples": samples, "environment": env}


def tiny_tables() -> dict[str, TextTable]:
    cols = tiny_columns()
    return {name: TextTable(load_schema(name).field_names, rows_from_columns(load_schema(name), cols[name]))
            for name in TABLES}


TINY_META = {"name": "tiny-test-package", "title": "A tiny hand-written package for tests",
             "synthetic": True, "provenance": {"generator": "tests/conftest.py"}}


@pytest.fixture
def tiny_package(tmp_path) -> Path:
    """A valid package folder written by the real writer."""
    out = tmp_path / "pkg"
    write_package(tiny_tables(), out, TINY_META)
    return out


@pytest.fixture
def copy_of():
    """Copy a package folder so that a test can damage the copy."""
    def _copy(src: Path, dst: Path) -> Path:
        shutil.copytree(src, dst)
        return dst
    return _copy
