"""The campaign driver behind `deepgreen collect`.

Output folder layout (only `runs/` is a run tree; flatten that)::

    OUT/campaign.json                  the campaign and plan this folder collects (outfolder.py)
    OUT/runs/package.json              package-level metadata of the campaign
    OUT/runs/<campaign>/<run_id>/      completed runs, each moved in by one rename
    OUT/failed/<run_id>.<attempt>/     failed runs: failure.json, the run's log, partial files
    OUT/work/<run_id>/                 the run in progress (never read by flatten)

Each run is its own process (`runner`), staged by `staging.run_one` (shared with
the Slurm executor, `slurm`).  A run counts as completed only when
its process exited 0 and its run directory reads back in the package format;
then it is renamed into `runs/`.  Otherwise its work folder is renamed into
`failed/`.  So `runs/` never holds half a run, whatever kills what.  Running
collect again skips completed runs and retries the others (resume); a folder that holds anything
but this campaign is refused before any work (`outfolder`), and so is an OUT whose file system
cannot hold the run directories still to write (`disk`).  Before the first run, every
stack with runs to do is asked which device it would use: a stack that would run elsewhere than
the plan declares (a CPU fallback in a cuda campaign) refuses the whole collect.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.batchnorm import accuracy_caveat
from deepgreen_audit.collect.codecarbon_tracker import load_config, require_codecarbon
from deepgreen_audit.collect.disk import refuse_unless_room, run_dirs_item
from deepgreen_audit.collect.instruments import missing_in_boundary, probe, raise_missing
from deepgreen_audit.collect.measuring import Measuring
from deepgreen_audit.collect.outfolder import claim_out_folder, plan_record, read_identity
from deepgreen_audit.collect.plan import Plan
from deepgreen_audit.collect.preflight import refuse_other_devices
from deepgreen_audit.collect.staging import is_completed, refuse_unusable_out, run_one
from deepgreen_audit.device.errors import MAX_CONSECUTIVE_FAILURES
from deepgreen_audit.device.rapl import redirected_reason
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic
from deepgreen_audit.package.checksums import sha256_file
from deepgreen_audit.package.rundirs import PACKAGE_META
from deepgreen_audit.spec import COUNTERS, boundary_counters, load_spec, scoped, spec_path


@dataclass
class CollectSummary:
    completed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    runs_dir: Path | None = None
    #: why the campaign stopped before its last run (consecutive runs failing alike), or None
    stopped: str | None = None
    #: why the session ended before the plan's last run as asked (--max-runs), or None
    paused: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class HostCheck:
    """What `check_host` found on a host it accepted."""

    #: {counter ("NVML", "RAPL"): why it is missing}: the counters of the campaign's boundary
    #: it lacks (allowed); a counter outside the boundary (NVML on a cpu campaign) is not missing
    missing: dict[str, str]
    #: the names of the GPUs NVML reports
    gpu_names: list[str]
    #: what the campaign measures on this host, and what it does not
    measuring: Measuring


def check_host(allow_missing_counters: bool, device: str = "cuda") -> HostCheck:
    """Refuse a host that lacks a counter of a `device` campaign's boundary (unless allowed);
    returns the boundary counters it lacks (allowed) and the names of the GPUs NVML reports."""
    require_codecarbon()
    load_config()
    found = probe()
    nvml, missing = found.nvml, missing_in_boundary(found.missing, device)
    gpus = []
    if nvml is not None:
        gpus = nvml.names()
        nvml.close()
    if missing and not allow_missing_counters:
        raise_missing(missing)
    return HostCheck(missing=missing, gpu_names=gpus, measuring=Measuring.of(found, missing))


def measurement_boundary(missing: dict[str, str], device: str = "cuda") -> str:
    """What energy_j of a `device` campaign covers, from the boundary counters the host lacks:
    `GPU boards (NVML) + CPU packages (RAPL)` on cuda, `CPU packages (RAPL)` on cpu (where the
    GPU boards are outside it, read when a GPU is there and never added)."""
    boundary = boundary_counters(device)
    read = [c.label for c in boundary if c.name not in missing]
    unmeasured = [c.covers for c in boundary if c.name in missing]
    outside = [c.covers for c in COUNTERS.values() if c not in boundary]
    if not read:
        text = "none: not measured: " + ", ".join(unmeasured)
    else:
        text = " + ".join(read) + ("" if not unmeasured else " only; not measured: " + ", ".join(unmeasured))
    return text + (f" ({', '.join(outside)} outside the boundary of a {device} campaign)" if outside else "")


def campaign_metadata(plan: Plan, missing: dict[str, str], gpus: list[str],
                      synthetic_reason: str | None = None, recorded: dict | None = None) -> dict:
    """package.json of a collected run tree: what, where, on what and within which boundary it
    was measured (and, for a scope too short for BatchNorm's running statistics, why its test
    accuracy does not measure the trained weights), and the scope the plan declares (the audit
    holds the campaign to it);
    `recorded`: the folder's campaign.json (`outfolder`), whose plan file it names.  RAPL read
    from another powercap tree than the host's (DEEPGREEN_POWERCAP_ROOT) makes the package
    synthetic: its CPU energies are not the host's."""
    synthetic_reason = synthetic_reason or redirected_reason()
    meta = {"name": plan.campaign, "title": f"DeepGreen campaign {plan.campaign}",
            "synthetic": synthetic_reason is not None}
    if synthetic_reason is not None:
        meta["title"] = f"SYNTHETIC: {meta['title']} ({synthetic_reason})"
        meta["synthetic_reason"] = synthetic_reason
    meta["provenance"] = {"collected_by": "deepgreen collect", **plan_provenance(plan, recorded),
                          "master_seed": plan.master_seed}
    measured: dict = {
        "host": platform.node(), "gpus": gpus,
        "collection_started_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "boundary": measurement_boundary(missing, plan.device),
        "counters_missing": dict(missing)}
    caveat = accuracy_caveat(scoped(load_spec(), plan.scope, plan.path))
    if caveat:
        # a scope too short for BatchNorm's running statistics: its accuracy says so beside it
        measured["accuracy_caveat"] = caveat
    meta["measured"] = measured
    if plan.scope:
        meta["scope"] = dict(plan.scope)
    if plan.hosts:
        meta["hosts"] = dict(plan.hosts)
    return meta


def plan_provenance(plan: Plan, recorded: dict | None) -> dict:
    """The provenance of the plan: the plan file the campaign started from (its path as given,
    resolved, SHA-256; campaign.json's when the folder has one, so a Slurm task on a compute
    node records the path the user gave), any changed plan file a later collect resumed it
    with (`plan_revisions`), and the SHA-256 of the specification."""
    first = recorded["plan"] if recorded and isinstance(recorded.get("plan"), dict) else plan_record(plan)
    revisions = list(recorded.get("plan_revisions") or []) if recorded else []
    return {"plan": first, **({"plan_revisions": revisions} if revisions else {}),
            "spec_sha256": sha256_file(spec_path())}


def ensure_campaign_metadata(plan: Plan, out: Path, missing: dict[str, str], gpus: list[str],
                             synthetic_reason: str | None = None) -> Path:
    """Write OUT/runs/package.json unless a first collect (or array task) already did; bring
    its plan_revisions up to campaign.json's when a later collect resumed from a changed plan."""
    meta_path = Path(out) / "runs" / PACKAGE_META
    recorded = read_identity(out)
    if not meta_path.exists():
        meta = campaign_metadata(plan, missing, gpus, synthetic_reason, recorded)
    else:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        revisions = list((recorded or {}).get("plan_revisions") or [])
        if not revisions or meta["provenance"].get("plan_revisions") == revisions:
            return meta_path
        meta["provenance"]["plan_revisions"] = revisions
    atomic.write_text(meta_path, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta_path


def refuse_missing_stores(jobs) -> None:
    """Refuse, before the first run, a campaign whose datasets are not prepared: every stack
    reads `<data_dir>/<dataset>/manifest.json` (digits is derived), so without it every run
    would fail the same way, seconds after starting."""
    missing = sorted({(j.data_dir, j.dataset) for j in jobs if j.dataset != "digits"
                      and not (Path(j.data_dir) / j.dataset / "manifest.json").is_file()})
    if missing:
        names = ", ".join(dataset for _, dataset in missing)
        raise UserError(f"the data of {names} is not prepared: convert each official archive with "
                        f"'deepgreen data convert DATASET FILE...' (see 'deepgreen preflight'), or "
                        "leave the dataset out of the plan's [scope]",
                        path=Path(missing[0][0]) / missing[0][1], code="missing-input")


def collect(plan: Plan, out: Path, *, allow_missing_counters: bool = False, progress=None,
            check=True, synthetic_reason: str | None = None,
            max_consecutive_failures: int = MAX_CONSECUTIVE_FAILURES,
            announce: Callable[[str], None] | None = None,
            max_runs: int | None = None) -> CollectSummary:
    """Run every job of the plan not yet completed under `out`; see the module docstring.
    `synthetic_reason` marks the package synthetic (a rehearsal on fake counters).  After
    `max_consecutive_failures` runs in a row failed for the same reason the campaign stops
    (`summary.stopped` says why): the rest would fail alike, hours of nothing.  `announce` is
    told, once before the first run, what is collected where, a note on a changed plan file,
    and what the campaign does not measure here; `progress`, for each run, what it measures.
    `max_runs` ends this session after that many runs were started (a calibration's points
    collected at moments of their own, collect/calibration.toml): the next collect resumes."""
    out = Path(out)
    synthetic = (synthetic_reason or redirected_reason()) is not None
    note = refuse_unusable_out(plan, out, synthetic)
    host = check_host(allow_missing_counters, plan.device) if check else None
    missing, gpus = (host.missing, host.gpu_names) if host else ({}, [])
    if check:
        todo = [j for j in plan.jobs if not is_completed(out, j)]
        refuse_missing_stores(todo)
        refuse_other_devices(plan, {j.ecosystem for j in todo})
    refuse_unless_room([run_dirs_item(plan, out)], plan)
    runs_dir = out / "runs"
    summary = CollectSummary(runs_dir=runs_dir)
    total = len(plan.jobs)
    claim_out_folder(plan, out, synthetic)
    ensure_campaign_metadata(plan, out, missing, gpus, synthetic_reason)
    for line in (f"collecting {total} runs of {plan.path} into {out}", note,
                 host.measuring.not_measured() if host else None):
        if line and announce:
            announce(line)
    measuring = f"; {host.measuring.per_run()}" if host else ""
    alike: list[str | None] = []  # the causes of the latest consecutive failures
    started = 0
    for n, job in enumerate(plan.jobs, start=1):
        if is_completed(out, job):
            summary.skipped.append(job.run_id)
            if progress:
                progress(n, total, job.run_id, "already completed, skipped")
            continue
        if max_runs is not None and started >= max_runs:
            summary.paused = (f"ended this session after {started} run(s), as --max-runs asked; "
                              "run the same command again to collect the next")
            break
        started += 1
        if progress:
            progress(n, total, job.run_id,
                     f"running (seed {job.seed}, repetition {job.repetition}){measuring}")
        outcome = run_one(plan, job, out, allow_missing_counters)
        if outcome.reason is None:
            alike = []
            summary.completed.append(job.run_id)
            if progress:
                progress(n, total, job.run_id, f"completed in {outcome.elapsed_s:.1f} s")
            continue
        summary.failed[job.run_id] = outcome.reason
        if progress:
            progress(n, total, job.run_id, f"FAILED: {outcome.reason} (kept in {outcome.where})")
        alike = (alike if alike and alike[-1] == outcome.cause else []) + [outcome.cause]
        if max_consecutive_failures and len(alike) >= max_consecutive_failures:
            summary.stopped = (f"stopped after {len(alike)} consecutive runs failed alike "
                               f"({outcome.cause}); {total - n} run(s) not started. Fix the cause "
                               f"(the last run's log: {outcome.where}), then run the same "
                               "command again")
            break
    return summary
