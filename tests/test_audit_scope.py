"""The audit of a campaign that declares its scope (a pilot), and of a GPU-board boundary:
what the measured pilot needs from the audit beyond the full design."""

from __future__ import annotations

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.synth import write_synthetic
from deepgreen_audit.units import J_PER_KWH
from tests.test_audit_checks import SMALL, edited, small_spec

SCOPE = {"ecosystems": SMALL["ecosystems"], "architectures": SMALL["architectures"],
         "datasets": SMALL["datasets"], "repetitions": SMALL["repetitions"], "epochs": SMALL["epochs"]}
SCOPED_CHECKS = ("S6.completeness-runs", "S6.completeness-blocks", "S2.recipe")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("small") / "pkg"
    write_synthetic(out, **SMALL)
    return out


def _with_meta(src, out, **meta):
    """A copy of `src` whose descriptor carries `meta` as well (tables unchanged)."""
    package = Package.open(src)
    write_package({name: package.text(name) for name in TABLES}, out, {**package.meta, **meta})
    return out


def test_the_full_design_fails_a_small_campaign_that_declares_no_scope(small, tmp_path):
    package = Package.open(small)
    assert package.descriptor["scope"] == SCOPE          # synth declares what it narrowed
    unscoped = tmp_path / "unscoped"
    write_package({name: package.text(name) for name in TABLES}, unscoped,
                  {k: v for k, v in package.meta.items() if k != "scope"})
    report = audit(unscoped, select=list(SCOPED_CHECKS))
    assert "scope" not in report.stats
    assert all(report.finding(c).status == "fail" for c in SCOPED_CHECKS)


def test_a_declared_scope_replaces_the_full_design(small, tmp_path):
    pkg = _with_meta(small, tmp_path / "scoped", scope=SCOPE)
    report = audit(pkg, select=list(SCOPED_CHECKS))
    assert report.stats["scope"] == SCOPE
    assert all(report.finding(c).status == "pass" for c in SCOPED_CHECKS), report.format_text()
    assert "audited against the scope the package declares" in report.format_text()
    assert report.to_dict()["stats"]["scope"] == SCOPE


def test_a_scope_still_fails_what_it_declares_and_lacks(small, tmp_path):
    pkg = _with_meta(small, tmp_path / "scoped", scope={**SCOPE, "repetitions": 3})
    finding = audit(pkg, select=["S6.completeness-runs"]).finding("S6.completeness-runs")
    assert finding.status == "fail" and "missing" in finding.message


def test_an_unknown_scope_key_is_a_user_error(small, tmp_path):
    from deepgreen_audit.errors import UserError

    pkg = _with_meta(small, tmp_path / "scoped", scope={"epochs": 3, "budget": 1})
    with pytest.raises(UserError, match="scope"):
        audit(pkg, select=["S2.recipe"])


def _gpu_only(frames):
    """The host had no CPU counter: CPU energy and the total are empty, with the reason."""
    b = frames["blocks"]
    for col in ("rapl_start_uj", "rapl_end_uj", "rapl_max_energy_range_uj", "cpu_energy_j", "energy_j"):
        b[col] = None
    b["energy_missing_reason"] = "RAPL: no powercap driver on this host"


def test_agreement_is_checked_on_the_gpu_alone_when_the_cpu_counter_is_missing(small, tmp_path):
    gpu_only = edited(small, tmp_path / "gpu", _gpu_only)
    finding = audit(gpu_only, spec=small_spec(), select=["S5.codecarbon-agreement"]).finding(
        "S5.codecarbon-agreement")
    assert finding.status in ("pass", "fail") and "on the GPU alone" in finding.message

    def planted(frames):
        _gpu_only(frames)
        b = frames["blocks"]
        b["codecarbon_gpu_energy_kwh"] = b["gpu_energy_j"] / J_PER_KWH
        b.loc[[4, 9], "codecarbon_gpu_energy_kwh"] *= 1.5
        b["codecarbon_energy_kwh"] = b[["codecarbon_cpu_energy_kwh", "codecarbon_gpu_energy_kwh",
                                        "codecarbon_ram_energy_kwh"]].sum(axis=1)
        b["codecarbon_energy_j"] = b["codecarbon_energy_kwh"] * J_PER_KWH

    bad = edited(small, tmp_path / "bad", planted)
    finding = audit(bad, spec=small_spec(), select=["S5.codecarbon-agreement"]).finding(
        "S5.codecarbon-agreement")
    assert finding.status == "fail" and finding.rows_affected == 2, finding.message


@pytest.mark.parametrize("shortfall_s, status", [(0.004, "pass"), (0.2, "fail")])
def test_codecarbon_nested_inside_the_window_may_fall_short_by_the_counter_reads(
        small, tmp_path, shortfall_s, status):
    def nested(frames):
        b = frames["blocks"]
        b["codecarbon_duration_s"] = b["duration_s"] - shortfall_s

    pkg = edited(small, tmp_path / "nested", nested)
    finding = audit(pkg, spec=small_spec(), select=["S5.codecarbon-duration"]).finding(
        "S5.codecarbon-duration")
    assert finding.status == status, finding.message
