"""The audit of the measurement boundary a package declares, and of a collection that declares
its missing counters.

* energy_j is the sum of the boundary of the declared device (its scope's, else the
  specification's): gpu_energy_j + cpu_energy_j on cuda, cpu_energy_j on cpu.
* A collection allowed to miss counters (`--allow-missing-counters`) records, per run, which
  counter it could not read and why (environment nvml_energy_available / rapl_available false,
  counters_missing_reason) and, per block, why its energy cells are empty: its missing counter
  energy, and CodeCarbon's CPU model on a host without RAPL, are warnings naming what was not
  measured and why.  Where nothing declares it (no reason, availability unrecorded as in the
  first campaign, or the counter recorded readable) they still fail.

The packages are the small synthetic one, edited the way a no-counter collection writes its
tables (as `/tmp`-free as the rest of the suite: every package is made here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.units import J_PER_KWH
from tests.test_audit_checks import SMALL, edited, small_spec

ROOT = Path(__file__).resolve().parents[1]
SCOPE = {"ecosystems": SMALL["ecosystems"], "architectures": SMALL["architectures"],
         "datasets": SMALL["datasets"], "repetitions": SMALL["repetitions"], "epochs": SMALL["epochs"]}
CPU_SCOPE = {**SCOPE, "device": "cpu"}
BLOCKS = 144            # 24 runs x 3 epochs x 2 phases
COUNTER_CELLS = ("nvml_start_mj", "nvml_end_mj", "rapl_start_uj", "rapl_end_uj",
                 "rapl_max_energy_range_uj", "rapl_wraps", "gpu_energy_j", "cpu_energy_j", "energy_j")
NVML_REASON = "nvmlInit failed: NVML Shared Library Not Found (no NVIDIA driver on this host?)"
RAPL_REASON = "/sys/class/powercap does not exist: no powercap RAPL driver on this host"
HOST_REASON = f"NVML: {NVML_REASON}; RAPL: {RAPL_REASON}"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from deepgreen_audit.synth import write_synthetic

    out = tmp_path_factory.mktemp("small") / "pkg"
    write_synthetic(out, **SMALL)
    return out


def no_counters(frames, *, available=False, counters_reason: str | None = HOST_REASON,
                block_reason: str | None = HOST_REASON, cpu_method="load-model") -> None:
    """The tables as a collection on a host without NVML and RAPL writes them: no counter cell,
    each block saying why, each run recording both counters unreadable and why, CodeCarbon's CPU
    power a load model.  `available` is what the runs record (None: not recorded)."""
    b, env = frames["blocks"], frames["environment"]
    for column in COUNTER_CELLS:
        b[column] = None
    b["energy_missing_reason"] = block_reason
    b["codecarbon_cpu_method"] = cpu_method
    env["nvml_energy_available"] = available
    env["rapl_available"] = available
    env["rapl_domains"] = None
    env["counters_missing_reason"] = counters_reason


def first_runs(frames, n: int) -> list[str]:
    return sorted(frames["runs"]["run_id"])[:n]


def check(pkg: Path, check_id: str):
    return audit(pkg, spec=small_spec(), select=[check_id]).finding(check_id)


# ---------------------------------------------------------------- the boundary's sum


def cpu_boundary(frames) -> None:
    """energy_j as a cpu campaign writes it: the CPU packages' energy alone."""
    b = frames["blocks"]
    b["energy_j"] = b["cpu_energy_j"]


def test_a_cpu_campaign_s_energy_is_its_cpu_packages(small, tmp_path):
    cpu = edited(small, tmp_path / "cpu", cpu_boundary, scope=CPU_SCOPE)
    finding = check(cpu, "S5.energy-domains")
    assert finding.status == "pass", finding.message
    assert finding.message.endswith("(energy_j = cpu_energy_j: the cpu boundary)")
    # the same tables in a package that declares no device are a cuda campaign: gpu + cpu
    cuda = edited(small, tmp_path / "cuda", cpu_boundary)
    finding = check(cuda, "S5.energy-domains")
    assert finding.status == "fail" and finding.rows_affected == BLOCKS
    assert "energy_j is not gpu_energy_j + cpu_energy_j (the cuda boundary)" in finding.message
    # and a cpu campaign that added the GPU it happened to have breaks its boundary
    added = edited(small, tmp_path / "added", lambda f: None, scope=CPU_SCOPE)
    finding = check(added, "S5.energy-domains")
    assert finding.status == "fail" and finding.rows_affected == BLOCKS
    assert "is not cpu_energy_j (the cpu boundary)" in finding.message


def test_a_cpu_total_without_its_cpu_energy_fails(small, tmp_path):
    def gpu_only(frames):
        cpu_boundary(frames)
        b = frames["blocks"]
        b.loc[[0, 5], "energy_j"] = b.loc[[0, 5], "gpu_energy_j"]
        b.loc[[0, 5], ["cpu_energy_j", "rapl_start_uj", "rapl_end_uj", "rapl_max_energy_range_uj",
                       "rapl_wraps"]] = None

    finding = check(edited(small, tmp_path / "pkg", gpu_only, scope=CPU_SCOPE), "S5.energy-domains")
    assert finding.status == "fail" and finding.rows_affected == 2, finding.message


def test_agreement_is_checked_on_the_cpu_alone_when_no_gpu_counter_was_read(small, tmp_path):
    """A cpu campaign on a host without a GPU: CodeCarbon's CPU energy against RAPL's."""
    def cpu_host(frames, off=()):
        cpu_boundary(frames)
        b = frames["blocks"]
        b[["nvml_start_mj", "nvml_end_mj", "gpu_energy_j"]] = None
        b["codecarbon_gpu_energy_kwh"] = 0.0
        b["codecarbon_cpu_energy_kwh"] = b["cpu_energy_j"] / J_PER_KWH
        b.loc[list(off), "codecarbon_cpu_energy_kwh"] *= 1.5
        b["codecarbon_energy_kwh"] = b[["codecarbon_cpu_energy_kwh", "codecarbon_gpu_energy_kwh",
                                        "codecarbon_ram_energy_kwh"]].sum(axis=1)
        b["codecarbon_energy_j"] = b["codecarbon_energy_kwh"] * J_PER_KWH

    finding = check(edited(small, tmp_path / "ok", cpu_host, scope=CPU_SCOPE), "S5.codecarbon-agreement")
    assert finding.status == "pass" and "on the CPU alone" in finding.message, finding.message
    bad = edited(small, tmp_path / "bad", lambda f: cpu_host(f, off=(3, 8)), scope=CPU_SCOPE)
    finding = check(bad, "S5.codecarbon-agreement")
    assert finding.status == "fail" and finding.rows_affected == 2, finding.message


# ---------------------------------------------------------------- declared missing counters


@pytest.mark.parametrize("scope, boundary, unreadable", [
    (SCOPE, "gpu_energy_j + cpu_energy_j", "GPU boards (NVML) and CPU packages (RAPL)"),
    (CPU_SCOPE, "cpu_energy_j", "CPU packages (RAPL)")])
def test_declared_missing_counters_are_warnings_naming_what_and_why(small, tmp_path, scope, boundary,
                                                                     unreadable):
    pkg = edited(small, tmp_path / "pkg", no_counters, scope=scope)
    report = audit(pkg, spec=small_spec(), select=["S5.both-readings", "S5.modelled-cpu-power"])
    readings, modelled = report.finding("S5.both-readings"), report.finding("S5.modelled-cpu-power")
    assert readings.status == "warn" and readings.rows_affected == BLOCKS, readings.message
    assert readings.message.startswith(
        f"energy at the measurement boundary ({boundary}) was not measured in {BLOCKS} block(s) of "
        f"24 run(s): their collection declared the {unreadable} unreadable, and every block "
        f"carries CodeCarbon's reading; recorded reason: {HOST_REASON}")
    assert readings.basis == "not recorded"
    assert readings.details["evidence"][0]["counters_missing_reason"] == HOST_REASON
    assert modelled.status == "warn" and modelled.rows_affected == BLOCKS, modelled.message
    assert modelled.message.startswith(
        f"CodeCarbon's CPU power is a model, not a measurement, in {BLOCKS} block(s) of 24 run(s), "
        "because their host had no readable RAPL counter, as their collection declared: ")
    assert "declared load-model" in modelled.message and RAPL_REASON in modelled.message
    assert report.exit_status(strict=False) == 0


def _some_runs_readable(frames):
    """Three runs record both counters readable, yet their blocks lack counter energy."""
    no_counters(frames)
    env = frames["environment"]
    readable = env["run_id"].isin(first_runs(frames, 3))
    env.loc[readable, ["nvml_energy_available", "rapl_available"]] = True
    env.loc[readable, "counters_missing_reason"] = None


@pytest.mark.parametrize("edit, rows, says", [
    # nothing says why the counters are missing
    (lambda f: no_counters(f, counters_reason=None), BLOCKS, "(reason given: "),
    # whether the counters were readable is not recorded (the first campaign)
    (lambda f: no_counters(f, available=None), BLOCKS, "where their run records no counter"),
    # the blocks do not say why their cells are empty
    (lambda f: no_counters(f, block_reason=None), BLOCKS, "(no reason given)"),
    # the run had its counters: its blocks lack them for no declared reason
    (_some_runs_readable, 18, "; besides, energy at the measurement boundary"),
])
def test_undeclared_missing_counter_energy_still_fails(small, tmp_path, edit, rows, says):
    finding = check(edited(small, tmp_path / "pkg", edit), "S5.both-readings")
    assert finding.status == "fail" and finding.rows_affected == rows, finding.message
    assert says in finding.message


@pytest.mark.parametrize("edit, rows", [
    (lambda f: no_counters(f, counters_reason=None), BLOCKS),   # no recorded reason
    (lambda f: no_counters(f, available=None), BLOCKS),         # RAPL's availability unrecorded
    (_some_runs_readable, 18),                                  # the run could read RAPL
])
def test_a_modelled_cpu_power_where_rapl_is_not_declared_missing_still_fails(small, tmp_path, edit, rows):
    finding = check(edited(small, tmp_path / "pkg", edit), "S5.modelled-cpu-power")
    assert finding.status == "fail" and finding.rows_affected == rows, finding.message
    assert "whose host records RAPL readable or does not record it" in finding.message


def test_the_first_campaign_still_fails_both_checks():
    """The first campaign records no counter availability: nothing declares its gaps."""
    report = audit(ROOT / "examples" / "first-campaign",
                   select=["S5.both-readings", "S5.modelled-cpu-power"])
    assert report.finding("S5.both-readings").status == "fail"
    assert report.finding("S5.modelled-cpu-power").status == "fail"
    assert report.finding("S5.modelled-cpu-power").rows_affected == 2880
