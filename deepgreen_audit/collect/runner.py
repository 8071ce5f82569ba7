"""One run, in its own process: `python -m deepgreen_audit.collect.runner --plan P --run-id R --work W`.

It opens the instruments, starts the 1 Hz sampler, runs the stack (a Python
program imported here, or an external executable served over the line
protocol), and writes the run directory under `W/tree/<campaign>/<run_id>/`.
The driver moves that directory into the campaign tree only after this
process exited 0 and the directory reads back; anything else is a failed
run.  Exit codes: 0 completed, 3 the run failed (reason on stderr and in
`W/failure.txt`), 2 a user error (bad plan, missing counters).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

from deepgreen_audit.collect.harness import PHASES, RUN_KEYS, Harness
from deepgreen_audit.collect.instruments import Instruments
from deepgreen_audit.collect.plan import Job, Plan, Stack, load_plan
from deepgreen_audit.collect.record import block_row, run_files
from deepgreen_audit.collect.sampler import Sampler
from deepgreen_audit.collect.slurm_accounting import ENERGY_NOT_READ_YET, LOCAL_EXECUTOR
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.rundirs import write_files
from deepgreen_audit.spec import load_spec

FAILURE_FILE = "failure.txt"
EXIT_FAILED = 3


class RunFailed(Exception):
    """The stack did not deliver a complete, well-ordered run."""


def load_stack_module(stack: Stack):
    """Import a Python stack program from its file (each stack is a plain program)."""
    program = stack.program
    if program is None or not program.is_file():
        raise RunFailed(f"stack program {program} does not exist")
    spec = importlib.util.spec_from_file_location(f"deepgreen_stack_{stack.ecosystem.replace('-', '_')}",
                                                  program)
    if spec is None or spec.loader is None:
        raise RunFailed(f"stack program {program} cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for hook in ("run", "check"):
        if not callable(getattr(module, hook, None)):
            raise RunFailed(f"stack program {stack.program} defines no {hook}() function")
    return module


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def environment_row(run_id: str, instruments: Instruments, harness: Harness) -> dict:
    nvml, rapl, cc = instruments.nvml, instruments.rapl, instruments.codecarbon
    env = {
        "run_id": run_id, "host": socket.gethostname(), "os": platform.platform(),
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
        "gpu_model": ";".join(nvml.names()) if nvml else None,
        "gpu_count": len(nvml.handles) if nvml else None,
        "gpu_driver": nvml.driver_version() if nvml else None,
        "cuda_version": harness.values.get("cuda_version") or (nvml.cuda_driver_version() if nvml else None),
        "python_version": platform.python_version(),
        "framework": harness.values.get("framework"),
        "framework_version": harness.values.get("framework_version"),
        "framework_backend": harness.values.get("framework_backend"),
        "cudnn_available": harness.values.get("cudnn_available"),
        "codecarbon_version": cc.version if cc else None,
        "codecarbon_config_sha256": cc.config.sha256 if cc else None,
        "codecarbon_tracking_mode": cc.config.tracking_mode if cc else None,
        "codecarbon_gpu_count": cc.host.gpu_count if cc else None,
        **{key: getattr(cc.host, key) if cc else None
           for key in ("ram_total_gb", "pue", "on_cloud", "cloud_provider", "cloud_region")},
        "nvml_energy_available": nvml is not None, "rapl_available": rapl is not None,
        "rapl_domains": ";".join(rapl.names) if rapl else None,
        "counters_missing_reason": instruments.counters_missing_reason,
    }
    # Off the cloud CodeCarbon names no provider or region: empty is the answer, not a gap.
    off_cloud = ("cloud_provider", "cloud_region") if env["on_cloud"] is False else ()
    empty = [k for k, v in env.items() if v is None and k != "counters_missing_reason"
             and k not in off_cloud]
    env["missing_reason"] = ("not available on this host or not reported by the stack: "
                             + ", ".join(empty)) if empty else None
    return env


def run_row(job: Job, harness: Harness, started: _dt.datetime, ended: _dt.datetime,
            slurm_job: str | None = None) -> dict:
    row = {k: getattr(job, k) for k in ("run_id", "campaign", "ecosystem", "architecture", "dataset",
                                        "repetition", "seed", "schedule_position")}
    row.update({"process_id": os.getpid(), "started_at_utc": started, "ended_at_utc": ended,
                "status": "completed", "epochs": job.epochs, "slurm_job_id": slurm_job,
                "slurm_energy_missing_reason": ENERGY_NOT_READ_YET if slurm_job else LOCAL_EXECUTOR})
    for key in RUN_KEYS:
        if key != "epochs":
            row[key] = harness.values.get(key)
    empty = [k for k in RUN_KEYS if row.get(k) is None]
    row["missing_reason"] = f"not reported by the stack: {', '.join(empty)}" if empty else None
    return row


def run_external(stack: Stack, job: Job, harness: Harness, timeout_s: float) -> None:
    from deepgreen_audit.collect.protocol import HarnessServer

    server = HarnessServer(harness, hello=job.protocol_params(), session_timeout_s=timeout_s).start()
    env = dict(os.environ, DEEPGREEN_HARNESS_PORT=str(server.port))
    try:
        proc = subprocess.run(list(stack.command), env=env, timeout=timeout_s)
    except FileNotFoundError:
        raise RunFailed(f"stack command {stack.command[0]!r} not found (is the stack built?)") from None
    failure = server.join(timeout=10)
    if proc.returncode != 0:
        raise RunFailed(f"stack command exited with status {proc.returncode}"
                        + (f"; {failure}" if failure else ""))
    if failure:
        raise RunFailed(failure)


def execute(plan: Plan, job: Job, work: Path, allow_missing_counters: bool,
            slurm_job: str | None = None) -> Path:
    """Run one job; returns the run directory written under work/tree/.  `slurm_job`: the
    Slurm job (array task) running it, whose whole-run energy is read once the job has ended."""
    stack = plan.stacks.get(job.ecosystem)
    if stack is None:
        raise RunFailed(f"the plan defines no stack for {job.ecosystem} ([stacks.{job.ecosystem}])")
    t0 = time.monotonic()
    started = _dt.datetime.now(_dt.UTC)
    instruments = Instruments.open(allow_missing_counters=allow_missing_counters, device=plan.device)
    rate_hz = float(load_spec()["S5_measurement"]["sampler_rate_hz"])
    sampler = Sampler(instruments.nvml, instruments.rapl, 1.0 / rate_hz, t0=t0).start()
    try:
        if stack.kind == "python":
            module = load_stack_module(stack)
            harness = Harness(instruments, sync=getattr(module, "sync", None))
            module.check(job)
            module.run(harness, job)
        else:
            harness = Harness(instruments)
            run_external(stack, job, harness, plan.run_timeout_s)
    finally:
        samples = sampler.stop()
    ended = _dt.datetime.now(_dt.UTC)
    expected = job.epochs * len(PHASES)
    if harness.open_block or len(harness.blocks) != expected:
        raise RunFailed(f"the stack measured {len(harness.blocks)} of {expected} blocks"
                        + (f"; epoch {harness.open_block[0]} {harness.open_block[1]} left open"
                           if harness.open_block else ""))
    rapl_max = instruments.rapl.max_energy_range_uj if instruments.rapl else None
    blocks = [block_row(b, job.run_id, rapl_max, instruments.boundary, instruments.energy_missing_reason)
              for b in harness.blocks]
    files = run_files(run_row(job, harness, started, ended, slurm_job),
                      environment_row(job.run_id, instruments, harness), blocks, samples)
    target = work / "tree" / job.campaign / job.run_id
    target.mkdir(parents=True)              # a fresh folder; the caller stages it into place
    write_files(target, files)
    instruments.close()
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deepgreen_audit.collect.runner",
                                     description="Run one job of a campaign plan in this process.")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--work", required=True, help="empty folder for this run's files")
    parser.add_argument("--allow-missing-counters", action="store_true")
    parser.add_argument("--slurm-job", metavar="ID", help="the Slurm job (<array job>_<task>) running this run")
    args = parser.parse_args(argv)
    work = Path(args.work)
    try:
        plan = load_plan(Path(args.plan))
        execute(plan, plan.job(args.run_id), work, args.allow_missing_counters, args.slurm_job)
    except UserError as exc:
        print(f"run {args.run_id}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # any stack failure fails the run, with its reason kept
        reason = f"{type(exc).__name__}: {exc}"
        work.mkdir(parents=True, exist_ok=True)
        (work / FAILURE_FILE).write_text(reason + "\n", encoding="utf-8")
        print(f"run {args.run_id}: failed: {reason}", file=sys.stderr)
        if not isinstance(exc, RunFailed):
            import traceback
            traceback.print_exc()
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
