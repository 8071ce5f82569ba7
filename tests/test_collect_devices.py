"""The device layer against fakes at its lowest layer: a fake pynvml and a fake powercap tree."""

from __future__ import annotations

import logging
import os
import threading
import time
import types
from dataclasses import replace

import pytest

from collect_fakes import DrawingPackage, FakeNvmlState, fake_pynvml, set_energy, zone
from deepgreen_audit.collect import codecarbon_tracker
from deepgreen_audit.collect.harness import Harness
from deepgreen_audit.collect.instruments import CounterReading, CountersMissing, Instruments, probe
from deepgreen_audit.collect.record import block_row
from deepgreen_audit.collect.sampler import Sampler
from deepgreen_audit.device import rapl as rapl_module
from deepgreen_audit.device.errors import CodeCarbonRefused, EnergyNotSupported, NvmlUnavailable, RaplUnavailable
from deepgreen_audit.device.nvml import Nvml
from deepgreen_audit.device.rapl import Rapl, discover, fewest_wraps, package_energy_j, wraps_between
from deepgreen_audit.spec import boundary_counters

CUDA_BOUNDARY = boundary_counters("cuda")

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
    found = probe(pynvml_module=fake_pynvml(state), powercap_root=tmp_path / "none")
    assert found.nvml is None and found.rapl is None and state.shutdowns == 1
    assert "Volta" in found.missing["NVML"] and "does not exist" in found.missing["RAPL"]


def test_fake_module_injected_through_sys_modules(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml(FakeNvmlState(energy_mj=[42])))
    assert Nvml().total_energy_mj() == (42,)


# ------------------------------------------------------------------ RAPL


def test_rapl_wraparound_difference(tmp_path):
    z = zone(tmp_path, "intel-rapl:0", "package-0", 262_143_328_000, max_uj=262_143_328_850)
    rapl = Rapl(tmp_path)
    start = rapl.read()
    set_energy(z, 150)
    end = rapl.read()
    assert end.energy_uj[0] < start.energy_uj[0] and wraps_between(start, end) == (1,)
    assert package_energy_j(start.energy_uj, end.energy_uj, rapl.max_energy_range_uj,
                            wraps_between(start, end)) == pytest.approx(1000 / 1e6)
    assert package_energy_j((5,), (1_000_005,), (262_143_328_850,), (0,)) == 1.0
    # w observed wraps: end - start + w x range, whichever way the two readings lie
    assert package_energy_j((100, 7), (50, 9), (1_000, 1_000), (2, 1)) == \
        (50 - 100 + 2_000) / 1e6 + (9 - 7 + 1_000) / 1e6
    assert fewest_wraps((100, 7), (50, 9)) == (1, 0)


def test_two_wraps_inside_one_block_are_counted_by_the_sampler_and_paid_for(tmp_path):
    """A package drawing 200 W wraps its 1 kJ range every 5 s: over a 12 s block it wraps twice,
    which two boundary readings alone would take for no wrap at all (the end reads above the
    start).  The sampler's 1 s ticks see both wraps; the block records them and its energy is
    what the package drew."""
    drawing = DrawingPackage(tmp_path, "intel-rapl:0", "package-0", power_w=200,
                             start_uj=300_000_000, max_uj=1_000_000_000)
    zone(tmp_path, "intel-rapl:1", "package-1", 5_000, max_uj=1_000_000_000)   # idle: no wrap
    instruments = Instruments(rapl=Rapl(tmp_path))
    sampler = Sampler(rapl=instruments.rapl)
    harness = Harness(instruments, clock=drawing.clock)
    harness.begin(1, "train")
    for _ in range(12):
        drawing.advance(1)
        sampler.sample()                        # a tick of the 1 Hz thread, driven by the test
    block = harness.end(1, "train", samples_processed=10, loss=1.0)
    assert block.rapl_start_uj == (300_000_000, 5_000) and block.rapl_end_uj == (700_000_000, 5_000)
    assert block.rapl_wraps == (2, 0) and block.duration_s == 12.0
    row = block_row(block, "r1", instruments.rapl.max_energy_range_uj, CUDA_BOUNDARY, None)
    assert row["rapl_wraps"] == "2;0"
    assert row["cpu_energy_j"] == drawing.drawn_uj / 1e6 == 2_400.0


def test_a_wrap_seen_only_by_a_boundary_read_counts_in_its_block(tmp_path):
    """The boundary reads count wraps too: a wrap just before the opening read belongs to no
    block, one after the last tick belongs to the block the closing read ends."""
    drawing = DrawingPackage(tmp_path, "intel-rapl:0", "package-0", power_w=100,
                             start_uj=900_000_000, max_uj=1_000_000_000)
    instruments = Instruments(rapl=Rapl(tmp_path))
    harness = Harness(instruments, clock=drawing.clock)
    drawing.advance(2)                          # wraps before the block opens
    harness.begin(1, "train")
    drawing.advance(9)                          # wraps again, seen by the closing read alone
    block = harness.end(1, "train", samples_processed=1, loss=1.0)
    assert block.rapl_wraps == (1,)
    assert block_row(block, "r1", instruments.rapl.max_energy_range_uj, CUDA_BOUNDARY, None)["cpu_energy_j"] == 900.0


def test_sampler_and_boundary_reads_of_a_counter_are_ordered(tmp_path, monkeypatch):
    """Reads from several threads of a counter that only rises count no wrap: each read is
    compared with the one before it under the lock.  (Unlocked, a thread that read 5 would
    compare it after another thread stored 6, and count a wrap.)"""
    zone(tmp_path, "intel-rapl:0", "package-0", 0)
    rapl = Rapl(tmp_path)
    ticks = iter(range(1, 10**9))
    read_int = rapl_module._read_int

    def rising(path):
        value = next(ticks) if path.name == "energy_uj" else read_int(path)
        time.sleep(0)                           # invite a thread switch between read and compare
        return value

    monkeypatch.setattr(rapl_module, "_read_int", rising)
    threads = [threading.Thread(target=lambda: [rapl.read() for _ in range(300)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rapl.read().wraps == (0,)


def test_a_sampler_tick_that_fails_fails_the_run(tmp_path):
    """A counter unreadable mid-run stops the wrap count: stop() raises the tick's error
    rather than hand back samples from a run whose wraps went uncounted."""
    z = zone(tmp_path, "intel-rapl:0", "package-0", 7)
    sampler = Sampler(rapl=Rapl(tmp_path), interval_s=0.01).start()
    (z / "energy_uj").unlink()
    time.sleep(0.1)
    with pytest.raises(RaplUnavailable, match="energy_uj"):
        sampler.stop()


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
    assert inst.read() == CounterReading(nvml_mj=None, rapl=None)
    assert inst.counters_missing_reason.startswith("NVML: ") and "RAPL: " in inst.counters_missing_reason


def test_a_cpu_campaign_needs_rapl_alone_and_says_why_nvml_cells_are_empty(tmp_path):
    """On a cpu campaign the boundary is the CPU packages: a host without NVML is not refused
    and lacks no counter, its blocks' NVML cells are empty with a reason saying NVML is outside
    the boundary; a host without RAPL still lacks a counter."""
    zone(tmp_path, "intel-rapl:0", "package-0", 1_000)
    no_gpu = fake_pynvml(FakeNvmlState(present=False))
    inst = Instruments.open(codecarbon=False, powercap_root=tmp_path, pynvml_module=no_gpu, device="cpu")
    assert inst.nvml is None and inst.rapl is not None and inst.counters_missing_reason is None
    assert [c.column for c in inst.boundary] == ["cpu_energy_j"]
    assert inst.energy_missing_reason.startswith(
        "NVML: not read, outside the measurement boundary of a cpu campaign (not readable here: ")
    with pytest.raises(CountersMissing, match="RAPL: .*--allow-missing-counters") as refused:
        Instruments.open(codecarbon=False, powercap_root=tmp_path / "none", pynvml_module=no_gpu,
                         device="cpu")
    assert "NVML" not in str(refused.value)
    with pytest.raises(CountersMissing, match="NVML: "):   # a cuda campaign needs both
        Instruments.open(codecarbon=False, powercap_root=tmp_path, pynvml_module=no_gpu)


def test_a_cpu_block_s_energy_is_its_cpu_packages_and_a_gpu_present_is_recorded_beside_it(tmp_path):
    """energy_j sums the boundary's counters: on cpu the CPU packages alone, while the GPU a
    host happens to have is read and recorded in gpu_energy_j, outside energy_j."""
    drawing = DrawingPackage(tmp_path, "intel-rapl:0", "package-0", power_w=50, start_uj=0,
                             max_uj=1_000_000_000)
    state = FakeNvmlState(energy_mj=[1_000])
    inst = Instruments.open(codecarbon=False, powercap_root=tmp_path, pynvml_module=fake_pynvml(state),
                            device="cpu")
    assert inst.missing == {} and inst.energy_missing_reason is None
    harness = Harness(inst, clock=drawing.clock)
    harness.begin(1, "train")
    drawing.advance(4)
    state.energy_mj = [401_000]
    block = harness.end(1, "train", samples_processed=1, loss=1.0)
    cpu_row = block_row(block, "r1", inst.rapl.max_energy_range_uj, inst.boundary, None)
    assert (cpu_row["cpu_energy_j"], cpu_row["gpu_energy_j"], cpu_row["energy_j"]) == (200.0, 400.0, 200.0)
    cuda_row = block_row(block, "r1", inst.rapl.max_energy_range_uj, CUDA_BOUNDARY, None)
    assert cuda_row["energy_j"] == 600.0
    unread = replace(block, rapl_start_uj=None, rapl_end_uj=None, rapl_wraps=None)
    assert block_row(unread, "r1", None, inst.boundary, "RAPL: gone")["energy_j"] is None


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
