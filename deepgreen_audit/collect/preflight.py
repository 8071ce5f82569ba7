"""`deepgreen preflight`: can every job of the plan run on this host?

A registry of small checks, each with a stable id and a one-line message:
the interpreter, CodeCarbon (version and pinned file), each counter, the
pinned framework versions against what is installed or built, and for each
stack of the plan that it is defined, importable or built (with the tool that
runs it), and that the data of every dataset it runs on is present (a Python
stack's own `check(job)`, called in a separate process as the run will be; for
a built stack, the prepared store and weight export).  A failing line names
its fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.collect.plan import Plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.spec import load_spec


@dataclass(frozen=True)
class Check:
    id: str
    status: str  # "ok", "warn" (allowed gap), "fail"
    message: str


_CHECK_STACK = """
import sys
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.collect.runner import load_stack_module
from deepgreen_audit.errors import UserError
plan = load_plan(sys.argv[1])
job = plan.job(sys.argv[2])
try:
    load_stack_module(plan.stacks[job.ecosystem]).check(job)
except UserError as exc:  # a user-facing problem: its message, not a traceback
    sys.exit(str(exc))
"""


def run_checks(plan: Plan, allow_missing_counters: bool = False, pynvml_module=None,
               powercap_root=None, allow_unpinned: bool = False) -> list[Check]:
    from deepgreen_audit.collect.codecarbon_tracker import load_config, require_codecarbon
    from deepgreen_audit.collect.instruments import probe
    from deepgreen_audit.collect.rapl import POWERCAP_ROOT

    checks = [Check("interpreter", "ok" if sys.version_info >= (3, 11) else "fail",
                    f"{sys.executable} (Python {sys.version.split()[0]}; 3.11 or newer needed)")]
    try:
        version = require_codecarbon()
        config = load_config()
        checks.append(Check("codecarbon", "ok", f"CodeCarbon {version}, pinned file {config.path} "
                                                f"(sha256 {config.sha256[:12]}...)"))
    except UserError as exc:
        checks.append(Check("codecarbon", "fail", str(exc)))
    nvml, _, missing = probe(pynvml_module=pynvml_module, powercap_root=powercap_root or POWERCAP_ROOT)
    if nvml is not None:
        nvml.close()
    for counter in ("NVML", "RAPL"):
        if counter in missing:
            checks.append(Check(f"counter.{counter.lower()}", "warn" if allow_missing_counters else "fail",
                                missing[counter] + ("" if allow_missing_counters else
                                                    " (--allow-missing-counters records empty cells instead)")))
        else:
            checks.append(Check(f"counter.{counter.lower()}", "ok", "readable"))
    checks += version_checks(plan, allow_unpinned)
    first_jobs = {}
    for job in plan.jobs:
        first_jobs.setdefault((job.ecosystem, job.dataset), job)
    for (eco, dataset), job in sorted(first_jobs.items()):
        checks.append(stack_check(plan, eco, job, f"stack.{eco}.{dataset}"))
    return checks


def version_checks(plan: Plan, allow_unpinned: bool = False) -> list[Check]:
    """Each framework the plan's stacks use at its pinned version (S4_backend.pinned_versions);
    `allow_unpinned` makes another version a warning (a machine image whose versions cannot be
    chosen: the runs record what they found and the audit's S4.pinned-versions says so)."""
    from deepgreen_audit import pins

    frameworks = load_spec()["S4_backend"]["frameworks"]
    used = {eco: frameworks[eco] for eco in {j.ecosystem for j in plan.jobs} if eco in frameworks}
    pinned, installed = pins.pinned(), pins.installed()
    checks = []
    for eco, framework in sorted(used.items()):
        want, have = pinned.get(framework), installed.get(framework)
        if have is None:
            continue            # not installed or not built: the stack's own check says so
        ok = have == want
        checks.append(Check(f"version.{framework}", "ok" if ok else "warn" if allow_unpinned else "fail",
                            f"{framework} {have}" + ("" if ok else f", the specification pins {want}: runs would "
                                                                   f"fail S4.pinned-versions (bash scripts/setup.sh "
                                                                   f"installs the pins)")))
    return checks


def stack_check(plan: Plan, eco: str, job, check_id: str) -> Check:
    from deepgreen_audit.stacks import native
    from deepgreen_audit.stacks.weights import Export, weights_dir

    stack = plan.stacks.get(eco)
    if stack is None:
        why = f": {native.UNAVAILABLE[eco]}" if eco in native.UNAVAILABLE else ""
        return Check(check_id, "fail", f"no [stacks.{eco}] entry in {plan.path}{why}")
    if stack.kind == "python":
        proc = subprocess.run([sys.executable, "-c", _CHECK_STACK, str(plan.path), job.run_id],
                              capture_output=True, text=True, timeout=300)
        lines = proc.stderr.strip().splitlines()
        return Check(check_id, "ok" if proc.returncode == 0 else "fail",
                     f"{stack.program} imports; data present" if proc.returncode == 0
                     else (lines[-1] if lines else f"exit status {proc.returncode}"))
    exe = shutil.which(stack.command[0]) or stack.command[0]
    built = native.NATIVE_STACKS.get(eco)
    if built is not None:
        missing = built.missing_tools(built.runtime_tools)
        if missing:
            return Check(check_id, "fail", f"{', '.join(missing)} is not on PATH ({native.TOOL_HINTS[eco]})")
        if not built.product_path.is_file():
            return Check(check_id, "fail", f"{built.product_path} is not built: {built.fix()}")
        stale = built.stale_inputs()
        if stale:
            return Check(check_id, "fail", f"{built.product_path} is older than {stale[0]}: {built.fix()}")
    if not (Path(exe).is_file() and os.access(exe, os.X_OK)):
        return Check(check_id, "fail", f"{exe} is missing or not executable: build the stack")
    store = Path(job.data_dir) / job.dataset
    if not (store / "manifest.json").is_file() and job.dataset != "digits":
        return Check(check_id, "fail", f"{store}: the {job.dataset} store is missing; convert it with "
                                       f"'deepgreen data convert {job.dataset} ...'")
    export = Export.at(weights_dir(job.data_dir), job.architecture, job.classes, job.seed)
    absent = [p for p in (store / "manifest.json", export.path, export.torchscript_path) if not p.is_file()]
    if absent:
        return Check(check_id, "fail", f"{absent[0]} is missing: run 'deepgreen data prepare --plan {plan.path}'")
    return Check(check_id, "ok", f"{exe} is built; data and weights prepared")


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.id) for c in checks)
    return "\n".join(f"  {c.status.upper():4}  {c.id:{width}}  {c.message}" for c in checks)
