"""The between-window calibration: the interleaved window (columnar/window.py), the calibration
plan, the audit's S6.calibration-window on a campaign with runs outside its window (the synth
defect late-reruns) with and without a calibration, the drift analysis against a known answer,
and the paper's paragraph.  The real collection on this CPU: tests/test_calibration_real.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepgreen_audit.analysis.calibration import INSTRUMENTS, _drift, analyse_calibration
from deepgreen_audit.analysis.data import Design
from deepgreen_audit.analysis.values import NotMeasured
from deepgreen_audit.audit import audit
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.columnar.window import AFTER, BEFORE, INSIDE, in_turn, interleaved_window
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.render.build import calibration_tex
from deepgreen_audit.render.environment import make_environment
from deepgreen_audit.resources import project_file
from deepgreen_audit.synth import write_synthetic
from deepgreen_audit.synth.model import SynthModel

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "collect" / "calibration.toml"
HOUR = np.timedelta64(3600, "s")
T0 = np.datetime64("2026-03-02T08:00:00", "ns")


def _times(starts_h, length_h=0.5):
    starts = T0 + (np.asarray(starts_h, dtype=float) * 3600).astype("timedelta64[s]")
    return starts, starts + np.timedelta64(int(length_h * 3600), "s")


# ---------------------------------------------------------------- the window


def test_a_retry_after_the_schedule_lies_outside_the_window():
    """Positions 1..4 ran in turn; position 2 failed and was retried 6 hours after the last."""
    starts, ends = _times([0, 10.0, 1, 1.5])
    positions = np.array([1, 2, 3, 4])
    assert in_turn(positions, starts).tolist() == [True, False, True, True]
    window = interleaved_window(positions, starts, ends, max_run_gap_s=3600)
    assert window.places.tolist() == [INSIDE, AFTER, INSIDE, INSIDE]
    assert window.start == starts[0] and window.end == ends[3]


def test_a_retry_of_the_last_run_lies_outside_by_its_wait():
    """The schedule's last run, retried hours later, is in its turn; its wait sets it apart."""
    starts, ends = _times([0, 1, 1.6, 8.0])
    window = interleaved_window(np.array([1, 2, 3, 4]), starts, ends, max_run_gap_s=3600)
    assert window.places.tolist() == [INSIDE, INSIDE, INSIDE, AFTER]


def test_without_positions_only_a_long_wait_sets_runs_apart():
    starts, ends = _times([5.0, 0, 0.6, 1.2])
    window = interleaved_window(np.full(4, np.nan), starts, ends, max_run_gap_s=3600)
    assert window.places.tolist() == [AFTER, INSIDE, INSIDE, INSIDE]
    cal_starts, cal_ends = _times([-2, 0.2, 1.0, 3.0], length_h=0.1)
    assert window.place(cal_starts, cal_ends).tolist() == [BEFORE, INSIDE, INSIDE, AFTER]


# ---------------------------------------------------------------- the plan


def test_the_calibration_plan_repeats_one_configuration_on_a_calibration_schedule():
    plan = load_plan(PLAN)
    assert {(j.ecosystem, j.architecture, j.dataset) for j in plan.jobs} == \
        {("python-pytorch", "resnet18", "fashion-mnist")}
    assert [j.repetition for j in plan.jobs] == list(range(1, 11))
    assert plan.scope["schedule"] == "calibration"
    # its seeds repeat none of the main campaign's runs of the same ids
    main = {j.run_id: j.seed for j in load_plan().jobs}
    assert not any(main.get(j.run_id) == j.seed for j in plan.jobs)


def test_the_plan_verb_says_it_is_a_calibration():
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", "plan", "--plan", str(PLAN)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert ("1 configuration x 10 repetitions = 10 runs, 3 epochs each, a between-window "
            "calibration (its points collected in sessions: --max-runs)") in done.stdout


def test_a_schedule_the_plan_does_not_know_is_refused_by_name(tmp_path):
    path = write_scoped_plan(tmp_path / "p.toml", "x", tmp_path / "data",
                             {"ecosystems": ["python-pytorch"], "schedule": "calibrated"})
    with pytest.raises(UserError, match="'calibrated' is not a schedule.*did you mean 'calibration'"):
        load_plan(path)


# ---------------------------------------------------------------- the audit


@pytest.fixture(scope="module")
def late(tmp_path_factory) -> tuple[Path, list[str]]:
    """The full synthetic campaign with 4 runs re-run after it (the study's 4 of 210)."""
    out = tmp_path_factory.mktemp("late") / "pkg"
    write_synthetic(out, defects=["late-reruns"])
    truth = json.loads((out / "synth-truth.json").read_text())["defects"]["late-reruns"]
    return out, truth["run_ids"]


@pytest.fixture(scope="module")
def back_to_back(tmp_path_factory) -> Path:
    """A calibration drawn without the calibration's timing: its runs follow one another at
    the campaign's start, all inside its window."""
    out = tmp_path_factory.mktemp("b2b") / "cal"
    write_synthetic(out, **_plan_overrides())
    return out


def _plan_overrides() -> dict:
    scope = load_plan(PLAN).scope
    return {k: v for k, v in scope.items() if k not in ("max_train_batches", "max_eval_batches")}


def _finding(pkg: Path, calibration: Path | None = None):
    return audit(pkg, select=["S6.calibration-window"],
                 calibration=calibration).finding("S6.calibration-window")


def test_runs_outside_the_window_fail_without_a_calibration_naming_them(late):
    pkg, run_ids = late
    finding = _finding(pkg)
    assert finding.status == "fail" and finding.rows_affected == 4
    assert finding.message.startswith("4 of 210 run(s) outside the interleaved window")
    assert "no between-window calibration was given" in finding.message
    assert sorted(e["run_id"] for e in finding.details["evidence"]) == sorted(run_ids)
    assert {e["side"] for e in finding.details["evidence"]} == {"after"}


def test_a_calibration_across_and_after_the_window_covers_them(late):
    pkg, _ = late
    finding = _finding(pkg, ROOT / "calibration")
    assert finding.status == "pass", finding.message
    assert finding.message.endswith("(1 before, 7 inside, 2 after the window)")


def test_a_calibration_with_no_point_after_the_window_does_not_cover_them(late, back_to_back):
    pkg, _ = late
    finding = _finding(pkg, back_to_back)
    assert finding.status == "fail"
    assert ("does not cover them (0 before, 10 inside, 0 after the window: 0 calibration run(s) "
            "after the window, fewer than 2)") in finding.message


def test_a_calibration_of_another_host_does_not_cover_them(late, tmp_path):
    pkg, _ = late
    cal = tmp_path / "cal"
    model = SynthModel.from_toml(ROOT / "collect" / "calibration-synth.toml")
    write_synthetic(cal, model=model.with_overrides({"environment": {"host": "another-host"}}),
                    **_plan_overrides())
    finding = _finding(pkg, cal)
    assert finding.status == "fail"
    assert "measured on another host (another-host) than the campaign" in finding.message
    figures = analyse_calibration(pkg, cal).calibration
    assert figures is not None and not figures.covered


def test_the_calibration_package_is_held_to_its_own_schedule():
    report = audit(ROOT / "calibration", select=["S6"])
    assert report.finding("S6.interleaving").status == "skip"
    assert report.finding("S6.calibration-window").status == "skip"
    assert report.finding("S6.schedule-gaps").status == "pass"
    assert not [f.id for f in report.findings if f.status == "fail"]


def test_the_command_line_refuses_a_calibration_that_is_none(late):
    pkg, _ = late
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", "audit", str(pkg),
                           "--calibration", str(pkg)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "is not a between-window calibration package" in done.stderr


def test_the_shipped_package_is_audited_with_the_shipped_calibration():
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", "audit", "--select",
                           "S6.calibration-window", "--json"], capture_output=True, text=True,
                          cwd=ROOT)
    finding = next(f for f in json.loads(done.stdout)["findings"]
                   if f["id"] == "S6.calibration-window")
    assert finding["status"] == "pass"
    assert finding["message"].endswith("1 before, 7 inside, 2 after the window")


# ---------------------------------------------------------------- the analysis


def test_the_drift_and_its_bound_against_a_known_answer():
    """Three runs inside read 100 J, two outside 120 J: the drift is +20 %, every resample
    too, so the bound is 20 %; on a campaign whose runs outside read 50 J of 1000 J it is
    worth 10 J, 1 % of the total."""
    blocks = pd.DataFrame({"run_id": list("abcde"), "gpu_energy_j": [100, 100, 100, 120, 120],
                           "codecarbon_cpu_method": ["rapl"] * 5})
    places = dict(zip("abcde", [INSIDE] * 3 + [AFTER] * 2))
    campaign = pd.DataFrame({"run_id": ["x", "y", "z"], "gpu_energy_j": [450.0, 500.0, 50.0]})
    row = _drift(INSTRUMENTS[0], blocks, places, {}, Design.from_spec(), campaign, {"z"})
    assert row.drift_pct.value == pytest.approx(20)
    assert row.low_pct.value == row.high_pct.value == row.bound_pct.value == pytest.approx(20)
    assert row.worth.value == pytest.approx(10) and row.worth.unit == r"\joule"
    assert row.worth_share_pct.value == pytest.approx(1)


def test_a_side_with_one_run_leaves_the_drift_unbounded():
    blocks = pd.DataFrame({"run_id": list("abc"), "gpu_energy_j": [100, 100, 120]})
    places = dict(zip("abc", [INSIDE, INSIDE, AFTER]))
    row = _drift(INSTRUMENTS[0], blocks, places, {}, Design.from_spec(), blocks, set())
    assert isinstance(row.bound_pct, NotMeasured)
    assert "1 outside it; a bound needs 2 on each" in row.bound_pct.reason


def test_an_instrument_the_calibration_lacks_is_not_measured_with_its_reason(late, tmp_path):
    """A calibration drawn on a CPU host has no NVML: its row says so, the others are bounded."""
    cal = tmp_path / "cal"
    write_synthetic(cal, model=SynthModel.from_toml(ROOT / "collect" / "calibration-synth.toml"),
                    **{**_plan_overrides(), "device": "cpu"})
    figures = analyse_calibration(late[0], cal).calibration
    assert figures is not None and figures.covered
    by_name = {row.instrument.value: row for row in figures.instruments}
    assert isinstance(by_name["NVML GPU energy"].bound_pct, NotMeasured)
    assert not isinstance(by_name["RAPL CPU energy"].bound_pct, NotMeasured)
    assert not isinstance(by_name["block time"].worth, NotMeasured)


# ---------------------------------------------------------------- the paper


def _paragraph(pkg: Path, calibration: Path | None) -> str:
    env = make_environment(project_file("paper", "templates"))
    return " ".join(calibration_tex(env, Package.open(pkg), calibration).split())


def test_the_paragraph_without_a_calibration_says_none_was_collected(late):
    pkg, run_ids = late
    text = _paragraph(pkg, None)
    assert r"\num{4} of the \num{210} runs sit outside the campaign's interleaved window" in text
    assert ", ".join(sorted(run_ids)).replace("_", r"\_") in text
    assert "No between-window calibration was collected" in text
    assert "nothing is estimated in its place" in text and "tabular" not in text


def test_the_paragraph_with_the_calibration_quotes_its_bounds(late):
    pkg, _ = late
    text = _paragraph(pkg, ROOT / "calibration")
    assert "A between-window calibration bounds what that is worth: \\num{10} runs" in text
    assert "The calibration package is synthetic: its figures are not measurements." in text
    figures = analyse_calibration(pkg, ROOT / "calibration").calibration
    assert figures is not None
    nvml = figures.instruments[0]
    assert nvml.instrument.value == "NVML GPU energy" and not isinstance(nvml.bound_pct, NotMeasured)
    assert f"NVML GPU energy & \\qty{{{nvml.drift_pct.value:.1f}}}{{\\percent}}" in text


# ---------------------------------------------------------------- collect in sessions


@pytest.mark.parametrize("extra,message", [
    (["--max-runs", "0"], "--max-runs takes 1 or more"),
    (["--max-runs", "2", "--executor", "slurm"], "--max-runs applies to the local executor only"),
])
def test_max_runs_is_refused_where_it_cannot_apply(extra, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", "collect", "--plan", str(PLAN),
                           "--out", str(tmp_path / "out"), *extra], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
