"""The CodeCarbon audit against the real instrument: the CodeCarbon installed in the project's
environment writes its logs here, in the mode each test names, and the audit's findings are
held to what CodeCarbon's own code path for that mode does (read from its source and from
the rows it wrote), not to a log written by hand."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepgreen_audit.codecarbon.audit import audit_log
from deepgreen_audit.codecarbon.importer import import_logs

pytest.importorskip("codecarbon")

TASKS = ("load", "train", "eval")


def run_codecarbon(out: Path, body: str, **options) -> None:
    """Run `body` in a fresh interpreter with an offline tracker `tracker` (France, 1 s
    measurements, and the tracker `options` given) writing to `out`: CodeCarbon keeps
    process-wide state (its lock, its logger), which a test process should not inherit."""
    out.mkdir(parents=True, exist_ok=True)
    script = textwrap.dedent("""
        import time
        from codecarbon import OfflineEmissionsTracker

        def busy(seconds):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass

        tracker = OfflineEmissionsTracker(country_iso_code="FRA", output_dir={out!r},
                                          log_level="error", measure_power_secs=1, **{options!r})
    """).format(out=str(out), options=options) + textwrap.dedent(body)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)


def test_task_mode_each_task_is_a_measurement_and_the_run_row_is_held_to_its_tasks(tmp_path):
    logs = tmp_path / "logs"
    run_codecarbon(logs, f"""
        tracker.start()
        for name in {TASKS!r}:
            tracker.start_task(name)
            busy(0.4)
            tracker.stop_task()
        tracker.stop()
    """)
    task_files = sorted(logs.glob("emissions_*_*.csv"))
    assert len(task_files) == 1 and (logs / "emissions.csv").is_file()
    import_logs([logs], tmp_path / "pkg")
    report, ctx = audit_log(tmp_path / "pkg")
    rows = ctx.rows
    tasks = rows[rows["task_name"].notna()]
    # each task is a measurement of its own, never a "duplicated or out of order" flush
    assert sorted(tasks["task_name"]) == sorted(TASKS)
    assert set(tasks["run_key"]) == {f"{run}/{task}" for run, task in zip(tasks["run_id"], tasks["task_name"])}
    assert tasks["final_row"].all() and (tasks["flush"] == 1).all()
    assert report.finding("S5.cc-rows").status == "pass"
    verdicts = {r["run_key"] for r in report.stats["verdicts"]["runs"]}
    assert set(tasks["run_key"]) <= verdicts
    # the run's row: held to its tasks as CodeCarbon wrote them (3.3 gives the last task's
    # duration with every task's energy; a version that covers the whole run passes)
    run_row = rows[rows["task_name"].isna()].iloc[0]
    covers = run_row["duration_s"] >= tasks["duration_s"].sum() - 0.05 * len(tasks)
    finding = report.finding("S5.cc-task-totals")
    assert finding.status == ("pass" if covers else "fail"), finding.message
    if not covers:
        assert "last task's duration" in finding.message and "emissions.csv line 2" in finding.message


def audited_second(tmp_path: Path, **options):
    """One second of busy work tracked with the tracker `options`, imported and audited: the
    report, the context and the RAM's component row."""
    logs = tmp_path / "logs"
    run_codecarbon(logs, """
        tracker.start()
        busy(1.0)
        tracker.stop()
    """, **options)
    import_logs([logs], tmp_path / "pkg")
    report, ctx = audit_log(tmp_path / "pkg")
    return report, ctx, ctx.components[ctx.components["component"] == "ram"].iloc[0]


def test_a_pue_multiplies_codecarbons_power_and_energy_and_its_models_are_still_named(tmp_path):
    """CodeCarbon 3 multiplies each component's power and energy by `pue`: the RAM's model is
    named with the PUE divided out, and energy over the window still matches the power."""
    report, ctx, ram = audited_second(tmp_path, pue=1.5)
    assert ctx.rows.iloc[0]["pue"] == 1.5
    assert ram["status"] == "modelled" and "x PUE 1.5" in ram["how"], ram["how"]
    assert report.finding("S5.cc-power-duration").status != "fail"


def test_process_mode_ram_is_the_dimm_models_floor_a_constant(tmp_path):
    """In process mode CodeCarbon 3 models the process's memory with its DIMM model, whose floor
    (10 W on x86, 3 W on ARM) a small process gets: a modelled constant, so its energy is held
    to power over CodeCarbon's window."""
    report, ctx, ram = audited_second(tmp_path, tracking_mode="process")
    assert ctx.rows.iloc[0]["tracking_mode"] == "process"
    assert ram["status"] == "modelled" and ram["constant"], ram["how"]
    assert "at its floor" in ram["how"]
    assert report.finding("S5.cc-power-duration").status == "pass"
