"""The campaign driver behind `deepgreen collect`.

Output folder layout (only `runs/` is a run tree; flatten that)::

    OUT/runs/package.json              package-level metadata of the campaign
    OUT/runs/<campaign>/<run_id>/      completed runs, each moved in by one rename
    OUT/failed/<run_id>.<attempt>/     failed runs: failure.json, the run's log, partial files
    OUT/work/<run_id>/                 the run in progress (never read by flatten)

Each run is its own process (`runner`).  A run counts as completed only when
its process exited 0 and its run directory reads back in the package format;
then it is renamed into `runs/`.  Otherwise its work folder is renamed into
`failed/`.  So `runs/` never holds half a run, whatever kills what.  Running
collect again skips completed runs and retries the others (resume).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.collect.codecarbon_tracker import load_config, require_codecarbon
from deepgreen_audit.collect.instruments import probe, raise_missing
from deepgreen_audit.collect.plan import Plan
from deepgreen_audit.collect.runner import FAILURE_FILE
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic
from deepgreen_audit.package.rundirs import MANIFEST, PACKAGE_META, flatten_tables

LOG_FILE = "run.log"


@dataclass
class CollectSummary:
    completed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    runs_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def _failure_reason(returncode: int | None, work: Path, timed_out: bool, timeout_s: float) -> str:
    if timed_out:
        return f"killed after the plan's run_timeout_s ({timeout_s:g} s)"
    if returncode is not None and returncode < 0:
        return f"the run's process was killed by {signal.Signals(-returncode).name}"
    note = work / FAILURE_FILE
    if note.is_file():
        return note.read_text(encoding="utf-8").strip()
    tail = (work / LOG_FILE).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] \
        if (work / LOG_FILE).is_file() else []
    return f"the run's process exited with status {returncode}" + (f": {tail[0]}" if tail else "")


def _move_to_failed(out: Path, run_id: str, work: Path, info: dict) -> Path:
    failed_root = out / "failed"
    failed_root.mkdir(parents=True, exist_ok=True)
    attempt = 1 + sum(1 for p in failed_root.iterdir() if p.name.rsplit(".", 1)[0] == run_id)
    target = failed_root / f"{run_id}.{attempt}"
    work.mkdir(parents=True, exist_ok=True)
    atomic.write_text(work / "failure.json", json.dumps(info, indent=2) + "\n")
    os.replace(work, target)
    return target


def check_host(allow_missing_counters: bool) -> tuple[dict[str, str], list[str]]:
    """Refuse a host that breaks the contract; returns the counters it lacks (allowed) and the
    names of the GPUs NVML reports."""
    require_codecarbon()
    load_config()
    nvml, _, missing = probe()
    gpus = []
    if nvml is not None:
        gpus = nvml.names()
        nvml.close()
    if missing and not allow_missing_counters:
        raise_missing(missing)
    return missing, gpus


def measurement_boundary(missing: dict[str, str]) -> str:
    """What the energy columns of a campaign cover, from the counters the host lacks."""
    parts = [what for counter, what in (("NVML", "GPU boards (NVML)"), ("RAPL", "CPU packages (RAPL)"))
             if counter not in missing]
    if not parts:
        return "none: no energy counter was readable"
    unmeasured = [what for counter, what in (("NVML", "GPU boards"), ("RAPL", "CPU packages"))
                  if counter in missing]
    return " + ".join(parts) + ("" if not unmeasured else " only; not measured: " + ", ".join(unmeasured))


def campaign_metadata(plan: Plan, missing: dict[str, str], gpus: list[str],
                      synthetic_reason: str | None = None) -> dict:
    """package.json of a collected run tree: what, where, on what and within which boundary it
    was measured, and the scope the plan declares (the audit holds the campaign to it)."""
    meta = {"name": plan.campaign, "title": f"DeepGreen campaign {plan.campaign}",
            "synthetic": synthetic_reason is not None}
    if synthetic_reason is not None:
        meta["title"] = f"SYNTHETIC: {meta['title']} ({synthetic_reason})"
        meta["synthetic_reason"] = synthetic_reason
    meta["provenance"] = {"collected_by": "deepgreen collect", "plan": plan.path.name,
                          "master_seed": plan.master_seed}
    meta["measured"] = {
        "host": platform.node(), "gpus": gpus,
        "collection_started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "boundary": measurement_boundary(missing),
        "counters_missing": dict(missing)}
    if plan.scope:
        meta["scope"] = dict(plan.scope)
    return meta


def collect(plan: Plan, out: Path, *, allow_missing_counters: bool = False, progress=None,
            check=True, synthetic_reason: str | None = None) -> CollectSummary:
    """Run every job of the plan not yet completed under `out`; see the module docstring.
    `synthetic_reason` marks the package synthetic (a rehearsal on fake counters)."""
    missing, gpus = check_host(allow_missing_counters) if check else ({}, [])
    out = Path(out)
    runs_dir = out / "runs"
    summary = CollectSummary(runs_dir=runs_dir)
    meta_path = runs_dir / PACKAGE_META
    if not meta_path.exists():
        meta = campaign_metadata(plan, missing, gpus, synthetic_reason)
        atomic.write_text(meta_path, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    total = len(plan.jobs)
    for n, job in enumerate(plan.jobs, start=1):
        final = runs_dir / job.campaign / job.run_id
        if (final / MANIFEST).is_file():
            summary.skipped.append(job.run_id)
            if progress:
                progress(n, total, job.run_id, "already completed, skipped")
            continue
        work = out / "work" / job.run_id
        if work.exists():  # left by a collect that was itself interrupted
            _move_to_failed(out, job.run_id, work, {"run_id": job.run_id, "status": "failed",
                                                    "reason": "an earlier collect was interrupted during this run"})
        work.mkdir(parents=True)
        if progress:
            progress(n, total, job.run_id, f"running (seed {job.seed}, repetition {job.repetition})")
        t0 = time.monotonic()
        timed_out = False
        with open(work / LOG_FILE, "wb") as log:
            proc = subprocess.Popen(plan.runner_command(job, work, allow_missing_counters),
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                returncode = proc.wait(timeout=plan.run_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                returncode, timed_out = proc.wait(), True
        elapsed = time.monotonic() - t0
        staged = work / "tree" / job.campaign / job.run_id
        reason = None
        if returncode == 0:
            try:
                flatten_tables(work / "tree")
            except UserError as exc:
                reason = f"its run directory does not read back: {exc}"
        else:
            reason = _failure_reason(returncode, work, timed_out, plan.run_timeout_s)
        if reason is None:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, final)
            shutil.rmtree(work)
            summary.completed.append(job.run_id)
            if progress:
                progress(n, total, job.run_id, f"completed in {elapsed:.1f} s")
            continue
        where = _move_to_failed(out, job.run_id, work, {
            "run_id": job.run_id, "status": "failed", "reason": reason, "exit_status": returncode,
            "elapsed_s": round(elapsed, 3),
            "ended_at_utc": _dt.datetime.now(_dt.timezone.utc).isoformat()})
        summary.failed[job.run_id] = reason
        if progress:
            progress(n, total, job.run_id, f"FAILED: {reason} (kept in {where})")
    return summary
