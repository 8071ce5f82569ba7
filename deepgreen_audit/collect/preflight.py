"""`deepgreen preflight`: can every job of the plan run on this host?

A registry of small checks, each with a stable id and a one-line message:
the interpreter, CodeCarbon (version and pinned file), each counter, and for
each stack of the plan that it is defined, importable or built, and that the
data of every dataset it runs on is present (the stack's own `check(job)`,
called in a separate process as the run will be).
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
               powercap_root=None) -> list[Check]:
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
    first_jobs = {}
    for job in plan.jobs:
        first_jobs.setdefault((job.ecosystem, job.dataset), job)
    for (eco, dataset), job in sorted(first_jobs.items()):
        check_id = f"stack.{eco}.{dataset}"
        stack = plan.stacks.get(eco)
        if stack is None:
            checks.append(Check(check_id, "fail", f"no [stacks.{eco}] entry in {plan.path}"))
        elif stack.kind == "external":
            exe = shutil.which(stack.command[0]) or stack.command[0]
            ok = Path(exe).is_file() and os.access(exe, os.X_OK)
            checks.append(Check(check_id, "ok" if ok else "fail",
                                f"{exe} is {'built' if ok else 'missing or not executable: build the stack'}"))
        else:
            proc = subprocess.run([sys.executable, "-c", _CHECK_STACK, str(plan.path), job.run_id],
                                  capture_output=True, text=True, timeout=300)
            lines = proc.stderr.strip().splitlines()
            checks.append(Check(check_id, "ok" if proc.returncode == 0 else "fail",
                                f"{stack.program} imports; data present" if proc.returncode == 0
                                else (lines[-1] if lines else f"exit status {proc.returncode}")))
    return checks


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.id) for c in checks)
    return "\n".join(f"  {c.status.upper():4}  {c.id:{width}}  {c.message}" for c in checks)
