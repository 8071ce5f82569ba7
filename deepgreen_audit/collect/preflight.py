"""`deepgreen preflight`: whether every job of the plan can run on this host.

The suite `preflight` of the check registry, each check with a stable id and a one-line message:
the interpreter, CodeCarbon (version and pinned file), each counter, the
pinned framework versions against what is installed or built (in the interpreter of the stack
that uses it), the interpreter of each python stack, and for each
stack of the plan that it is defined, importable or built (with the tool that
runs it), that the data of every dataset it runs on is present (a Python
stack's own `check(job)`, called in a separate process as the run will be; for
a built stack, the prepared store and weight export), and that its framework
places the work on the plan's declared device here (`stack.device`, asked of
the stack itself through `deepgreen_audit.collect.device_probe`).  A failing
line names its fix.  `deepgreen collect` asks the same device question before
its first run (`refuse_other_devices`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from deepgreen_audit.collect.plan import Job, Plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.report import Report
from deepgreen_audit.spec import boundary_counters, dl4j_backend, load_spec
from deepgreen_audit.stacks.runtime import DeviceReport
from deepgreen_audit.suite.registry import Check, Outcome, check, registered_checks, run_check

SUITE = "preflight"


def preflight_checks() -> list[Check[Preflight]]:
    """The checks of the suite `preflight`, all of them in this module, in definition order."""
    return registered_checks(SUITE, (sys.modules[__name__],), Preflight)
#: Seconds one stack's device probe may take (it imports its framework, e.g. TensorFlow).
DEVICE_PROBE_TIMEOUT_S = 300


class DeviceMismatch(UserError):
    """A stack of the plan would place its work on another device than the plan declares."""


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


@dataclass(frozen=True)
class Preflight:
    """What a preflight check reads: the plan, the options, what the counter probe found, and
    the subject (a counter, a framework, a stack and dataset) of a check run once per subject."""

    plan: Plan
    allow_missing_counters: bool = False
    allow_unpinned: bool = False
    missing_counters: dict = field(default_factory=dict)
    subject: str | None = None

    @property
    def the_subject(self) -> str:
        """The subject of a check that runs once per subject (set by the suite's driver, once per subject)."""
        if self.subject is None:
            raise ValueError("a per-subject preflight check ran without its subject")
        return self.subject


#: Check id -> the subjects it runs once for (a check not named here runs once).
_SUBJECTS: dict[str, Callable[[Preflight], list[str]]] = {}


def preflight_check(id: str, section: str, subjects: Callable[[Preflight], list[str]] | None = None):
    """Register a check of the preflight suite, run once or once per subject."""
    def register(func):
        if subjects is not None:
            _SUBJECTS[id] = subjects
        return check(id, section, suite=SUITE)(func)
    return register


@preflight_check("host.interpreter", "host")
def interpreter(ctx: Preflight) -> Outcome:
    """The interpreter is Python 3.11 or newer."""
    message = f"{sys.executable} (Python {sys.version.split()[0]}; 3.11 or newer needed)"
    return Outcome(sys.version_info >= (3, 11), message)


@preflight_check("host.codecarbon", "host")
def codecarbon(ctx: Preflight) -> Outcome:
    """CodeCarbon 3.x is installed and the pinned collect/codecarbon.ini is there."""
    from deepgreen_audit.collect.codecarbon_tracker import load_config, require_codecarbon

    try:
        version = require_codecarbon()
        config = load_config()
    except UserError as exc:
        return Outcome.failed(str(exc))
    return Outcome.passed(f"CodeCarbon {version}, pinned file {config.path} (sha256 {config.sha256[:12]}...)")


def _boundary_counters(ctx: Preflight) -> list[str]:
    """The counters of the plan's measurement boundary, by the names the probe reports them
    under: NVML and RAPL on a cuda campaign, RAPL on a cpu one."""
    return [c.name for c in boundary_counters(ctx.plan.device)]


@preflight_check("counter.readable", "counter", subjects=_boundary_counters)
def counter_readable(ctx: Preflight) -> Outcome:
    """Each energy counter of the plan's measurement boundary (NVML for the GPU boards and RAPL
    for the CPU packages on a cuda campaign; RAPL alone on a cpu campaign, where NVML is not
    needed) is readable; --allow-missing-counters makes a missing one a warning (collect
    records empty cells)."""
    if ctx.subject not in ctx.missing_counters:
        return Outcome.passed("readable")
    if ctx.allow_missing_counters:
        return Outcome.allowed_gap(ctx.missing_counters[ctx.subject])
    return Outcome.failed(ctx.missing_counters[ctx.subject]
                          + " (--allow-missing-counters records empty cells instead)")


def _installed(ctx: Preflight, framework: str) -> str | None:
    """The version of `framework` that the plan's runs would use: asked of the interpreter of the
    python stack that runs it (its own environment on a cuda host), else of this one."""
    from deepgreen_audit import pins

    frameworks = load_spec()["S4_backend"]["frameworks"]
    for eco, stack in ctx.plan.stacks.items():
        if frameworks.get(eco) == framework and stack.kind == "python" and stack.python is not None:
            return pins.installed_in(stack.interpreter).get(framework)
    return pins.installed().get(framework)


def _frameworks_used(ctx: Preflight) -> list[str]:
    """The frameworks of the plan's stacks that are installed or built here (a stack whose
    framework is absent fails its own stack check)."""
    frameworks = load_spec()["S4_backend"]["frameworks"]
    used = {frameworks[eco] for eco in {j.ecosystem for j in ctx.plan.jobs} if eco in frameworks}
    return sorted(f for f in used if _installed(ctx, f) is not None)


@preflight_check("version.pinned", "version", subjects=_frameworks_used)
def version_pinned(ctx: Preflight) -> Outcome:
    """Each framework the plan's stacks use is at its pinned version (S4_backend.pinned_versions);
    --allow-unpinned makes another version a warning (a machine image whose versions cannot be
    chosen: the runs record what they found and the audit's S4.pinned-versions says so)."""
    from deepgreen_audit import pins

    framework = ctx.the_subject
    want, have = pins.pinned().get(framework), _installed(ctx, framework)
    if have == want:
        return Outcome.passed(f"{framework} {have}")
    message = (f"{framework} {have}, the specification pins {want}: runs would fail "
               "S4.pinned-versions (bash scripts/setup.sh installs the pins)")
    return Outcome.allowed_gap(message) if ctx.allow_unpinned else Outcome.failed(message)


def _first_jobs(plan: Plan) -> dict[str, Job]:
    """'ecosystem/dataset' -> the first job of the plan that runs it."""
    first: dict = {}
    for job in plan.jobs:
        first.setdefault(f"{job.ecosystem}/{job.dataset}", job)
    return dict(sorted(first.items()))


def _python_stacks(ctx: Preflight) -> list[str]:
    """The plan's python stacks that its runs use."""
    used = {j.ecosystem for j in ctx.plan.jobs}
    return sorted(e for e, s in ctx.plan.stacks.items() if s.kind == "python" and e in used)


@preflight_check("stack.interpreter", "stack", subjects=_python_stacks)
def stack_interpreter(ctx: Preflight) -> Outcome:
    """The interpreter a python stack's runs start in exists: the plan's `python`, else the stack's
    own environment (set-up builds one per framework on a cuda host), else this one. On a cuda
    campaign a stack without an environment of its own is a warning: one environment resolves
    one build of each CUDA library for every framework, and a framework without its GPU build
    trains on the CPU (which the audit then fails)."""
    stack = ctx.plan.stacks[ctx.the_subject]
    missing = interpreter_missing(stack)
    if missing:
        return Outcome.failed(missing)
    if stack.python is not None:
        return Outcome.passed(f"runs in {stack.python} ({stack.python_from})")
    message = f"runs in {sys.executable} (this interpreter)"
    if ctx.plan.device == "cuda":
        from deepgreen_audit.collect.environments import SETUP_COMMAND, env_for

        env = env_for(stack.ecosystem)
        if env is not None:
            return Outcome.allowed_gap(f"{message}, not in an environment of its own: {SETUP_COMMAND} "
                                       f"on a cuda host builds {env.folder} (docs/collection.md)")
    return Outcome.passed(message)


def interpreter_missing(stack) -> str | None:
    """Why a python stack's interpreter cannot start (naming the stack and the set-up command),
    or None."""
    from deepgreen_audit.collect.environments import SETUP_COMMAND

    python = stack.python
    if python is None or (python.is_file() and os.access(python, os.X_OK)):
        return None
    return (f"{stack.ecosystem}: its interpreter {python} ({stack.python_from}) is missing: "
            f"{SETUP_COMMAND} builds it on a cuda host (DEEPGREEN_ACCELERATOR=cuda on any host)")


@preflight_check("stack.ready", "stack", subjects=lambda ctx: list(_first_jobs(ctx.plan)))
def stack_ready(ctx: Preflight) -> Outcome:
    """The stack is defined in the plan, importable or built (with the tool that runs it), and
    the data of the dataset it runs on is present (a Python stack's own `check(job)`, called
    in a separate process as the run will be; for a built stack, the prepared store and the
    weight export). A failure names its fix."""
    job = _first_jobs(ctx.plan)[ctx.the_subject]
    return stack_check(ctx.plan, job.ecosystem, job)


@dataclass(frozen=True)
class DeviceAnswer:
    """What one stack said about its device: the report (None when it could not say) or why not."""

    ecosystem: str
    report: DeviceReport | None
    error: str | None = None

    def mismatch(self, declared: str) -> str | None:
        """The refusal line when the stack answered with another device than `declared`."""
        if self.report is None or self.report.device == declared:
            return None
        return (f"{self.ecosystem} would run on {self.report.device} "
                f"({self.report.device_name}), the plan declares {declared}")


def ask_device(plan: Plan, ecosystem: str) -> DeviceAnswer:
    """The device the plan's stack for `ecosystem` would use here, asked in a separate process
    as the run will be (its framework loads its own CUDA libraries)."""
    cmd = [sys.executable, "-m", "deepgreen_audit.collect.device_probe", "--plan", str(plan.path),
           "--ecosystem", ecosystem]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DEVICE_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return DeviceAnswer(ecosystem, None, f"the device probe took longer than {DEVICE_PROBE_TIMEOUT_S} s")
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return DeviceAnswer(ecosystem, None, lines[-1] if lines else f"exit status {proc.returncode}")
    try:
        return DeviceAnswer(ecosystem, DeviceReport(**json.loads(proc.stdout.strip().splitlines()[-1])))
    except (ValueError, IndexError, TypeError):   # DeviceReportError is a ValueError
        return DeviceAnswer(ecosystem, None, f"the device probe printed no report: {proc.stdout[-200:]!r}")


@preflight_check("stack.device", "stack",
                 subjects=lambda ctx: sorted({j.ecosystem for j in ctx.plan.jobs} & set(ctx.plan.stacks)))
def stack_device(ctx: Preflight) -> Outcome:
    """The stack's framework places its work on the plan's declared device on this host, as the
    stack itself says (a Python stack's device() hook, a built stack's `device` subcommand, in a
    separate process): a cuda campaign where a framework would fall back to the CPU is refused
    before its first run, not found by the audit afterwards."""
    answer = ask_device(ctx.plan, ctx.the_subject)
    if answer.report is None:
        return Outcome.failed(f"{ctx.subject} cannot say which device it would use: {answer.error}")
    mismatch = answer.mismatch(ctx.plan.device)
    if mismatch:
        return Outcome.failed(mismatch + (" (its framework sees no GPU here)" if ctx.plan.device == "cuda"
                                          else " (declare device = \"cuda\" or hide the GPU)"))
    r = answer.report
    return Outcome.passed(f"{r.device} ({r.device_name}; cuDNN {'on' if r.cudnn_enabled else 'off'}, "
                          f"TF32 {'on' if r.tf32_enabled else 'off'})")


def refuse_other_devices(plan: Plan, ecosystems) -> None:
    """Raise DeviceMismatch, naming each stack, when a stack of `ecosystems` says it would place
    its work on another device than the plan declares (collect's guard before its first run).
    A stack that cannot answer is left to its run (and to preflight's stack.device)."""
    refused = [line for eco in sorted(set(ecosystems) & set(plan.stacks))
               if (line := ask_device(plan, eco).mismatch(plan.device))]
    if refused:
        raise DeviceMismatch("; ".join(refused) + " (deepgreen preflight says more)", path=plan.path,
                             code="device-mismatch")


def run_checks(plan: Plan, allow_missing_counters: bool = False, pynvml_module=None,
               powercap_root=None, allow_unpinned: bool = False) -> Report:
    """Every preflight check of `plan` on this host, as a report."""
    from deepgreen_audit.collect.instruments import probe

    found = probe(pynvml_module=pynvml_module, powercap_root=powercap_root)
    nvml, missing = found.nvml, found.missing
    if nvml is not None:
        nvml.close()
    ctx = Preflight(plan, allow_missing_counters, allow_unpinned, missing)
    report = Report(str(plan.path), SUITE, notes=[f"{len(plan.jobs)} runs"])
    for c in preflight_checks():
        subjects = _SUBJECTS[c.id](ctx) if c.id in _SUBJECTS else [None]
        for subject in subjects:
            report.findings.append(run_check(c, replace(ctx, subject=subject), resource=subject))
    return report


def stack_check(plan: Plan, eco: str, job) -> Outcome:
    from deepgreen_audit.stacks import native
    from deepgreen_audit.stacks.weights import Export, weights_dir

    stack = plan.stacks.get(eco)
    if stack is None:
        if eco in native.UNAVAILABLE:
            return Outcome.failed(native.UNAVAILABLE[eco])
        return Outcome.failed(f"no [stacks.{eco}] entry in {plan.path}")
    if stack.kind == "python":
        missing = interpreter_missing(stack)
        if missing:
            return Outcome.failed(missing)
        proc = subprocess.run([stack.interpreter, "-c", _CHECK_STACK, str(plan.path), job.run_id],
                              capture_output=True, text=True, timeout=300)
        lines = proc.stderr.strip().splitlines()
        return Outcome(proc.returncode == 0, f"{stack.program} imports; data present" if proc.returncode == 0
                       else (lines[-1] if lines else f"exit status {proc.returncode}"))
    exe = shutil.which(stack.command[0]) or stack.command[0]
    built = native.NATIVE_STACKS.get(eco)
    if built is not None:
        missing_tools = built.missing_tools(built.runtime_tools)
        if missing_tools:
            return Outcome.failed(f"{', '.join(missing_tools)} is not on PATH ({native.TOOL_HINTS[eco]})")
        if not built.product_path.is_file():
            return Outcome.failed(f"{built.product_path} is not built: {built.fix()}")
        stale = built.stale_inputs()
        if stale:
            return Outcome.failed(f"{built.product_path} is older than {stale[0]}: {built.fix()}")
        if eco == "java-dl4j":      # DL4J's backend is a build choice (S4.dl4j-backend)
            held, wanted = native.built_backend(built), dl4j_backend(plan.device)
            if held != wanted:
                return Outcome.failed(f"{built.product_path} holds {held or 'no recorded backend'}, the "
                                      f"plan's device {plan.device} needs {wanted}: "
                                      f"run 'deepgreen build java-dl4j --backend {plan.device}'")
    if not (Path(exe).is_file() and os.access(exe, os.X_OK)):
        return Outcome.failed(f"{exe} is missing or not executable: build the stack")
    store = Path(job.data_dir) / job.dataset
    if not (store / "manifest.json").is_file() and job.dataset != "digits":
        return Outcome.failed(f"{store}: the {job.dataset} store is missing; convert it with "
                                       f"'deepgreen data convert {job.dataset} ...'")
    export = Export.at(weights_dir(job.data_dir), job.architecture, job.classes, job.seed)
    absent = [p for p in (store / "manifest.json", export.path, export.torchscript_path) if not p.is_file()]
    if absent:
        return Outcome.failed(f"{absent[0]} is missing: run 'deepgreen data prepare --plan {plan.path}'")
    return Outcome.passed(f"{exe} is built; data and weights prepared")
