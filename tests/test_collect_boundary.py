"""A cpu campaign's measurement boundary is the CPU packages, collected from a real stack run.

The PyTorch stack trains ResNet-18 on digits on the CPU (one repetition, one epoch, two batches
each way) under `collect`, with RAPL faked at its lowest layer: a powercap tree whose package
counter advances with wall time (tests/fakes/rapl.py), which DEEPGREEN_POWERCAP_ROOT hands to
every process of the collection.  Without NVML the campaign lacks no counter: energy_j is the
CPU packages' energy, and the audit's energy checks pass on it.  With the fake NVML module
(tests/fakes/nvidia) a GPU is present but outside the boundary: it is read and recorded in
gpu_energy_j, never added to energy_j.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.device.rapl import POWERCAP_ROOT_VARIABLE
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.package.validate import validate
from tests.fakes.rapl import advancing_powercap

ROOT = Path(__file__).resolve().parents[1]
NVML_FAKES = ROOT / "tests" / "fakes" / "nvidia"
SCOPE = {"ecosystems": ["python-pytorch"], "architectures": ["resnet18"], "datasets": ["digits"],
         "repetitions": 1, "epochs": 1, "device": "cpu", "max_train_batches": 2,
         "max_eval_batches": 2, "reason": "a cpu campaign on fake RAPL counters"}
#: The audit's checks of counter energy.
ENERGY_CHECKS = ("S5.both-readings", "S5.counter-recompute", "S5.rapl-wraps", "S5.energy-domains",
                 "S5.units")


def collect_on_fake_rapl(tmp: Path, monkeypatch) -> Package:
    """Collect SCOPE with the fake powercap tree (no --allow-missing-counters: a cpu campaign
    needs RAPL alone), flatten and validate it."""
    plan = load_plan(write_scoped_plan(tmp / "plan.toml", "cpuboundary", tmp / "data", SCOPE))
    prepare_plan(plan)
    with advancing_powercap(tmp / "powercap") as root:
        monkeypatch.setenv(POWERCAP_ROOT_VARIABLE, str(root))
        summary = collect(plan, tmp / "out")
    assert summary.ok, summary.failed
    flatten(summary.runs_dir, tmp / "pkg")
    report = validate(tmp / "pkg")
    assert report.valid, report.format_text()
    return Package.open(tmp / "pkg")


def assert_energy_is_the_cpu_packages(package: Package) -> list[dict]:
    blocks = package.table("blocks").to_pylist()
    assert len(blocks) == 2
    for b in blocks:
        assert b["energy_j"] == b["cpu_energy_j"] > 0, b
        assert b["rapl_start_uj"] and b["rapl_end_uj"] and b["rapl_wraps"] is not None
    env = package.table("environment").to_pylist()[0]
    assert env["rapl_available"] is True and env["rapl_domains"] == "package-0"
    assert env["counters_missing_reason"] is None
    measured = package.descriptor["measured"]
    assert measured["counters_missing"] == {}
    assert measured["boundary"] == "CPU packages (RAPL) (GPU boards outside the boundary of a cpu campaign)"
    # the counter is the fake tree's, not this host's: the package says so
    assert package.descriptor["synthetic"] is True
    assert POWERCAP_ROOT_VARIABLE in package.descriptor["synthetic_reason"]
    report = audit(package.descriptor_path, select=list(ENERGY_CHECKS))
    statuses = {c: report.finding(c).status for c in ENERGY_CHECKS}
    assert statuses == dict.fromkeys(ENERGY_CHECKS, "pass"), [
        (f.id, f.message) for f in report.findings if f.status != "pass"]
    assert "(energy_j = cpu_energy_j: the cpu boundary)" in report.finding("S5.energy-domains").message
    return blocks


def test_a_cpu_campaign_on_rapl_alone_measures_its_cpu_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))     # no fake NVML: this host has no GPU
    package = collect_on_fake_rapl(tmp_path, monkeypatch)
    blocks = assert_energy_is_the_cpu_packages(package)
    env = package.table("environment").to_pylist()[0]
    if env["nvml_energy_available"] is False:       # a host with a GPU reads it (next test)
        for b in blocks:
            assert b["gpu_energy_j"] is None and b["nvml_start_mj"] is None
            assert b["energy_missing_reason"].startswith(
                "NVML: not read, outside the measurement boundary of a cpu campaign")
    # CodeCarbon reads /sys/class/powercap itself, not the fake tree: where it modelled the CPU
    # on a run that records RAPL readable, the audit fails it, as on any host with RAPL
    methods = {b["codecarbon_cpu_method"] for b in blocks}
    if methods - {"rapl"}:
        assert audit(package.descriptor_path, select=["S5.modelled-cpu-power"]).finding(
            "S5.modelled-cpu-power").status == "fail"


def test_a_gpu_present_in_a_cpu_campaign_is_recorded_outside_energy_j(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{NVML_FAKES}:{ROOT}")
    monkeypatch.syspath_prepend(str(NVML_FAKES))       # the driver's own probe, in this process
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    package = collect_on_fake_rapl(tmp_path, monkeypatch)
    blocks = assert_energy_is_the_cpu_packages(package)
    env = package.table("environment").to_pylist()[0]
    assert env["nvml_energy_available"] is True and env["gpu_model"].startswith("FAKE NVML")
    for b in blocks:
        assert b["gpu_energy_j"] > 0 and b["energy_missing_reason"] is None
        assert b["energy_j"] != pytest.approx(b["gpu_energy_j"] + b["cpu_energy_j"])
