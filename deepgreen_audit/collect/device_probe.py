"""Which device a stack of a plan would place its work on here, asked of the stack itself:
`python -m deepgreen_audit.collect.device_probe --plan P --ecosystem E` prints one JSON object
(device, device_name, cudnn_enabled, tf32_enabled).

A Python stack is imported in this process (its framework resolves its CUDA libraries as
the run's will), its precision policy set and its `device()` hook called.  A built stack is
asked through its own executable's `device` subcommand, which prints one line
``device=... device_name=... cudnn_enabled=... tf32_enabled=...`` (`DeviceReport.line`): the
same framework build the run uses answers, not a Python stand-in for it.  Preflight runs this
module in a subprocess for each stack of the plan (the check `stack.device`), so a framework
that would fall back to the CPU refuses the campaign before its first run.

Exit status: 0 with the JSON on stdout; 2 with one line on stderr when the stack cannot say.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from deepgreen_audit.collect.plan import Plan, load_plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.stacks.runtime import DeviceReport, DeviceReportError

#: Seconds a built stack's `device` subcommand may take (it loads its framework, then exits).
EXTERNAL_TIMEOUT_S = 120


class ProbeFailed(Exception):
    """The stack could not say which device it would use (not built, no hook, a bad line)."""


def external_command(command: tuple[str, ...]) -> list[str]:
    """The built stack's `device` subcommand: its executable, `device` for the run's subcommand."""
    return [command[0], "device"]


def _ask_program(stack) -> DeviceReport:
    """A Python stack's device() after its precision policy; whatever its framework raises
    (no CUDA plugin, a TPU platform) is the stack's answer that it cannot say."""
    from deepgreen_audit.collect.runner import load_stack_module

    try:
        module = load_stack_module(stack)
        if not callable(getattr(module, "device", None)):
            raise ProbeFailed(f"stack program {stack.program} defines no device() function")
        if callable(getattr(module, "set_precision_policy", None)):
            module.set_precision_policy()
        report = module.device()
    except (ProbeFailed, UserError):
        raise
    except Exception as exc:  # the framework's own failure, named in one line
        raise ProbeFailed(f"{stack.program}: {type(exc).__name__}: {exc}") from None
    if not isinstance(report, DeviceReport):
        raise ProbeFailed(f"device() of {stack.program} returned {type(report).__name__}, "
                          "not a DeviceReport")
    return report


def _ask_executable(stack) -> DeviceReport:
    """A built stack's answer to its `device` subcommand: exactly one device= line, exit 0."""
    cmd = external_command(stack.command)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=EXTERNAL_TIMEOUT_S)
    except FileNotFoundError:
        raise ProbeFailed(f"{cmd[0]} not found (is the stack built?)") from None
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"'{' '.join(cmd)}' did not answer within {EXTERNAL_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()
        raise ProbeFailed(f"'{' '.join(cmd)}' exited with status {proc.returncode}"
                          + (f": {last[-1]}" if last else ""))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("device=")]
    if len(lines) != 1:
        raise ProbeFailed(f"'{' '.join(cmd)}' printed {len(lines)} device= lines, not one")
    try:
        return DeviceReport.parse_line(lines[0])
    except DeviceReportError as exc:
        raise ProbeFailed(f"'{' '.join(cmd)}': {exc}") from None


def probe(plan: Plan, ecosystem: str) -> DeviceReport:
    """The device report of the plan's stack for `ecosystem`, asked from this process."""
    stack = plan.stacks.get(ecosystem)
    if stack is None:
        raise ProbeFailed(f"the plan defines no stack for {ecosystem} ([stacks.{ecosystem}])")
    return _ask_program(stack) if stack.kind == "python" else _ask_executable(stack)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deepgreen_audit.collect.device_probe",
                                     description="Print the device a stack of the plan would use here.")
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--ecosystem", required=True)
    args = parser.parse_args(argv)
    try:
        report = probe(load_plan(args.plan), args.ecosystem)
    except (UserError, ProbeFailed) as exc:
        print(f"{args.ecosystem}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.values(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
