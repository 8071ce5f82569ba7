"""The device layer against fakes at its lowest layer: a fake pynvml and a fake powercap tree."""

from __future__ import annotations

import logging
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


@pytest.mark.parametrize("mode, cpu", [
    ("intel_rapl", "rapl"), ("windows_emi", "rapl"), ("cpu_load", "load-model"),
    ("constant", "tdp-constant"), ("intel_power_gadget", "unknown"),
])
def test_codecarbon_cpu_method_from_the_mode_it_logs(mode, cpu):
    lines = [f"Delta energy consumed for CPU with {mode} : 0.000001 kWh, power : 41.2 W",
             "Energy consumed for All CPU : 0.000002 kWh"]
    assert codecarbon_tracker.cpu_method(lines) == cpu
    assert codecarbon_tracker.cpu_method(lines[1:]) == "unknown"        # no statement: not rapl
    assert codecarbon_tracker.cpu_method(
        lines + ["Delta energy consumed for CPU with constant : 0.0 kWh, power : 8.0 W"]) == \
        (cpu if mode == "constant" else "unknown")                       # two modes: unknown


@pytest.mark.parametrize("count, model, gpu", [
    (1, "1 x NVIDIA H200", "nvml"), (2, "2 x Tesla V100-SXM2-32GB", "nvml"), (0, "", "none"),
    (None, None, "none"), (1, "1 x AMD Instinct MI300X", "unknown"),
])
def test_codecarbon_gpu_method_from_the_gpus_it_reports(count, model, gpu):
    assert codecarbon_tracker.gpu_method(count, model) == gpu


def test_codecarbon_real_block_records_the_method_it_used(capfd):
    """The real CodeCarbon on this host: the methods derived from what it publishes are the ones
    it set up (no RAPL here: a modelled CPU power, said so)."""
    tracker = codecarbon_tracker.CodeCarbonTracker()
    tracker.start_block("b")
    sum(range(200_000))
    block = tracker.stop_block()
    assert block.duration_s > 0 and block.energy_kwh >= 0
    rapl = os.access("/sys/class/powercap/intel-rapl/subsystem", os.R_OK)
    assert block.cpu_method == "rapl" if rapl else block.cpu_method in ("load-model", "tdp-constant")
    assert block.gpu_method in ("nvml", "none")
    # what CodeCarbon itself says it set up (its hardware description) agrees with the derivation
    # (read here, in a test, from the tracker's internals: the oracle, not the method used)
    described = [str(item) for item in tracker._tracker._conf["hardware"]]
    mode_of = {"CPU(Intel Rapl)": "rapl", "CPU(Windows Emi)": "rapl", "CPU(Cpu Load)": "load-model"}
    cpu = next(item for item in described if item.startswith("CPU("))
    assert block.cpu_method == mode_of.get(cpu, "tdp-constant")
    assert (block.gpu_method == "nvml") == any(item.startswith("GPU(") for item in described)
    # hearing its INFO lines printed none of them, and left its logger as the pinned level set it
    assert "Delta energy consumed" not in capfd.readouterr().err
    assert logging.getLogger("codecarbon").getEffectiveLevel() == logging.ERROR
