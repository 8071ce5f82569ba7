"""The device layer against fakes at its lowest layer: a fake pynvml and a fake powercap tree."""

from __future__ import annotations

import os
import types

import pytest

from collect_fakes import FakeNvmlState, fake_pynvml, set_energy, zone
from deepgreen_audit.collect import codecarbon_tracker
from deepgreen_audit.collect.errors import (CodeCarbonRefused, EnergyNotSupported, NvmlUnavailable,
                                            RaplUnavailable)
from deepgreen_audit.collect.instruments import CountersMissing, Instruments, probe
from deepgreen_audit.collect.nvml import Nvml
from deepgreen_audit.collect.rapl import Rapl, discover, package_energy_j


# ------------------------------------------------------------------ NVML


def test_nvml_energy_counter_difference():
    state = FakeNvmlState(energy_mj=[1_000, 5_000], names=("NVIDIA H100", b"NVIDIA A100"))
    nvml = Nvml(fake_pynvml(state))
    start = nvml.total_energy_mj()
    state.energy_mj = [3_500, 5_250]
    end = nvml.total_energy_mj()
    assert (start, end) == ((1_000, 5_000), (3_500, 5_250))
    assert nvml.names() == ["NVIDIA H100", "NVIDIA A100"]
    assert nvml.cuda_driver_version() == "12.4"
    assert nvml.power_w(0) == 250.125 and nvml.memory_used_mib(1) == 5120.0


def test_nvml_pre_volta_is_a_typed_error_naming_the_board():
    nvml = Nvml(fake_pynvml(FakeNvmlState(supported=False, names=("Tesla P100",))))
    with pytest.raises(EnergyNotSupported, match="Tesla P100.*Volta"):
        nvml.total_energy_mj()


def test_nvml_absent_is_a_typed_error():
    with pytest.raises(NvmlUnavailable, match="nvmlInit failed"):
        Nvml(fake_pynvml(FakeNvmlState(present=False)))


def test_probe_reports_unsupported_nvml_as_missing_and_closes_it(tmp_path):
    state = FakeNvmlState(supported=False)
    nvml, rapl, missing = probe(pynvml_module=fake_pynvml(state), powercap_root=tmp_path / "none")
    assert nvml is None and rapl is None and state.shutdowns == 1
    assert "Volta" in missing["NVML"] and "does not exist" in missing["RAPL"]


def test_fake_module_injected_through_sys_modules(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml(FakeNvmlState(energy_mj=[42])))
    assert Nvml().total_energy_mj() == (42,)


# ------------------------------------------------------------------ RAPL


def test_rapl_wraparound_difference(tmp_path):
    z = zone(tmp_path, "intel-rapl:0", "package-0", 262_143_328_000, max_uj=262_143_328_850)
    rapl = Rapl(tmp_path)
    start = rapl.read_uj()
    set_energy(z, 150)
    end = rapl.read_uj()
    assert end[0] < start[0]
    assert package_energy_j(start, end, rapl.max_energy_range_uj) == pytest.approx(1000 / 1e6)
    assert package_energy_j((5,), (1_000_005,), (262_143_328_850,)) == 1.0


def test_rapl_intel_two_packages_skip_subzones_and_psys(tmp_path):
    zone(tmp_path, "intel-rapl:1", "package-1", 20)
    zone(tmp_path, "intel-rapl:0", "package-0", 10)
    zone(tmp_path, "intel-rapl:0:0", "core", 5)
    zone(tmp_path, "intel-rapl:0:1", "dram", 5)
    zone(tmp_path, "intel-rapl:2", "psys", 999)
    rapl = Rapl(tmp_path)
    assert rapl.names == ("package-0", "package-1")
    assert rapl.read_uj() == (10, 20)


def test_rapl_mmio_and_linked_mirrors_counted_once(tmp_path):
    msr = zone(tmp_path, "intel-rapl:0", "package-0", 10)
    zone(tmp_path, "intel-rapl-mmio:0", "package-0", 10)
    os.symlink(msr, tmp_path / "intel-rapl:7")  # the same zone reached twice
    domains = discover(tmp_path)
    assert [(d.name, d.zone.name) for d in domains] == [("package-0", "intel-rapl:0")]


def test_rapl_per_die_domains_inside_a_package_counted_once(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 10)
    zone(tmp_path, "intel-rapl:1", "package-0-die-1", 10)
    assert Rapl(tmp_path).names == ("package-0",)
    other = tmp_path / "dies-only"
    zone(other, "intel-rapl:0", "package-0-die-0", 1)
    zone(other, "intel-rapl:1", "package-0-die-1", 2)
    assert Rapl(other).names == ("package-0-die-0", "package-0-die-1")


def test_rapl_amd_naming(tmp_path):
    zone(tmp_path, "amd-rapl:0", "package-0", 7)
    assert Rapl(tmp_path).read_uj() == (7,)


def test_rapl_psys_only_is_unavailable(tmp_path):
    zone(tmp_path, "intel-rapl:0", "psys", 7)
    with pytest.raises(RaplUnavailable, match="no RAPL package domain.*psys"):
        Rapl(tmp_path)


def test_rapl_unreadable_names_the_path_and_the_fix(tmp_path, monkeypatch):
    z = zone(tmp_path, "intel-rapl:0", "package-0", 7)
    (z / "energy_uj").chmod(0)
    if os.geteuid() == 0:  # root reads any mode: make the read fail as it does for a user
        real = type(z).read_text
        monkeypatch.setattr(type(z), "read_text", lambda self, *a, **k: (_ for _ in ()).throw(
            PermissionError(13, "Permission denied")) if self.name == "energy_uj" else real(self, *a, **k))
    with pytest.raises(RaplUnavailable) as info:
        Rapl(tmp_path)
    assert str(z / "energy_uj") in info.value.reason and "chmod" in info.value.reason


def test_rapl_absent_tree(tmp_path):
    with pytest.raises(RaplUnavailable, match="does not exist"):
        Rapl(tmp_path / "powercap")


# ------------------------------------------------------------------ instruments


def test_instruments_refuse_missing_counters_unless_allowed(tmp_path):
    with pytest.raises(CountersMissing, match="--allow-missing-counters"):
        Instruments.open(pynvml_module=fake_pynvml(FakeNvmlState(present=False)),
                         powercap_root=tmp_path, codecarbon=False)
    inst = Instruments.open(allow_missing_counters=True, codecarbon=False, powercap_root=tmp_path,
                            pynvml_module=fake_pynvml(FakeNvmlState(present=False)))
    assert inst.read() == (None, None)
    assert inst.counters_missing_reason.startswith("NVML: ") and "RAPL: " in inst.counters_missing_reason


# ------------------------------------------------------------------ CodeCarbon


def test_codecarbon_2_refused_at_startup():
    with pytest.raises(CodeCarbonRefused, match="2.8.3.*3.x"):
        codecarbon_tracker.require_codecarbon(types.SimpleNamespace(__version__="2.8.3"))
    with pytest.raises(CodeCarbonRefused):
        codecarbon_tracker.CodeCarbonTracker(module=types.SimpleNamespace(__version__="2.4.1"))
    assert codecarbon_tracker.require_codecarbon().startswith("3.")


def test_pinned_config_checked_against_the_spec(tmp_path):
    config = codecarbon_tracker.load_config()
    assert config.kwargs["tracking_mode"] == "machine" and config.kwargs["measure_power_secs"] == 1.0
    bad = tmp_path / "codecarbon.ini"
    bad.write_text(config.path.read_text().replace("measure_power_secs = 1", "measure_power_secs = 15"))
    with pytest.raises(CodeCarbonRefused, match="measure_power_secs.*1.0"):
        codecarbon_tracker.load_config(bad)
    bad.write_text("[codecarbon]\ntracking_mode = machine\nsave_to_api = true\n")
    with pytest.raises(CodeCarbonRefused, match="save_to_api"):
        codecarbon_tracker.load_config(bad)


@pytest.mark.parametrize("hardware,cpu,gpu", [
    (["RAM()", "CPU(Intel Rapl)", "GPU(NVIDIA H100)"], "rapl", "nvml"),
    (["RAM()", "CPU(Cpu Load)"], "load-model", "none"),
    (["RAM()", "CPU(AMD EPYC > 8W [generic])"], "tdp-constant", "none"),
    (["RAM()", "CPU(Intel Xeon > 150W)"], "tdp-constant", "none"),
    (["RAM()", "CPU(Intel Power Gadget)"], "unknown", "none"),
])
def test_codecarbon_method_labels(hardware, cpu, gpu):
    assert codecarbon_tracker.cpu_method(hardware) == cpu
    assert codecarbon_tracker.gpu_method(hardware) == gpu


def test_codecarbon_real_block_records_the_method_it_used():
    """The real CodeCarbon on this host: no RAPL here, so a modelled CPU power, said so."""
    tracker = codecarbon_tracker.CodeCarbonTracker()
    tracker.start_block("b")
    sum(range(200_000))
    block = tracker.stop_block()
    assert block.duration_s > 0 and block.energy_kwh >= 0
    expected = "rapl" if os.path.exists("/sys/class/powercap/intel-rapl:0/energy_uj") else None
    if expected is None:
        assert block.cpu_method in ("load-model", "tdp-constant")
    assert block.cpu_method == codecarbon_tracker.cpu_method(tracker.hardware)
