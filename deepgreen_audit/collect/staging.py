"""One run from its work folder to the campaign tree: what every executor shares.

The local executor calls `run_one` for each run in turn; a Slurm array task
calls the same function on its compute node.  Either way the run is its own
process (`runner`), writes under `OUT/work/<run_id>/`, and is moved into
`OUT/runs/<campaign>/<run_id>/` by one rename only when its process exited 0
and its directory reads back in the package format; anything else moves the
work folder to `OUT/failed/<run_id>.<attempt>/` with `failure.json`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.collect.outfolder import check_out_folder
from deepgreen_audit.collect.plan import Job, Plan
from deepgreen_audit.collect.runner import FAILURE_FILE
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic, paths
from deepgreen_audit.package.rundirs import MANIFEST, flatten_tables

LOG_FILE = "run.log"
FAILURE_RECORD = "failure.json"


def refuse_unusable_out(plan: Plan, out: Path, synthetic: bool = False) -> str | None:
    """Refuse, before anything is written, an --out that is not a folder collect may fill:
    a file (the plan itself, say), the plan's data folder or a folder inside it, whose
    prepared datasets the runs read, or a folder that holds anything but this campaign
    (`outfolder.check_out_folder`); returns its note on a changed plan file, if any."""
    paths.check_output_name(out)
    if out.exists() and not out.is_dir():
        raise UserError("is not a folder; --out names the folder collect writes runs/, failed/ "
                        "and work/ into", path=out, code="output-overlaps-input")
    target = Path(os.path.realpath(out))
    for data_dir in sorted({Path(os.path.realpath(j.data_dir)) for j in plan.jobs}):
        if target == data_dir or data_dir in target.parents:
            raise UserError(f"lies in the plan's data folder {data_dir}, which the runs read: "
                            "choose another --out", path=out, code="output-overlaps-input")
    return check_out_folder(plan, out, synthetic)


@dataclass(frozen=True)
class Outcome:
    """How one run ended: `reason` is None when it completed; `where` is its folder now."""

    run_id: str
    reason: str | None
    elapsed_s: float
    where: Path
    #: the reason without the stack's own last line: what repeats when runs fail alike
    cause: str | None = None


def final_dir(out: Path, job: Job) -> Path:
    return Path(out) / "runs" / job.campaign / job.run_id


def work_dir(out: Path, job: Job) -> Path:
    return Path(out) / "work" / job.run_id


def is_completed(out: Path, job: Job) -> bool:
    return (final_dir(out, job) / MANIFEST).is_file()


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def move_to_failed(out: Path, run_id: str, work: Path, info: dict) -> Path:
    """Keep a failed run's folder (created empty if the run left none) with its failure.json."""
    failed_root = Path(out) / "failed"
    failed_root.mkdir(parents=True, exist_ok=True)
    attempt = 1 + sum(1 for p in failed_root.iterdir() if p.name.rsplit(".", 1)[0] == run_id)
    target = failed_root / f"{run_id}.{attempt}"
    work.mkdir(parents=True, exist_ok=True)
    atomic.write_text(work / FAILURE_RECORD, json.dumps(info, indent=2) + "\n")
    os.replace(work, target)
    return target


def failure_reason(returncode: int | None, work: Path, timed_out: bool, timeout_s: float) -> str:
    """Why the run failed, in the runner's words (failure.txt) or the process's fate."""
    if timed_out:
        return f"killed after the plan's run_timeout_s ({timeout_s:g} s)"
    if returncode is not None and returncode < 0:
        return f"the run's process was killed by {signal.Signals(-returncode).name}"
    note = work / FAILURE_FILE
    if note.is_file():
        return note.read_text(encoding="utf-8").strip()
    return f"the run's process exited with status {returncode}"


def stack_last_line(work: Path, run_id: str) -> str | None:
    """The last line the run's programs wrote to its log other than the runner's own summary
    (`run ID: failed: ...`): usually the stack's own error, which the harness only knows as
    "client disconnected without BYE"."""
    log = work / LOG_FILE
    if not log.is_file():
        return None
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip() and not line.startswith(f"run {run_id}: ")]
    return lines[-1][:300] if lines else None


def fresh_work_dir(out: Path, job: Job) -> Path:
    """The run's empty work folder; one left by an interrupted collect is kept as failed."""
    work = work_dir(out, job)
    if work.exists():
        move_to_failed(out, job.run_id, work, {"run_id": job.run_id, "status": "failed",
                                               "reason": "an earlier collect was interrupted during this run"})
    work.mkdir(parents=True)
    return work


def run_one(plan: Plan, job: Job, out: Path, allow_missing_counters: bool,
            slurm_job: str | None = None) -> Outcome:
    """Run one job in its own process and settle it: renamed into runs/ or kept in failed/.
    `slurm_job`: the array task running it (recorded in the run and in its failure record)."""
    out = Path(out)
    work = fresh_work_dir(out, job)
    t0 = time.monotonic()
    timed_out = False
    command = plan.runner_command(job, work, allow_missing_counters)
    if slurm_job:
        command += ["--slurm-job", slurm_job]
    with open(work / LOG_FILE, "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=plan.run_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            returncode, timed_out = proc.wait(), True
    elapsed = time.monotonic() - t0
    reason = None
    if returncode == 0:
        try:
            flatten_tables(work / "tree")
        except UserError as exc:
            reason = f"its run directory does not read back: {exc}"
    else:
        reason = failure_reason(returncode, work, timed_out, plan.run_timeout_s)
    cause = reason
    last = stack_last_line(work, job.run_id) if reason is not None else None
    if last and reason is not None and last not in reason:
        reason = f"{reason}; its log ends: {last}"
    if reason is None:
        final = final_dir(out, job)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / "tree" / job.campaign / job.run_id, final)
        shutil.rmtree(work)
        return Outcome(job.run_id, None, elapsed, final)
    where = move_to_failed(out, job.run_id, work, {
        "run_id": job.run_id, "status": "failed", "reason": reason, "exit_status": returncode,
        "elapsed_s": round(elapsed, 3), "ended_at_utc": utc_now(), "cause": cause,
        **({"slurm_job": slurm_job} if slurm_job else {})})
    return Outcome(job.run_id, reason, elapsed, where, cause)
