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

from deepgreen_audit.codecarbon import hardware
from deepgreen_audit.codecarbon.audit import audit_log
from deepgreen_audit.codecarbon.importer import import_logs

pytest.importorskip("codecarbon")

TASKS = ("load", "train", "eval")


def run_codecarbon(out: Path, body: str, check: bool = True, **options) -> None:
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
    subprocess.run([sys.executable, "-c", script], check=check, timeout=120, capture_output=True)


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


#: appended to a body: writes the mode of the tracker's CPU (`cpu_load`, `intel_rapl`, ...)
CPU_MODE = """
from codecarbon.external.hardware import CPU
with open({mode_file!r}, "w") as f:
    f.write(next(h for h in tracker._hardware if isinstance(h, CPU))._mode)
"""


def test_without_a_counter_a_busy_and_an_idle_machine_are_the_load_models_bounds(tmp_path):
    """Where CodeCarbon 3 finds no counter it falls back to its load model (its CPU's `_mode`
    says which, read here from the tracker itself).  With a TDP it guessed (a CPU not in its
    table) a run keeping every logical CPU busy sits at the model's ceiling and an idle one at
    its floor (on an otherwise idle host): the audit names both modelled, from energy over
    duration, whatever the power column (3.x's unweighted mean of its readings) says; with a
    counter they are measured."""
    logs, mode_file = tmp_path / "logs", tmp_path / "cpu-mode"
    run_codecarbon(logs, textwrap.dedent("""
        import multiprocessing, os
        tracker.start()
        workers = [multiprocessing.Process(target=busy, args=(2.5,)) for _ in range(os.cpu_count())]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        tracker.stop()
        idle = OfflineEmissionsTracker(country_iso_code="FRA", output_dir=tracker._output_dir,
                                       log_level="error", measure_power_secs=1)
        idle.start()
        time.sleep(2.0)
        idle.stop()
    """) + CPU_MODE.format(mode_file=str(mode_file)))
    import_logs([logs], tmp_path / "pkg")
    report, ctx = audit_log(tmp_path / "pkg")
    cpu = ctx.components[ctx.components["component"] == "cpu"]
    row = ctx.rows.iloc[0]
    guessed = hardware.guessed_tdp(row["cpu_model"], row["cpu_count"])
    if mode_file.read_text() != "cpu_load":
        assert set(cpu["status"]) <= {"measured", "measured or modelled"}, cpu["how"].tolist()
    elif guessed is None:
        # a TDP from CodeCarbon's table: a counter's power limit can reach it, no decision
        assert set(cpu["status"]) <= {"modelled", "measured or modelled"}, cpu["how"].tolist()
    else:
        busy_run, idle_run = cpu.iloc[0], cpu.iloc[1]
        assert busy_run["status"] == "modelled" and "at its ceiling" in busy_run["how"], busy_run["how"]
        # the model reads the whole machine's load: idle here, this run sits at its floor, or
        # higher where other processes keep the host busy; either way it is the model
        assert idle_run["status"] == "modelled" and "load model" in idle_run["how"], idle_run["how"]
        # nothing on this host was measured, and the verdict says so in full
        assert {r["verdict"] for r in report.stats["verdicts"]["runs"]} == {"modelled"}
        assert report.finding("S5.cc-cpu-power").status == "warn"


def test_periodic_flushes_and_a_run_killed_after_them(tmp_path):
    """`tracker.flush()` writes a cumulative row and keeps measuring; a run killed after its
    flushes leaves them only.  Both runs import whole, their flushes are not disorder, and no
    word claims that the killed run's last row is a stop."""
    logs = tmp_path / "logs"
    for kill in (False, True):
        run_codecarbon(logs, f"""
            import os, signal
            tracker.start()
            for _ in range(3):
                busy(0.3)
                tracker.flush()
            if {kill!r}:
                os.kill(os.getpid(), signal.SIGKILL)
            busy(0.2)
            tracker.stop()
        """, check=not kill)
    rows = (logs / "emissions.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 + 3       # header, 3 flushes + stop, 3 flushes
    import_logs([logs], tmp_path / "pkg")
    report, ctx = audit_log(tmp_path / "pkg")
    assert ctx.rows["run_key"].nunique() == 2 and len(ctx.rows) == 7
    assert int(ctx.rows["final_row"].sum()) == 2
    finding = report.finding("S5.cc-rows")
    assert finding.status == "pass", finding.message
    assert "5 row(s) are cumulative flushes" in finding.message
    assert "the log cannot tell which" in finding.message and "final row" not in finding.message
    assert report.finding("integrity.rows-read").status == "pass"
    assert len(report.stats["verdicts"]["runs"]) == 2
