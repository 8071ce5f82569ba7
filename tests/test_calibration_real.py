"""A between-window calibration collected for real on this CPU, end to end to its sentence.

A main campaign (PyTorch, ResNet-18, digits, two runs of one epoch of one batch) and a
calibration of the same reference configuration (four runs, `schedule = "calibration"`) are
collected in sessions, as docs/collection.md tells: the main campaign's first run, two
calibration points (`--max-runs 2`, through the command line), the main campaign's last run,
the two calibration points left. So two points lie inside the main campaign's interleaved
window and two after it. Both are flattened, validated and audited (S6.calibration-window names
the calibration's points against the window), and the paper's paragraph is rendered from them
(`render.build.calibration_tex`, the part of `render` that writes calibration.tex):
this host has no NVML and no RAPL and CodeCarbon models its CPU, so those instruments say "not
measured" with their reasons, and the block time, which was measured, is bounded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deepgreen_audit.audit import audit
from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.package.validate import validate
from deepgreen_audit.render.build import calibration_tex
from deepgreen_audit.render.environment import make_environment
from deepgreen_audit.resources import project_file

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = {"ecosystems": ["python-pytorch"], "architectures": ["resnet18"],
             "datasets": ["digits"], "epochs": 1, "device": "cpu", "max_train_batches": 1,
             "max_eval_batches": 1}


def test_a_real_calibration_bounds_the_block_time_and_says_what_it_did_not_measure(tmp_path):
    main = load_plan(write_scoped_plan(tmp_path / "main.toml", "smokemain", tmp_path / "data",
                                       {**REFERENCE, "repetitions": 2, "reason": "a smoke campaign"}))
    cal_path = write_scoped_plan(tmp_path / "cal.toml", "smokecal", tmp_path / "data",
                                 {**REFERENCE, "repetitions": 4, "schedule": "calibration",
                                  "reason": "a smoke calibration"}, master_seed=6)
    cal = load_plan(cal_path)
    prepare_plan(main)
    prepare_plan(cal)
    assert collect(main, tmp_path / "main", allow_missing_counters=True, max_runs=1).paused
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", "collect", "--plan",
                           str(cal_path), "--out", str(tmp_path / "cal"),
                           "--allow-missing-counters", "--max-runs", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ended this session after 2 run(s), as --max-runs asked" in done.stdout
    assert collect(main, tmp_path / "main", allow_missing_counters=True, check=False).ok
    rest = collect(cal, tmp_path / "cal", allow_missing_counters=True, check=False)
    assert rest.ok and len(rest.completed) == 2 and len(rest.skipped) == 2

    for name in ("main", "cal"):
        flatten(tmp_path / name / "runs", tmp_path / f"{name}-pkg")
        assert validate(tmp_path / f"{name}-pkg").valid
    cal_report = audit(tmp_path / "cal-pkg", select=["S6"])
    assert cal_report.finding("S6.interleaving").status == "skip"
    assert cal_report.finding("S6.schedule-gaps").status == "pass"
    finding = audit(tmp_path / "main-pkg", select=["S6.calibration-window"],
                    calibration=tmp_path / "cal-pkg").finding("S6.calibration-window")
    assert finding.status == "pass"
    assert finding.message.startswith("all 2 runs inside the interleaved window")
    assert finding.message.endswith("0 before, 2 inside, 2 after the window")

    env = make_environment(project_file("paper", "templates"))
    text = " ".join(calibration_tex(env, Package.open(tmp_path / "main-pkg"),
                                    tmp_path / "cal-pkg").split())
    assert r"All \num{2} runs lie inside the campaign's interleaved window" in text
    assert (r"\num{4} runs of one reference configuration {(}Python/PyTorch, ResNet-18 and "
            r"digits), \num{0} before, \num{2} inside and \num{2} after the window") in text
    # a cpu campaign: NVML outside its boundary, RAPL missing on this host, CodeCarbon a model
    assert "NVML GPU energy: not measured {(}NVML: not read, outside the measurement boundary" in text
    assert "RAPL CPU energy: not measured {(}RAPL:" in text
    assert "CodeCarbon energy: not measured {(}CodeCarbon's CPU power was modelled" in text
    time_row = next(line for line in text.split(r"\\") if line.strip().startswith("block time"))
    cells = [c.strip() for c in time_row.split("&")]
    assert all(c.startswith(r"\qty{") and c.endswith(r"{\percent}") for c in cells[1:5]), cells
    assert "not measured" not in time_row
