"""The Slurm executor behind `deepgreen collect --executor slurm`: one array task per run.

The plan's runs not yet completed under OUT are submitted as a job array
(`sbatch --array`), each task on an exclusive allocation (a whole node, and
`--gres` where the plan asks for GPUs), each running `task` below on its
compute node: the same runner and the same staging (`staging.run_one`:
work folder, atomic rename into `runs/`, `failed/` records) as the local
executor.  So OUT must be on a file system every node sees (the Slurm
preflight's probe job checks it).

Kept beside the runs, under OUT/slurm/: `<job>.sbatch` (the batch script as
submitted) and `<job>.json` (its runs, task by task, and whether they have been
settled).  Settling an ended task reads Slurm's account of it
(`slurm_accounting`): a task that ended without recording its run (cancelled,
timed out, node failure) is recorded failed with Slurm's state and reason, so
the next collect submits it again; a completed run gets Slurm's whole-run
ConsumedEnergy (or why it has none) in its manifest.  A run's repetition round
goes to the node the plan's [hosts] replicate_nodes assign (one array per node).
Once `max_consecutive_failures` tasks in a row (in the order they are settled) failed for
the same reason, the queued tasks of every array are cancelled (`scancel --state=PENDING`)
and the array's record says why (`stopped`): a broken stack would fail them all alike.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.collect import slurm_accounting
from deepgreen_audit.collect.disk import refuse_unless_room, run_dirs_item
from deepgreen_audit.collect.outfolder import claim_out_folder
from deepgreen_audit.collect.plan import Job, Plan, load_plan
from deepgreen_audit.collect.record import record_slurm_energy
from deepgreen_audit.collect.staging import (
    FAILURE_RECORD,
    final_dir,
    is_completed,
    move_to_failed,
    refuse_unusable_out,
    run_one,
    utc_now,
    work_dir,
)
from deepgreen_audit.device.errors import MAX_CONSECUTIVE_FAILURES
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic
from deepgreen_audit.package.rundirs import MANIFEST

SLURM_DIR = "slurm"
#: added to the plan's run_timeout_s for the default --time: start-up, staging, settling
TIME_MARGIN_S = 600
EXIT_RUN_FAILED = 3
#: the outcome of a task cancelled before it started, its array stopped: "not started: <why>"
NOT_STARTED = "not started"


@dataclass(frozen=True)
class SlurmOptions:
    """What `sbatch` is told beyond the array: None leaves the cluster's default."""

    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None     # sbatch --time; default: the plan's run_timeout_s + margin
    gres: str | None = None           # default: gpu:<hosts.gpus_per_run> when the plan asks for GPUs


@dataclass(frozen=True)
class Ending:
    """One task settled, in the order it was settled: `cause` is None when its run completed,
    else why it failed without the stack's own last line (what repeats when runs fail alike)."""

    run_id: str
    cause: str | None


@dataclass
class SlurmSummary:
    submitted: dict[str, list[str]] = field(default_factory=dict)   # array job -> its runs
    completed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    in_flight: list[str] = field(default_factory=list)
    #: runs whose queued task was cancelled when the campaign stopped
    not_started: list[str] = field(default_factory=list)
    #: the runs that completed or failed, in the order they were settled
    endings: list[Ending] = field(default_factory=list)
    #: why the campaign stopped (consecutive runs failing alike), or None
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed and not self.in_flight


def require_slurm() -> None:
    if shutil.which("sbatch") is None:
        raise UserError("sbatch is not on PATH: the Slurm executor runs where Slurm's client "
                        "commands are (a login node); on Debian: apt-get install slurm-client",
                        code="missing-input")


def _time_limit(plan: Plan, options: SlurmOptions) -> str:
    if options.time_limit:
        return options.time_limit
    return str(int(-(-(plan.run_timeout_s + TIME_MARGIN_S) // 60)))      # minutes, rounded up


def _gres(plan: Plan, options: SlurmOptions) -> str | None:
    gpus = int(plan.hosts.get("gpus_per_run", 0))
    return options.gres or (f"gpu:{gpus}" if gpus else None)


def task_command(plan: Plan, out: Path, allow_missing_counters: bool,
                 synthetic_reason: str | None) -> list[str]:
    """What each array task runs (the run id follows from the task's index)."""
    cmd = [sys.executable, "-m", "deepgreen_audit.collect.slurm", "task", "--plan", str(plan.path.resolve()),
           "--out", str(Path(out).resolve())]
    cmd += ["--allow-missing-counters"] if allow_missing_counters else []
    return cmd + (["--synthetic", synthetic_reason] if synthetic_reason else [])


def batch_script(plan: Plan, out: Path, run_ids: list[str], options: SlurmOptions, *,
                 allow_missing_counters: bool = False, synthetic_reason: str | None = None,
                 node: str | None = None) -> str:
    """The sbatch script of one array: one task per run id, in the plan's order."""
    out = Path(out).resolve()
    directives = [f"--job-name=deepgreen-{plan.campaign}", f"--array=0-{len(run_ids) - 1}",
                  "--nodes=1", "--ntasks=1", "--exclusive", f"--time={_time_limit(plan, options)}",
                  f"--output={out / SLURM_DIR / 'logs' / '%A_%a.out'}", f"--chdir={Path.cwd()}"]
    directives += [f"--partition={options.partition}"] if options.partition else []
    directives += [f"--account={options.account}"] if options.account else []
    gres = _gres(plan, options)
    directives += [f"--gres={gres}"] if gres else []
    directives += [f"--nodelist={node}"] if node else []
    lines = ["#!/bin/bash",
             f"# DeepGreen Audit: {len(run_ids)} run(s) of campaign {plan.campaign} ({plan.path}),",
             "# one array task per run, each on a whole node; written by deepgreen collect --executor slurm.",
             *(f"#SBATCH {d}" for d in directives), "set -euo pipefail"]
    if os.environ.get("PYTHONPATH"):
        lines.append(f"export PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}")
    lines += ["RUNS=(" + " ".join(shlex.quote(r) for r in run_ids) + ")",
              'exec ' + shlex.join(task_command(plan, out, allow_missing_counters, synthetic_reason))
              + ' --run-id "${RUNS[$SLURM_ARRAY_TASK_ID]}"']
    return "\n".join(lines) + "\n"


def _records(out: Path) -> list[tuple[Path, dict]]:
    folder = Path(out) / SLURM_DIR
    if not folder.is_dir():
        return []
    records = [(p, json.loads(p.read_text(encoding="utf-8"))) for p in folder.glob("*.json")
               if slurm_accounting.valid_job_id(p.stem)]
    return sorted(records, key=lambda item: int(item[0].stem))


def _recorded_failure(out: Path, run_id: str, task_job: str) -> tuple[str, str] | None:
    """The reason and cause the task itself recorded for its run's failure (None: it recorded
    none)."""
    for folder in (Path(out) / "failed").glob(f"{run_id}.*"):
        record = folder / FAILURE_RECORD
        info = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
        if info.get("slurm_job") == task_job:
            reason = info.get("reason", "failed")
            return reason, info.get("cause") or reason
    return None


def _settle_task(plan: Plan, out: Path, job: Job, record: slurm_accounting.TaskRecord,
                 energy_note: str | None) -> tuple[str, str] | None:
    """Settle one ended task; returns why its run failed and the cause (None: it completed)."""
    if is_completed(out, job):
        run_dir = final_dir(out, job)
        manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))["run"]
        if (manifest.get("slurm_job_id") == record.job_id
                and manifest.get("slurm_energy_missing_reason") == slurm_accounting.ENERGY_NOT_READ_YET):
            energy = slurm_accounting.consumed_energy(record.consumed_energy_raw, energy_note)
            record_slurm_energy(run_dir, energy.energy_j, energy.missing_reason)
        return None
    recorded = _recorded_failure(out, job.run_id, record.job_id)
    if recorded is not None:
        return recorded
    reason = record.describe()
    move_to_failed(out, job.run_id, work_dir(out, job), {
        "run_id": job.run_id, "status": "failed", "reason": reason, "cause": record.cause(),
        "slurm_job": record.job_id, "slurm_state": record.state_text, "slurm_reason": record.reason,
        "ended_at_utc": utc_now()})
    return reason, record.cause()


def _never_started(out: Path, job: Job, index: int, record: slurm_accounting.TaskRecord | None,
                   submission: dict) -> bool:
    """A task of a stopped array that Slurm cancelled before its run began: listed CANCELLED
    (sacct) or no more listed (scontrol drops the cancelled queued tasks of an array), and
    neither a run, a work folder nor a failure record of it."""
    return (bool(submission.get("stopped")) and (record is None or record.state == "CANCELLED")
            and not is_completed(out, job) and not work_dir(out, job).exists()
            and _recorded_failure(out, job.run_id, f"{submission['job_id']}_{index}") is None)


def _outcome_state(outcome: str) -> str:
    if outcome == "completed":
        return "done"
    return NOT_STARTED if outcome.startswith(NOT_STARTED) else "failed"


def settle(plan: Plan, out: Path, watched: set[str] | None = None) -> tuple[dict[str, int], SlurmSummary]:
    """Settle the ended tasks of every unsettled array under OUT.  Returns the counts by state of
    the arrays in `watched` (None: the unsettled ones), and the runs settled now or in flight."""
    summary = SlurmSummary()
    counts = {"submitted": 0, "pending": 0, "running": 0, "done": 0, "failed": 0, NOT_STARTED: 0}
    jobs = {job.run_id: job for job in plan.jobs}
    for path, submission in _records(out):
        counted = submission["job_id"] in watched if watched is not None else not submission["settled"]
        tasks: dict
        energy_note: str | None
        if submission["settled"]:
            tasks, energy_note, age_s = {}, None, 0.0
        else:
            tasks, energy_note = slurm_accounting.read_array(submission["job_id"])
            age_s = time.time() - _dt.datetime.fromisoformat(submission["submitted_at_utc"]).timestamp()
        open_tasks = []
        for index, run_id in enumerate(submission["runs"]):
            outcome = submission["outcomes"].get(str(index))
            record = tasks.get(index)
            if outcome is None and _never_started(out, jobs[run_id], index, record, submission):
                summary.not_started.append(run_id)
                outcome = submission["outcomes"][str(index)] = f"{NOT_STARTED}: {submission['stopped']}"
            if outcome is None and record is None and age_s > slurm_accounting.FORGET_AFTER_S:
                record = slurm_accounting.forgotten(index, submission["job_id"])
            if outcome is None and record is not None and record.ended:
                outcome = submission["outcomes"][str(index)] = _settle(
                    plan, out, jobs[run_id], record, energy_note, summary)
            if outcome is None:
                open_tasks.append(run_id)
                state = "running" if record and record.state in ("RUNNING", "COMPLETING", "CONFIGURING") \
                    else "pending"
            else:
                state = _outcome_state(outcome)
            if counted:
                counts["submitted"] += 1
                counts[state] += 1
        summary.in_flight += open_tasks
        if not submission["settled"]:
            submission["settled"] = not open_tasks
            atomic.write_text(path, json.dumps(submission, indent=2) + "\n")
    return counts, summary


def _settle(plan: Plan, out: Path, job: Job, record: slurm_accounting.TaskRecord,
            energy_note: str | None, summary: SlurmSummary) -> str:
    """Settle one ended task into `summary`; returns its outcome for the array's record."""
    failure = _settle_task(plan, out, job, record, energy_note)
    summary.endings.append(Ending(job.run_id, failure[1] if failure else None))
    if failure is None:
        summary.completed.append(job.run_id)
        return "completed"
    summary.failed[job.run_id] = failure[0]
    return failure[0]


@dataclass
class FailureStreak:
    """The causes of the latest runs that failed alike, one after another in the order their
    tasks were settled; `tripped` once `limit` of them (0: never) were seen."""

    limit: int
    causes: list[str] = field(default_factory=list)
    last_failed: str | None = None
    tripped: bool = False

    def add(self, endings: list[Ending]) -> bool:
        """Count `endings`; True when the streak reached its limit now or before."""
        for ending in endings:
            if ending.cause is None:
                self.causes = []
                continue
            same = self.causes and self.causes[-1] == ending.cause
            self.causes = (self.causes if same else []) + [ending.cause]
            self.last_failed = ending.run_id
            self.tripped = self.tripped or bool(self.limit) and len(self.causes) >= self.limit
        return self.tripped

    def why(self, out: Path) -> str:
        return (f"stopped after {len(self.causes)} consecutive runs failed alike ({self.causes[-1]}): "
                "the queued tasks were cancelled (scancel --state=PENDING), tasks already running "
                f"end on their own. Fix the cause (the last failed run: {Path(out) / 'failed'}/"
                f"{self.last_failed}.*), then run the same command again")


def stop_arrays(out: Path, why: str) -> list[str]:
    """Cancel the queued tasks of every unsettled array under OUT and record why in each
    array's record; returns the array jobs told."""
    stopped = []
    for path, submission in _records(out):
        if submission["settled"] or submission.get("stopped"):
            continue
        proc = subprocess.run(["scancel", "--state=PENDING", submission["job_id"]],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise UserError(f"scancel refused to stop array job {submission['job_id']}: "
                            f"{proc.stderr.strip() or proc.stdout.strip()}", path=path, code="slurm-error")
        submission["stopped"] = why
        atomic.write_text(path, json.dumps(submission, indent=2) + "\n")
        stopped.append(submission["job_id"])
    return stopped


def _sbatch(script_path: Path) -> str:
    proc = subprocess.run(["sbatch", "--parsable", str(script_path)], capture_output=True, text=True)
    job_id = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not slurm_accounting.valid_job_id(job_id):
        raise UserError(f"sbatch refused the array: {proc.stderr.strip() or proc.stdout.strip()}",
                        path=script_path, code="slurm-error")
    return job_id


def _arrays(plan: Plan, jobs: list[Job]) -> dict[str | None, list[str]]:
    """Run ids by the node the declared host design assigns (None: any node), in plan order."""
    arrays: dict[str | None, list[str]] = {}
    for job in jobs:
        arrays.setdefault(plan.node_of(job), []).append(job.run_id)
    return arrays


def submit(plan: Plan, out: Path, options: SlurmOptions, *, in_flight=(), allow_missing_counters: bool = False,
           synthetic_reason: str | None = None, dry_run: bool = False,
           print_script=None) -> dict[str, list[str]]:
    """Submit the runs neither completed nor `in_flight`; {array job: its runs} ({} if none).
    `dry_run` prints the scripts (through `print_script`) and submits nothing."""
    out = Path(out)
    refuse_unusable_out(plan, out, synthetic_reason is not None)
    todo = [job for job in plan.jobs if not is_completed(out, job) and job.run_id not in in_flight]
    if todo and not dry_run:
        refuse_unless_room([run_dirs_item(plan, out)], plan)
        claim_out_folder(plan, out, synthetic_reason is not None)
    submitted = {}
    for node, run_ids in _arrays(plan, todo).items():
        script = batch_script(plan, out, run_ids, options, allow_missing_counters=allow_missing_counters,
                              synthetic_reason=synthetic_reason, node=node)
        if dry_run:
            print_script(script)
            continue
        folder = out / SLURM_DIR
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        staged = folder / f"submitting-{uuid.uuid4().hex}.sbatch"
        atomic.write_text(staged, script)
        job_id = _sbatch(staged)
        os.replace(staged, folder / f"{job_id}.sbatch")
        atomic.write_text(folder / f"{job_id}.json", json.dumps(
            {"job_id": job_id, "submitted_at_utc": utc_now(), "node": node, "runs": run_ids,
             "outcomes": {}, "settled": False}, indent=2) + "\n")
        submitted[job_id] = run_ids
    return submitted


def collect_slurm(plan: Plan, out: Path, options: SlurmOptions, *, allow_missing_counters: bool = False,
                  synthetic_reason: str | None = None, wait: bool = True, poll_s: float = 2.0,
                  progress=None, max_consecutive_failures: int = MAX_CONSECUTIVE_FAILURES) -> SlurmSummary:
    """Submit what is left of the plan and, with `wait`, settle every task as it ends.
    `progress(counts)` is called whenever the counts change.  Once `max_consecutive_failures`
    settled runs in a row failed alike (0: never), the queued tasks are cancelled and
    `summary.stopped` says why; tasks that ended since an earlier collect count first, and when
    they trip it nothing is submitted."""
    require_slurm()
    out = Path(out)
    refuse_unusable_out(plan, out, synthetic_reason is not None)
    watched = {record["job_id"] for _, record in _records(out) if not record["settled"]}
    _, before = settle(plan, out)              # what ended since the last look: failed runs go again
    streak = FailureStreak(max_consecutive_failures)
    skipped = [job.run_id for job in plan.jobs if is_completed(out, job)]
    summary = SlurmSummary(skipped=skipped)
    if streak.add(before.endings):
        summary.stopped = streak.why(out)
        stop_arrays(out, summary.stopped)
    else:
        summary.submitted = submit(plan, out, options, in_flight=before.in_flight,
                                   allow_missing_counters=allow_missing_counters,
                                   synthetic_reason=synthetic_reason)
    watched |= set(summary.submitted)
    last = None
    while True:
        counts, settled = settle(plan, out, watched)
        summary.completed += settled.completed
        summary.failed.update(settled.failed)
        summary.not_started += settled.not_started
        summary.in_flight = settled.in_flight
        if streak.add(settled.endings) and summary.stopped is None:
            summary.stopped = streak.why(out)
            stop_arrays(out, summary.stopped)
        if progress and counts != last:
            progress(counts)
            last = counts
        if not wait or not settled.in_flight:
            return summary
        time.sleep(poll_s)


def preflight_checks(plan: Plan, out: Path, options: SlurmOptions, *, allow_missing_counters: bool = False,
                     allow_unpinned: bool = False):
    """The Slurm preflight: a tiny exclusive probe job runs this plan's preflight on a compute
    node and writes it under OUT; reading it back here proves OUT is shared, and its lines are
    the node's (counters, stacks built, data), not this login node's."""
    from deepgreen_audit.collect.preflight import SUITE
    from deepgreen_audit.report import Finding, Report

    report = Report(str(plan.path), SUITE, notes=[f"{len(plan.jobs)} runs, on a Slurm compute node"])
    if shutil.which("sbatch") is None:
        report.findings.append(Finding(id="slurm.sbatch", status="fail", section="slurm",
                                       message="sbatch is not on PATH (Debian: apt-get install slurm-client)"))
        return report
    out = Path(out).resolve()
    folder = out / SLURM_DIR / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    written = folder / f"{token}.json"
    cmd = [sys.executable, "-m", "deepgreen_audit.collect.slurm", "probe", "--plan", str(plan.path.resolve()),
           "--report", str(written)]
    cmd += ["--allow-missing-counters"] if allow_missing_counters else []
    cmd += ["--allow-unpinned"] if allow_unpinned else []
    directives = ["--job-name=deepgreen-probe", "--nodes=1", "--ntasks=1", "--exclusive", "--time=15",
                  f"--output={folder / (token + '.out')}", f"--chdir={Path.cwd()}"]
    directives += [f"--partition={options.partition}"] if options.partition else []
    directives += [f"--account={options.account}"] if options.account else []
    gres = _gres(plan, options)
    directives += [f"--gres={gres}"] if gres else []
    script = folder / f"{token}.sbatch"
    env_line = [f"export PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}"] if os.environ.get("PYTHONPATH") else []
    atomic.write_text(script, "\n".join(["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), *env_line,
                                         "exec " + shlex.join(cmd)]) + "\n")
    proc = subprocess.run(["sbatch", "--wait", "--parsable", str(script)], capture_output=True, text=True)
    job_id = proc.stdout.strip().split(";")[0]
    if not written.is_file():
        why = proc.stderr.strip().splitlines()[-1:] or [f"job {job_id} wrote nothing"]
        report.findings.append(Finding(
            id="slurm.shared-output", status="fail", section="slurm",
            message=f"the probe job {job_id} could not write {written} ({why[0]}): OUT must be on a "
                    f"file system the compute nodes see (its log: {folder / (token + '.out')})"))
        return report
    found = json.loads(written.read_text(encoding="utf-8"))
    report.findings.append(Finding(id="slurm.shared-output", status="pass", section="slurm",
                                   message=f"probe job {job_id} on {found['host']} wrote {written}"))
    report.findings += [Finding(**{**f, "id": f"node.{f['id']}", "message": f"on {found['host']}: {f['message']}"})
                        for f in found["findings"]]
    return report


# ------------------------------------------------------------------ on the compute node


def run_task(args) -> int:
    """One array task: the shared staging of one run, on the node Slurm gave it."""
    from deepgreen_audit.collect.driver import check_host, ensure_campaign_metadata

    out = Path(args.out)
    plan = load_plan(Path(args.plan))
    job = plan.job(args.run_id)
    if is_completed(out, job):       # a requeued task whose run was already recorded
        return 0
    task_job = slurm_accounting.task_id_of_environment()
    try:
        host = check_host(args.allow_missing_counters, plan.device)
    except UserError as exc:          # this node breaks the contract: the run fails, saying why
        move_to_failed(out, job.run_id, work_dir(out, job), {
            "run_id": job.run_id, "status": "failed", "reason": f"on {os.uname().nodename}: {exc}",
            "slurm_job": task_job, "ended_at_utc": utc_now()})
        return EXIT_RUN_FAILED
    ensure_campaign_metadata(plan, out, host.missing, host.gpu_names, args.synthetic)
    outcome = run_one(plan, job, out, args.allow_missing_counters, slurm_job=task_job)
    print(f"{job.run_id}: " + ("completed" if outcome.reason is None else f"FAILED: {outcome.reason}")
          + f" in {outcome.elapsed_s:.1f} s ({outcome.where})", flush=True)
    return 0 if outcome.reason is None else EXIT_RUN_FAILED


def run_probe(args) -> int:
    """The preflight's probe job: this node's own preflight, written where the submitter reads it."""
    import platform

    from deepgreen_audit.collect.preflight import run_checks

    plan = load_plan(Path(args.plan))
    report = run_checks(plan, allow_missing_counters=args.allow_missing_counters,
                        allow_unpinned=args.allow_unpinned)
    atomic.write_text(Path(args.report), json.dumps(
        {"host": platform.node(), **report.to_dict()}, indent=2, default=str) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deepgreen_audit.collect.slurm",
                                     description="What the Slurm executor runs on a compute node.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    task = verbs.add_parser("task", help="run one run of the plan as an array task")
    task.add_argument("--plan", required=True)
    task.add_argument("--out", required=True)
    task.add_argument("--run-id", required=True)
    task.add_argument("--allow-missing-counters", action="store_true")
    task.add_argument("--synthetic", metavar="REASON")
    probe = verbs.add_parser("probe", help="the Slurm preflight's probe: this node's checks")
    probe.add_argument("--plan", required=True)
    probe.add_argument("--report", required=True)
    probe.add_argument("--allow-missing-counters", action="store_true")
    probe.add_argument("--allow-unpinned", action="store_true")
    args = parser.parse_args(argv)
    try:
        return run_task(args) if args.verb == "task" else run_probe(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
