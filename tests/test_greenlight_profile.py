"""profile-api with fake counters: a fake powercap sysfs tree and a fake pynvml, nothing else."""

from __future__ import annotations

import json
import os
import threading
import time
import types

import pytest

from deepgreen_audit.errors import UserError
from deepgreen_audit.greenlight import profile
from deepgreen_audit.greenlight.package import open_api_package, validate_api_package
from deepgreen_audit.greenlight.profile import DURATIONS_ONLY_REASON, StableState, profile_api

FAST = StableState(measurement_interval_s=0.01, check_last_n_points=3, max_wait_s=0.5,
                   cpu_std_to_mean=0.5)
MAX_RANGE_UJ = 262143328850


class NoDriver(Exception):
    pass


def _no_driver():
    raise NoDriver("NVML Shared Library Not Found")


FAKE_PYNVML = types.SimpleNamespace(NVMLError=NoDriver, nvmlInit=_no_driver)


@pytest.fixture
def powercap(tmp_path):
    """A powercap tree with one package drawing 1 W: a thread advances energy_uj by the
    time that really passed, so a loaded machine delays updates but never lowers the power."""
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(f"{MAX_RANGE_UJ}\n")
    energy = zone / "energy_uj"
    energy.write_text(f"{MAX_RANGE_UJ - 50_000}\n")  # wraps during the test
    stop = threading.Event()

    def advance():
        start_uj, started = MAX_RANGE_UJ - 50_000, time.monotonic()
        while not stop.wait(0.001):
            value = (start_uj + int((time.monotonic() - started) * 1e6)) % MAX_RANGE_UJ
            tmp = zone / ".energy_uj.tmp"
            tmp.write_text(f"{value}\n")
            os.replace(tmp, energy)   # readers see the old value or the new, never half

    thread = threading.Thread(target=advance, daemon=True)
    thread.start()
    yield tmp_path / "powercap"
    stop.set()
    thread.join()


@pytest.fixture
def thermal(tmp_path):
    zone = tmp_path / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "temp").write_text("41000\n")
    return tmp_path / "thermal"


def test_a_host_without_counters_is_refused(tmp_path):
    with pytest.raises(UserError, match="--durations-only") as err:
        profile_api(["torch.sum"], [8], tmp_path / "pkg", powercap_root=tmp_path / "none",
                    pynvml_module=FAKE_PYNVML)
    assert "RAPL" in str(err.value) and "NVML" in str(err.value)
    assert not (tmp_path / "pkg").exists()


def test_a_missing_gpu_counter_is_refused_unless_allowed(tmp_path, powercap):
    with pytest.raises(UserError, match="--allow-missing-counters"):
        profile_api(["torch.sum"], [8], tmp_path / "pkg", powercap_root=powercap,
                    pynvml_module=FAKE_PYNVML)


def test_fake_rapl_counter_measures_window_and_baseline(tmp_path, powercap, thermal):
    result = profile_api(["torch.sum"], [8, 64], tmp_path / "pkg", allow_missing_counters=True,
                         settings=FAST, min_window_s=0.05, powercap_root=powercap,
                         pynvml_module=FAKE_PYNVML, thermal_root=thermal)
    assert validate_api_package(tmp_path / "pkg").valid
    rows = open_api_package(tmp_path / "pkg").table("api_calls").to_pylist()
    assert [r["input_shape"] for r in rows] == ["8x8", "64x64"]
    assert rows[0]["args_size_bytes"] < rows[1]["args_size_bytes"]
    for r in rows:
        start, end = int(r["rapl_start_uj"]), int(r["rapl_end_uj"])
        window_j = ((end - start) % MAX_RANGE_UJ) / 1e6            # wraparound resolved
        assert r["cpu_total_j"] == pytest.approx(window_j / r["repetitions"])
        window_s = r["execution_time_s"] * r["repetitions"]
        assert window_s >= 0.05
        assert r["cpu_total_normalised_j"] == pytest.approx(
            (window_j - r["cpu_baseline_power_w"] * window_s) / r["repetitions"])
        assert 0.2 < r["cpu_baseline_power_w"] < 2.0              # the fake draws ~1 W
        assert r["gpu_total_j"] is None and "NVML" in r["energy_missing_reason"]
        assert r["stable_check_wait_s"] is not None and r["rapl_baseline_start_uj"]
    assert result.skipped == []


def test_durations_only_records_durations_and_the_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(profile.CATALOGUE, "nosuchframework.matmul",
                        ("nosuchframework_for_test", profile._jax))
    result = profile_api(["torch.matmul", "nosuchframework.matmul"], [4, 16], tmp_path / "pkg",
                         durations_only=True, min_window_s=0.02)
    rows = open_api_package(tmp_path / "pkg").table("api_calls").to_pylist()
    assert len(rows) == 2 and all(r["execution_time_s"] > 0 for r in rows)
    assert all(r["cpu_total_j"] is None and r["gpu_total_j"] is None for r in rows)
    assert all(r["energy_missing_reason"].startswith(DURATIONS_ONLY_REASON) for r in rows)
    assert rows[0]["framework"].startswith("torch ")
    descriptor = json.loads((tmp_path / "pkg" / "datapackage.json").read_text())
    assert descriptor["skipped_calls"] == result.skipped == [
        {"api_call": "nosuchframework.matmul",
         "reason": "nosuchframework_for_test is not installed (pip install '.[nosuchframework_for_test]')"}]


def test_unknown_calls_and_bad_sizes_are_user_errors(tmp_path):
    with pytest.raises(UserError, match=r"'torch.sums' is not an API call profile-api knows; "
                                        r"did you mean 'torch.sum'\?"):
        profile_api(["torch.sums"], [8], tmp_path / "pkg", durations_only=True)
    with pytest.raises(UserError, match="positive"):
        profile_api(["torch.sum"], [0], tmp_path / "pkg", durations_only=True)
