"""Whose folder collect's --out is: collect fills a new or empty folder, or one its own campaign
started, and nothing else.

The first collect of a folder writes `OUT/campaign.json` before its first run (or its first
Slurm submission): the campaign's name, the SHA-256 of the runs its plan expands to
(`schedule_sha256`: each run's id, seed, schedule position, epochs, recipe and batch limits,
the device and the host design), the plan's scope and master seed, whether the campaign is
marked synthetic, and the plan file (its path as given, resolved, and its SHA-256).  A later
collect of that folder goes on only with the same campaign:

* a folder that holds another campaign, a package, a run tree or files deepgreen did not
  write is refused, in one line naming what it holds;
* the same campaign name with other runs (a changed scope, master seed, host design, or
  specification) is refused, naming what changed: a changed design is another campaign;
* the same runs from a changed plan file (a stack's interpreter fixed, a longer timeout) are
  resumed, with a note; the plan file is added to `plan_revisions`, which the campaign's
  package.json copies into the descriptor's provenance (`driver.ensure_campaign_metadata`).

A folder collected before campaign.json existed (OUT/runs/package.json, no campaign.json) is
taken as its campaign's when its package.json names the same campaign, scope, master seed and
synthetic mark (its runs cannot be compared: the first collect did not record them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from deepgreen_audit.collect.plan import Plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic, paths
from deepgreen_audit.package.checksums import sha256_bytes, sha256_file
from deepgreen_audit.package.outputs import COLLECT_MARK, RUN_TREE_MARK, holdings, is_package_folder

IDENTITY_FILE = COLLECT_MARK


def plan_record(plan: Plan) -> dict:
    """The plan file a collect ran from: its path as given, resolved, and its SHA-256."""
    return {"path": str(plan.path), "resolved": os.path.realpath(plan.path),
            "sha256": sha256_file(plan.path)}


def schedule_sha256(plan: Plan) -> str:
    """The SHA-256 of what the plan runs: each run's id, seed, position, epochs, recipe and
    batch limits, the device and the host design (not how each stack is started)."""
    runs = [{"run_id": j.run_id, "seed": j.seed, "schedule_position": j.schedule_position,
             "epochs": j.epochs, "recipe": j.recipe, "max_train_batches": j.max_train_batches,
             "max_eval_batches": j.max_eval_batches} for j in plan.jobs]
    text = json.dumps({"device": plan.device, "hosts": plan.hosts, "runs": runs}, sort_keys=True)
    return sha256_bytes(text.encode("utf-8"))


def identity(plan: Plan, synthetic: bool) -> dict:
    """campaign.json of a folder this plan's first collect fills."""
    return {"written_by": "deepgreen collect", "campaign": plan.campaign, "runs": len(plan.jobs),
            "schedule_sha256": schedule_sha256(plan), "master_seed": plan.master_seed,
            "scope": plan.scope, "hosts": plan.hosts, "synthetic": synthetic,
            "plan": plan_record(plan), "plan_revisions": []}


def read_identity(out: Path) -> dict | None:
    """The folder's campaign.json, or None where there is none."""
    path = Path(out) / IDENTITY_FILE
    if not os.path.lexists(path):
        return None
    try:
        found = json.loads(paths.read_bytes(path))
    except ValueError:
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("campaign"), str) \
            or not isinstance(found.get("plan"), dict):
        raise UserError("is not the record of a campaign that 'deepgreen collect' writes; "
                        "choose another --out", path=path, code="output-exists")
    return found


def check_out_folder(plan: Plan, out: Path, synthetic: bool) -> str | None:
    """Refuse an --out that holds anything but this campaign (see the module docstring);
    returns a note when this collect resumes the campaign from a changed plan file."""
    out = Path(out)
    if not os.path.lexists(out):
        return None
    recorded = read_identity(out)
    if recorded is None:
        return _check_unmarked(plan, out, synthetic)
    if recorded["campaign"] != plan.campaign:
        raise UserError(f"holds campaign {recorded['campaign']!r} (collected from "
                        f"{_plan_path(recorded)}); this plan is campaign {plan.campaign!r}: "
                        "choose another --out", path=out, code="output-exists")
    changed = _design_changes(recorded, plan, synthetic)
    if changed:
        raise UserError(f"holds campaign {plan.campaign!r} started from a plan whose runs differ "
                        f"({changed}): a changed design is another campaign; collect it into "
                        "another --out, or under another campaign name", path=out,
                        code="output-exists")
    return _plan_file_note(recorded, plan)


def _plan_path(recorded: dict) -> str:
    return str(recorded["plan"].get("resolved") or recorded["plan"].get("path"))


def _design_changes(recorded: dict, plan: Plan, synthetic: bool) -> str:
    """What makes the plan's runs differ from those the folder's campaign started with."""
    changes = [f"{key} {recorded.get(key)!r}, now {now!r}" for key, now in
               (("master_seed", plan.master_seed), ("hosts", plan.hosts)) if recorded.get(key) != now]
    found = recorded.get("scope")
    scope: dict = found if isinstance(found, dict) else {}
    changes += [f"scope.{key} {scope.get(key)!r}, now {plan.scope.get(key)!r}"
                for key in sorted(set(scope) | set(plan.scope)) if scope.get(key) != plan.scope.get(key)]
    if recorded.get("synthetic") != synthetic:
        changes.append("collected with --synthetic" if recorded.get("synthetic")
                       else "collected without --synthetic")
    if not changes and recorded.get("schedule_sha256") != schedule_sha256(plan):
        changes.append("the same scope and seed, so the specification (collect/experiment.toml) "
                       "changed the recipe or the configurations")
    return "; ".join(changes)


def _plan_file_note(recorded: dict, plan: Plan) -> str | None:
    """A note when the plan file differs from every one this folder was collected from."""
    now = plan_record(plan)
    known = [recorded.get("plan")] + list(recorded.get("plan_revisions") or [])
    if any(isinstance(r, dict) and r.get("sha256") == now["sha256"] for r in known):
        return None
    return (f"note: the plan file {plan.path} differs from the one this folder's campaign "
            f"started with ({_plan_path(recorded)}, sha256 {str(recorded['plan'].get('sha256'))[:12]}"
            f", now {now['sha256'][:12]}); its runs are the same, so collect resumes, and the "
            "package's provenance records both (plan_revisions)")


def _check_unmarked(plan: Plan, out: Path, synthetic: bool) -> str | None:
    """A folder without campaign.json: new, empty, or collected before campaign.json existed
    (a symbolic link to a folder, such as one on a scratch disk, is that folder)."""
    held = holdings(Path(os.path.realpath(out)))
    meta_path = out / "runs" / RUN_TREE_MARK
    if held is None:
        return None
    if not meta_path.is_file() or is_package_folder(out):
        raise UserError(f"holds {held}; collect fills a new or empty folder, or one its own "
                        "campaign started: choose another --out", path=out, code="output-exists")
    try:
        meta = json.loads(paths.read_bytes(meta_path))
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    seed = meta.get("provenance", {}).get("master_seed") if isinstance(meta.get("provenance"), dict) else None
    found = {"campaign": meta.get("name"), "scope": meta.get("scope", {}), "master_seed": seed,
             "synthetic": meta.get("synthetic")}
    expected = {"campaign": plan.campaign, "scope": plan.scope, "master_seed": plan.master_seed,
                "synthetic": synthetic}
    differ = [f"{key} {found[key]!r}, now {expected[key]!r}" for key in found if found[key] != expected[key]]
    if differ:
        raise UserError(f"holds {held}, which is not this campaign ({'; '.join(differ)}): choose "
                        "another --out", path=out, code="output-exists")
    return (f"note: {out} was collected before collect recorded its campaign in "
            f"{IDENTITY_FILE}; its {meta_path.relative_to(out)} names this campaign, scope and "
            "master seed, so collect resumes it")


def claim_out_folder(plan: Plan, out: Path, synthetic: bool) -> None:
    """Record (once) that `out` collects this campaign; add a changed plan file to its
    `plan_revisions`.  Called after every check passed, before the first run is started."""
    path = Path(out) / IDENTITY_FILE
    recorded = read_identity(out)
    if recorded is None:
        record = identity(plan, synthetic)
    elif _plan_file_note(recorded, plan) is not None:
        record = dict(recorded, plan_revisions=list(recorded.get("plan_revisions") or [])
                      + [plan_record(plan)])
    else:
        return
    atomic.write_text(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
