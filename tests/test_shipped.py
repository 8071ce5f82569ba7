"""The shipped package (replication/, described by ./datapackage.json), full size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten, restore
from deepgreen_audit.package.schema import TABLES

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTOR = ROOT / "datapackage.json"

pytestmark = pytest.mark.slow


def test_shipped_package_validates_and_says_it_is_synthetic(capsys):
    assert main(["validate", str(DESCRIPTOR)]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC DATA" in out
    assert "runs: 210" in out and "blocks: 12,600" in out
    desc = json.loads(DESCRIPTOR.read_text())
    assert desc["synthetic"] is True and "SYNTHETIC" in desc["title"]
    assert all(r["path"].startswith("replication/") for r in desc["resources"])


def test_shipped_package_is_what_synth_makes(tmp_path):
    """The shipped tables are exactly `deepgreen synth` with the recorded seed."""
    from deepgreen_audit.synth import write_synthetic

    seed = json.loads(DESCRIPTOR.read_text())["provenance"]["seed"]
    write_synthetic(tmp_path / "again", seed=seed)
    for name in TABLES:
        again = (tmp_path / "again" / f"{name}.csv").read_text(encoding="utf-8").splitlines()
        shipped = (ROOT / "replication" / f"{name}.csv").read_text(encoding="utf-8").splitlines()
        # the first differing line, not pytest's diff of 12,600 lines (which takes minutes)
        first = next((i for i, (a, b) in enumerate(zip(again, shipped)) if a != b), None)
        assert first is None and len(again) == len(shipped), \
            f"{name}.csv differs from line {first + 1 if first is not None else min(len(again), len(shipped))}"


def test_full_size_round_trip_is_byte_exact(tmp_path):
    runs = tmp_path / "runs"
    restore(DESCRIPTOR, runs)
    assert len(list(runs.glob("*/*/manifest.json"))) == 210
    pkg = tmp_path / "pkg"
    flatten(runs, pkg)
    for name in TABLES:
        assert (pkg / f"{name}.csv").read_bytes() == (ROOT / "replication" / f"{name}.csv").read_bytes()
    assert (pkg / "SHA256SUMS").read_bytes() == (ROOT / "replication" / "SHA256SUMS").read_bytes()
    assert Package.open(pkg).meta == Package.open(DESCRIPTOR).meta
    runs2 = tmp_path / "runs2"
    restore(pkg, runs2)
    first = {p.relative_to(runs): p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    second = {p.relative_to(runs2): p.read_bytes() for p in runs2.rglob("*") if p.is_file()}
    assert first == second


def test_upstream_frictionless_validate_passes_on_shipped_package():
    from frictionless import validate as fl_validate

    report = fl_validate(str(DESCRIPTOR))
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])[:5]
