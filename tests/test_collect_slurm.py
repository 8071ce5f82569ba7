"""Collection through Slurm: ConsumedEnergy parsing on recorded sacct output, the batch script,
and, against a real single-node cluster started here (tests/slurm_cluster.py), the smoke plan
through the array (equal to the local collection but for the columns that must differ), a
cancelled array task (recorded failed with Slurm's reason, resumed to completion) and the
preflight's probe job.  Without Slurm the cluster tests skip, naming the apt-get line."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import slurm_cluster
from collect_fakes import fake_stack
from deepgreen_audit.cli import main
from deepgreen_audit.collect import slurm_accounting
from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.collect.slurm import (
    Ending,
    FailureStreak,
    SlurmOptions,
    batch_script,
    collect_slurm,
    settle,
)
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.package.validate import validate

SMOKE_SCOPE = {"ecosystems": ["python-pytorch", "python-tensorflow"], "architectures": ["resnet18"],
               "datasets": ["digits"], "repetitions": 2, "epochs": 1, "max_train_batches": 1,
               "max_eval_batches": 1, "device": "cpu"}

#: Columns that must differ between a Slurm and a local collection of one plan, and why:
#: when and in which process a run ran, the job that ran it, what only a Slurm job has
#: (the reason its energy is missing differs: local executor vs no accounting), the host
#: (equal on this single-node cluster, a factor on a real one), and what is measured anew
#: each run (counter-bracketed times, CodeCarbon's readings, raw counters and energies).
#: Losses and accuracies are compared exactly: each run starts from the same seeded weight
#: export and reads one fixed batch, on the same CPU.
DIFFERING = {
    "runs": {"process_id", "started_at_utc", "ended_at_utc", "slurm_job_id",
             "slurm_consumed_energy_j", "slurm_energy_missing_reason"},
    # inside a job CodeCarbon takes the RAM size from the job's allocation (scontrol show job),
    # outside it from the host: S6.constancy flags a campaign that mixes the two executors
    "environment": {"host", "ram_total_gb"},
    "blocks": {"started_at_utc", "duration_s", "nvml_start_mj", "nvml_end_mj", "rapl_start_uj",
               "rapl_end_uj", "rapl_wraps", "gpu_energy_j", "cpu_energy_j", "energy_j",
               "codecarbon_duration_s", "codecarbon_energy_kwh", "codecarbon_cpu_energy_kwh",
               "codecarbon_gpu_energy_kwh", "codecarbon_ram_energy_kwh", "codecarbon_cpu_power_w",
               "codecarbon_gpu_power_w", "codecarbon_ram_power_w", "codecarbon_energy_j",
               "codecarbon_emissions_kg", "codecarbon_emissions_rate_kg_per_s"},
}

# ------------------------------------------------------------------ recorded sacct output

SACCT_RECORDED = """JobID|State|Reason|ExitCode|NodeList|Submit|Start|End|ConsumedEnergyRaw
4711_0|COMPLETED|None|0:0|gpu-a01|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T11:40:10|2436000
4711_1|CANCELLED by 1000|None|0:15|gpu-a02|2026-11-02T10:00:00|2026-11-02T10:00:06|2026-11-02T10:30:00|0
4711_2|TIMEOUT|TimeLimit|0:0|gpu-a03|2026-11-02T10:00:00|2026-11-02T10:00:06|2026-11-02T16:10:06|
4711_3|NODE_FAIL|NodeDown|0:0|gpu-a04|2026-11-02T10:00:00|2026-11-02T10:00:07|2026-11-02T10:05:00|18446744073709551614
4711_[4-6]|PENDING|Resources|0:0|None assigned|2026-11-02T10:00:00|Unknown|Unknown|0
4712_0|COMPLETED|None|0:0|gpu-a01|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T11:40:10|99
"""


def test_sacct_parsable2_output_gives_state_reason_and_energy():
    tasks = slurm_accounting.parse_sacct(SACCT_RECORDED, "4711")
    assert sorted(tasks) == [0, 1, 2, 3, 4, 5, 6]               # the other job's line is not ours
    assert tasks[0].state == "COMPLETED" and tasks[0].ended and tasks[0].node == "gpu-a01"
    assert slurm_accounting.consumed_energy(tasks[0].consumed_energy_raw) == \
        slurm_accounting.SlurmEnergy(energy_j=2436000.0, missing_reason=None)
    cancelled = tasks[1]
    assert cancelled.state == "CANCELLED" and cancelled.ended
    assert cancelled.describe() == ("Slurm array task 4711_1 ended CANCELLED by 1000, exit code 0:15 "
                                    "on gpu-a02")
    assert "reason: TimeLimit" in tasks[2].describe() and "reason: NodeDown" in tasks[3].describe()
    assert all(tasks[i].active and tasks[i].reason == "Resources" for i in (4, 5, 6))
    # 0 from a cluster without an energy plugin is missing, never zero energy
    energy = slurm_accounting.consumed_energy(cancelled.consumed_energy_raw)
    assert energy.energy_j is None and "no acct_gather_energy plugin" in energy.missing_reason
    assert "not zero" in energy.missing_reason
    energy = slurm_accounting.consumed_energy(tasks[2].consumed_energy_raw)
    assert energy.energy_j is None and "no ConsumedEnergy" in energy.missing_reason
    energy = slurm_accounting.consumed_energy(tasks[3].consumed_energy_raw)
    assert energy.energy_j is None and "no-value marker" in energy.missing_reason
    energy = slurm_accounting.consumed_energy(None, "the cluster keeps no job accounting")
    assert energy.energy_j is None and "no job accounting" in energy.missing_reason


def test_scontrol_output_is_read_when_there_is_no_accounting():
    shown = ("JobId=9 ArrayJobId=8 ArrayTaskId=1 JobState=CANCELLED Reason=None ExitCode=0:15 "
             "NodeList=vm\nJobId=8 ArrayJobId=8 ArrayTaskId=2-3 JobState=PENDING Reason=Priority "
             "NodeList=(null)\n")
    tasks = slurm_accounting.parse_scontrol(shown, "8")
    assert sorted(tasks) == [1, 2, 3] and tasks[1].ended and tasks[1].consumed_energy_raw is None
    assert tasks[2].active and tasks[3].reason == "Priority" and tasks[3].node is None


def test_a_task_slurm_no_longer_lists_is_settled_failed_once_old_enough(tmp_path, monkeypatch):
    """A cluster without accounting forgets finished jobs after MinJobAge: such a task has
    ended (how is unknown) and is recorded failed, not waited on for ever."""
    plan = load_plan(write_scoped_plan(tmp_path / "plan.toml", "smoke", tmp_path / "data", SMOKE_SCOPE))
    out = tmp_path / "out"
    (out / "slurm").mkdir(parents=True)
    run_ids = [j.run_id for j in plan.jobs[:2]]
    record = {"job_id": "77", "node": None, "runs": run_ids, "outcomes": {}, "settled": False}
    monkeypatch.setattr(slurm_accounting, "read_array", lambda job: ({}, "no accounting"))
    for age_s, settled in ((5, False), (slurm_accounting.FORGET_AFTER_S + 5, True)):
        submitted = time.time() - age_s
        record["submitted_at_utc"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(submitted))
        (out / "slurm" / "77.json").write_text(json.dumps(record))
        counts, summary = settle(plan, out)
        assert bool(summary.failed) == settled and len(summary.in_flight) == (0 if settled else 2)
    assert "unknown to Slurm" in summary.failed[run_ids[0]]
    assert json.loads((out / "failed" / f"{run_ids[0]}.1" / "failure.json").read_text())["slurm_job"] == "77_0"
    assert json.loads((out / "slurm" / "77.json").read_text())["settled"] is True


def test_a_streak_counts_runs_failing_alike_one_after_another():
    """Only failures alike in a row count: a completion or another cause starts it again;
    0 never stops; once reached it stays reached."""
    def fail(run_id: str, cause: str = "exit 1") -> Ending:
        return Ending(run_id, cause)

    streak = FailureStreak(2)
    assert not streak.add([fail("a"), Ending("b", None), fail("c"), fail("d", "timeout")])
    assert streak.add([fail("e", "timeout")]) and streak.last_failed == "e"
    assert streak.add([Ending("f", None)])                          # stays reached
    assert "stopped after 2 consecutive runs failed alike (timeout)" in FailureStreak(
        2, ["timeout", "timeout"], "e").why(Path("out"))
    never = FailureStreak(0)
    assert not never.add([fail(str(i)) for i in range(20)])


# ------------------------------------------------------------------ the batch script


def test_batch_script_one_exclusive_task_per_run_and_the_declared_hosts(tmp_path, capsys):
    plan = load_plan(write_scoped_plan(tmp_path / "plan.toml", "smoke", tmp_path / "data", SMOKE_SCOPE,
                                       hosts={"design": "replicates", "replicate_nodes": ["n1", "n2"],
                                              "gpus_per_run": 1}))
    script = batch_script(plan, tmp_path / "out", [j.run_id for j in plan.jobs[:2]],
                          SlurmOptions(partition="gpu", account="lab", time_limit="2:00:00"), node="n1")
    for line in ("#SBATCH --array=0-1", "#SBATCH --exclusive", "#SBATCH --gres=gpu:1",
                 "#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --time=2:00:00",
                 "#SBATCH --nodelist=n1", '--run-id "${RUNS[$SLURM_ARRAY_TASK_ID]}"'):
        assert line in script, line
    out = tmp_path / "out"
    assert main(["collect", "--plan", str(plan.path), "--out", str(out), "--executor", "slurm",
                 "--dry-run", "--gres", "gpu:2"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("#!/bin/bash") == 2                    # one array per replicate node
    assert "--nodelist=n1" in printed and "--nodelist=n2" in printed and "--gres=gpu:2" in printed
    assert not out.exists()                                      # a dry run submits and writes nothing
    assert main(["collect", "--plan", str(plan.path), "--out", str(out), "--partition", "gpu"]) == 2
    assert "--partition applies to --executor slurm only" in capsys.readouterr().err


def test_host_declarations_are_checked(tmp_path):
    from deepgreen_audit.errors import UserError

    path = write_scoped_plan(tmp_path / "plan.toml", "smoke", tmp_path / "data", SMOKE_SCOPE,
                             hosts={"replicate_nodes": ["n1"]})
    with pytest.raises(UserError) as info:
        load_plan(path)
    assert info.value.field == "hosts.replicate_nodes"


# ------------------------------------------------------------------ a real single-node cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    why = slurm_cluster.unavailable()
    if why:
        pytest.skip(why)
    running = slurm_cluster.Cluster(tmp_path_factory.mktemp("slurm")).start()
    saved = {k: os.environ.get(k) for k in running.env}
    os.environ.update(running.env)
    yield running
    running.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def smoke_plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("smoke")
    plan = load_plan(write_scoped_plan(folder / "plan.toml", "smoke", folder / "data", SMOKE_SCOPE))
    prepare_plan(plan)
    return plan


def _tables(package: Package) -> dict[str, dict[str, dict]]:
    return {name: {(r["run_id"], r.get("epoch"), r.get("phase")): r
                   for r in package.table(name).to_pylist()} for name in ("runs", "environment", "blocks")}


def test_smoke_plan_through_the_array_equals_the_local_collection(cluster, smoke_plan, tmp_path):
    out = tmp_path / "slurm"
    summary = collect_slurm(smoke_plan, out, SlurmOptions(time_limit="20"), allow_missing_counters=True,
                            poll_s=1)
    assert summary.ok and sorted(summary.completed) == sorted(j.run_id for j in smoke_plan.jobs), summary
    (job_id, run_ids), = summary.submitted.items()
    assert run_ids == [j.run_id for j in smoke_plan.jobs]
    script = (out / "slurm" / f"{job_id}.sbatch").read_text()
    assert "#SBATCH --array=0-3" in script and "#SBATCH --exclusive" in script
    flatten(out / "runs", tmp_path / "pkg-slurm")
    report = validate(tmp_path / "pkg-slurm")
    assert report.valid, report.format_text()

    local = collect(smoke_plan, tmp_path / "local", allow_missing_counters=True)
    assert local.ok, local.failed
    flatten(local.runs_dir, tmp_path / "pkg-local")
    by_slurm = _tables(Package.open(tmp_path / "pkg-slurm"))
    by_local = _tables(Package.open(tmp_path / "pkg-local"))
    for name, rows in by_slurm.items():
        assert rows.keys() == by_local[name].keys(), name
        for key, row in rows.items():
            same = {c: v for c, v in row.items() if c not in DIFFERING[name]}
            assert same == {c: v for c, v in by_local[name][key].items() if c not in DIFFERING[name]}, key
    for key, run in by_slurm["runs"].items():
        assert run["slurm_job_id"] == f"{job_id}_{run_ids.index(key[0])}"
        assert run["slurm_consumed_energy_j"] is None and "no job accounting" in run["slurm_energy_missing_reason"]
        assert by_local["runs"][key]["slurm_job_id"] is None
        assert by_local["runs"][key]["slurm_energy_missing_reason"] == slurm_accounting.LOCAL_EXECUTOR
    # settled: a second collect submits nothing and finds every run done
    again = collect_slurm(smoke_plan, out, SlurmOptions(), allow_missing_counters=True)
    assert again.submitted == {} and len(again.skipped) == 4


SLOW_STACK = fake_stack("job.repetition == 2", "time.sleep(120)   # cancelled in here")


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_scancel_of_a_task_records_it_failed_and_a_resume_completes(cluster, tmp_path, monkeypatch, capsys):
    (tmp_path / "slow_stack.py").write_text(SLOW_STACK)
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("FAKE_STACK_MARKER", str(markers))
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(f'campaign = "cancel"\nmaster_seed = 3\nrun_timeout_s = 300\n'
                         f'[stacks.python-pytorch]\nkind = "python"\nprogram = "{tmp_path / "slow_stack.py"}"\n'
                         '[scope]\necosystems = ["python-pytorch"]\narchitectures = ["resnet18"]\n'
                         'datasets = ["digits"]\nrepetitions = 2\nepochs = 1\n')
    plan = load_plan(plan_path)
    out = tmp_path / "out"
    first = collect_slurm(plan, out, SlurmOptions(time_limit="10"), allow_missing_counters=True, wait=False)
    (job_id, run_ids), = first.submitted.items()
    slow = "python-pytorch.resnet18.digits.r2"
    _wait_for(lambda: (markers / slow).exists(), 120, "the slow run to start its block")
    task = f"{job_id}_{run_ids.index(slow)}"
    subprocess.run(["scancel", task], check=True)
    _wait_for(lambda: slow in settle(plan, out)[1].failed or not (out / "work" / slow).exists(), 90,
              "Slurm to end the cancelled task")
    failed = sorted((out / "failed").glob(f"{slow}.*"))
    assert len(failed) == 1
    record = json.loads((failed[0] / "failure.json").read_text())
    assert record["slurm_job"] == task and record["slurm_state"].startswith("CANCELLED")
    assert "CANCELLED" in record["reason"] and task in record["reason"]
    assert not (out / "runs" / "cancel" / slow).exists() and not (out / "work" / slow).exists()
    pkg = flatten(out / "runs", tmp_path / "partial")            # what is there is a whole package
    assert validate(pkg).valid
    capsys.readouterr()
    assert main(["collect", "--plan", str(plan_path), "--out", str(out), "--executor", "slurm",
                 "--time", "10", "--allow-missing-counters"]) == 0       # the resume
    printed = capsys.readouterr()
    assert "1 completed, 1 already done, 0 failed, 0 still queued or running" in printed.out, printed.out
    assert "slurm: 1 submitted, 0 pending, 0 running, 1 done, 0 failed" in printed.err, printed.err
    again = json.loads(max((out / "slurm").glob("*.json"), key=lambda p: int(p.stem)).read_text())
    assert again["runs"] == [slow] and again["job_id"] != job_id and again["settled"]
    package = Package.open(flatten(out / "runs", tmp_path / "whole"))
    assert validate(tmp_path / "whole").valid and len(package.table("runs").to_pylist()) == 2


def test_slurm_preflight_probes_a_compute_node(cluster, smoke_plan, tmp_path, capsys):
    code = main(["preflight", "--plan", str(smoke_plan.path), "--executor", "slurm", "--out",
                 str(tmp_path / "out"), "--allow-missing-counters"])
    printed = capsys.readouterr().out
    assert "slurm.shared-output" in printed and f"on {cluster.node}" in printed, printed
    assert "node.counter.readable" in printed and "RAPL: " in printed
    assert "node.stack.ready" in printed and "python-pytorch/digits: " in printed
    assert code == 0, printed


FAILING_STACK = '["/bin/sh", "-c", "echo \'error: cannot open data/digits/train.npz\' >&2; exit 1"]'


def test_runs_failing_alike_stop_the_array_and_its_queued_tasks_are_cancelled(cluster, tmp_path, capsys):
    """A stack that always fails: after --max-consecutive-failures runs failed alike the queued
    tasks are cancelled (never started, no failure record), the array's record and the printed
    summary say why, and the command exits 1; the runs go again with the next collect."""
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(f'campaign = "broken"\nmaster_seed = 3\nrun_timeout_s = 60\n'
                         f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = {FAILING_STACK}\n'
                         '[scope]\necosystems = ["cpp-libtorch"]\narchitectures = ["resnet18", "vgg16"]\n'
                         'datasets = ["digits"]\nrepetitions = 4\nepochs = 1\n')
    out = tmp_path / "out"
    assert main(["collect", "--plan", str(plan_path), "--out", str(out), "--executor", "slurm",
                 "--time", "5", "--allow-missing-counters", "--max-consecutive-failures", "2"]) == 1
    printed = capsys.readouterr().out
    record = json.loads(next((out / "slurm").glob("*.json")).read_text())
    assert record["settled"] and record["stopped"].startswith("stopped after 2 consecutive runs failed alike")
    outcomes = record["outcomes"].values()
    failed = [o for o in outcomes if not o.startswith("not started")]
    not_started = [o for o in outcomes if o.startswith("not started: stopped after 2")]
    assert len(failed) + len(not_started) == 8 and 2 <= len(failed) < 8, outcomes
    assert all("its log ends: error: cannot open data/digits/train.npz" in o for o in failed)
    assert len(list((out / "failed").iterdir())) == len(failed)     # the cancelled ones never ran
    assert record["stopped"] in printed and f"{len(not_started)} run(s) not started" in printed
    assert f"{len(failed)} failed, 0 still queued or running" in printed
    # the next collect submits every run again (none completed)
    again = collect_slurm(load_plan(plan_path), out, SlurmOptions(time_limit="5"),
                          allow_missing_counters=True, wait=False, max_consecutive_failures=0)
    (_, resubmitted), = again.submitted.items()
    assert len(resubmitted) == 8
    subprocess.run(["scancel", *again.submitted], check=True)
