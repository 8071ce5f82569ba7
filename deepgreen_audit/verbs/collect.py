"""Verbs of the collection layer: plan, preflight, envs, collect (thin: parse, call, print)."""

from __future__ import annotations

import sys
from pathlib import Path

from deepgreen_audit.device.errors import ALLOW_OPTION


def _progress(n: int, total: int, run_id: str, what: str) -> None:
    print(f"  [{n}/{total}] {run_id}: {what}", file=sys.stderr, flush=True)


def _announce(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _count(n: int, noun: str) -> str:
    """'1 run', '8 runs'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def cmd_plan(args) -> int:
    from deepgreen_audit.batchnorm import accuracy_caveat
    from deepgreen_audit.collect.disk import campaign_items, format_disk
    from deepgreen_audit.collect.plan import format_schedule, load_plan
    from deepgreen_audit.spec import load_spec, scoped

    plan = load_plan(Path(args.plan) if args.plan else None)
    if args.print:
        sys.stdout.write(format_schedule(plan, Path(args.out) / "work"))
        return 0
    configs = {(j.ecosystem, j.architecture, j.dataset) for j in plan.jobs}
    reps = max(j.repetition for j in plan.jobs)
    print(f"plan {plan.path}: campaign {plan.campaign!r}, {_count(len(configs), 'configuration')} x "
          f"{_count(reps, 'repetition')} = {_count(len(plan.jobs), 'run')}, "
          f"{_count(plan.jobs[0].epochs, 'epoch')} each, {_ordered(plan)}, seeds from master seed "
          f"{plan.master_seed}")
    undefined = sorted({j.ecosystem for j in plan.jobs} - set(plan.stacks))
    if undefined:
        print(f"  no stack defined yet for: {', '.join(undefined)}")
    print("\n".join(format_disk(campaign_items(plan, Path(args.out)))))
    caveat = accuracy_caveat(scoped(load_spec(), plan.scope, plan.path))
    if caveat:
        print(f"  note: {caveat}")
    print("  'deepgreen plan --print' lists every run with its seed and exact command")
    return 0


SLURM_ONLY = ("partition", "account", "time", "gres", "no_wait")


def _slurm_options(args):
    """SlurmOptions from the command line; refuses Slurm's options with the local executor."""
    from deepgreen_audit.collect.slurm import SlurmOptions
    from deepgreen_audit.errors import UserError

    given = [k for k in SLURM_ONLY if getattr(args, k, None)]
    if args.executor != "slurm":
        if given:
            raise UserError(f"--{given[0].replace('_', '-')} applies to --executor slurm only",
                            code="usage-error")
        return None
    return SlurmOptions(partition=args.partition, account=args.account, time_limit=args.time,
                        gres=args.gres)


def cmd_preflight(args) -> int:
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.collect.preflight import run_checks
    from deepgreen_audit.errors import UserError

    plan = load_plan(Path(args.plan) if args.plan else None)
    options = _slurm_options(args)
    if options is None:
        report = run_checks(plan, allow_missing_counters=args.allow_missing_counters,
                            allow_unpinned=args.allow_unpinned)
    else:
        from deepgreen_audit.collect.slurm import preflight_checks

        if not args.out:
            raise UserError("--executor slurm needs --out: the output folder the probe job must "
                            "reach from a compute node", code="usage-error")
        report = preflight_checks(plan, Path(args.out), options,
                                  allow_missing_counters=args.allow_missing_counters,
                                  allow_unpinned=args.allow_unpinned)
    print(report.to_json() if args.json else report.format_text(), end="" if args.json else "\n")
    if args.strict and not args.json and report.strict_verdict():
        print(report.strict_verdict())
    return report.exit_status(args.strict)


def _slurm_progress(counts: dict) -> None:
    print("  slurm: " + ", ".join(f"{n} {what}" for what, n in counts.items()), file=sys.stderr, flush=True)


def _ordered(plan) -> str:
    """How the plan orders its runs, for its one-paragraph summary."""
    if plan.scope.get("schedule") == "calibration":
        return "a between-window calibration (its points collected in sessions: --max-runs)"
    return "interleaved"


def cmd_collect_slurm(args, plan, options) -> int:
    from deepgreen_audit.collect.slurm import collect_slurm, submit

    if args.dry_run:
        submit(plan, Path(args.out), options, allow_missing_counters=args.allow_missing_counters,
               synthetic_reason=args.synthetic, dry_run=True, print_script=sys.stdout.write)
        return 0
    summary = collect_slurm(plan, Path(args.out), options, allow_missing_counters=args.allow_missing_counters,
                            synthetic_reason=args.synthetic, wait=not args.no_wait, progress=_slurm_progress,
                            max_consecutive_failures=args.max_consecutive_failures)
    for job_id, run_ids in summary.submitted.items():
        print(f"submitted array job {job_id}: {len(run_ids)} run(s); its batch script: "
              f"{Path(args.out) / 'slurm' / (job_id + '.sbatch')}")
    print(f"{len(summary.completed)} completed, {len(summary.skipped)} already done, "
          f"{len(summary.failed)} failed, {len(summary.in_flight)} still queued or running; run tree: "
          f"{Path(args.out) / 'runs'}")
    for run_id, reason in summary.failed.items():
        print(f"  failed: {run_id}: {reason}")
    if summary.not_started:
        print(f"  {len(summary.not_started)} run(s) not started: their queued tasks were cancelled")
    if summary.stopped:
        print(summary.stopped)
    elif summary.failed or summary.in_flight:
        print("  run the same command again to settle what is in flight and resubmit the failed runs")
    return 0 if summary.ok else 1


def cmd_collect(args) -> int:
    from deepgreen_audit.collect.driver import collect
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.errors import UserError

    plan = load_plan(Path(args.plan) if args.plan else None)
    options = _slurm_options(args)
    if args.max_consecutive_failures < 0:
        raise UserError("--max-consecutive-failures takes 0 (never stop) or more",
                        code="usage-error")
    if options is not None:
        if args.max_runs is not None:
            raise UserError("--max-runs applies to the local executor only", code="usage-error")
        return cmd_collect_slurm(args, plan, options)
    if args.dry_run:
        raise UserError("--dry-run applies to --executor slurm only (see 'deepgreen plan --print')",
                        code="usage-error")
    if args.max_runs is not None and args.max_runs < 1:
        raise UserError("--max-runs takes 1 or more", code="usage-error")
    summary = collect(plan, Path(args.out), allow_missing_counters=args.allow_missing_counters,
                      progress=_progress, synthetic_reason=args.synthetic,
                      max_consecutive_failures=args.max_consecutive_failures, announce=_announce,
                      max_runs=args.max_runs)
    flatten = (f"(deepgreen flatten {summary.runs_dir} --out PKG)"
               if summary.completed or summary.skipped else "(no run completed: nothing to flatten)")
    print(f"{len(summary.completed)} completed, {len(summary.skipped)} already done, "
          f"{len(summary.failed)} failed; run tree: {summary.runs_dir} {flatten}")
    for run_id, reason in summary.failed.items():
        print(f"  failed: {run_id}: {reason}")
    if summary.paused:
        print(summary.paused)
    if summary.stopped:
        print(summary.stopped)
    elif summary.failed:
        print("  run the same command again to retry the failed runs (completed runs are skipped)")
    return 0 if summary.ok else 1


def cmd_envs(args) -> int:
    from deepgreen_audit.collect.environments import run

    return run(args)


def register(verb) -> None:
    from deepgreen_audit.console import strict_option

    plan_help = "campaign plan (default: collect/plan.toml)"
    p = verb("plan", cmd_plan, "show the campaign plan (runs, seeds, order, commands)",
             "Expand the campaign plan (collect/plan.toml, with configurations and repetitions "
             "from collect/experiment.toml) into its runs: interleaved order, distinct seeds. "
             "--print lists every run with its schedule position, repetition index, seed and "
             "the exact command, so that external stacks can be driven on the same schedule. "
             "Without --print it also states the disk the campaign needs, estimated: the weight "
             "exports (safetensors and TorchScript, one per run's seed), the datasets and the run "
             "directories, each with what is not written yet and the free space of the file "
             "system it goes to (docs/collection.md, \"Disk\").",
             [("deepgreen plan", "the campaign in one paragraph, and its disk"),
              ("deepgreen plan --plan collect/contrast.toml --print", "every run of the S7 cell")])
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument("--print", action="store_true", help="list every run and its exact command")
    p.add_argument("--out", default="collected", metavar="DIR",
                   help="collect's output folder: the printed commands use it, and the disk "
                        "estimate leaves out the runs it already holds (default: collected)")

    p = verb("preflight", cmd_preflight, "check that every job of the plan can run here",
             "Check the interpreter, CodeCarbon (3.x and the pinned collect/codecarbon.ini), the "
             "energy counters of the plan's measurement boundary (NVML and RAPL on a cuda "
             "campaign, RAPL on a cpu one), and for each stack of the plan that it is defined, "
             "importable or built, and that its data is present. Exit 0 when every job can run, "
             "1 otherwise, with one line per check.")
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument(ALLOW_OPTION, action="store_true",
                   help="treat missing counters as a warning (collect would record empty cells)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--allow-unpinned", action="store_true",
                   help="treat a framework version other than the specification's pin as a warning "
                        "(runs record the version found; the audit's S4.pinned-versions flags it)")
    strict_option(p)
    _executor_options(p, preflight=True)

    from deepgreen_audit.collect.environments import add_arguments

    p = verb("envs", cmd_envs, "the Python environments set-up builds here (one per framework on a GPU host)",
             "Say whether this host is a cuda or a cpu host (DEEPGREEN_ACCELERATOR=cuda|cpu wins; "
             "otherwise an NVIDIA driver, NVML or nvidia-smi, means cuda) and which environments "
             "set-up builds: .venv on every host and, on a cuda host, .venv-pytorch, .venv-tensorflow "
             "and .venv-jax, each with its framework's GPU build at the pinned version. --dry-run "
             "resolves each with uv without installing anything and prints the NVIDIA library "
             "versions each gets, what each downloads, and whether the three frameworks resolve "
             "together in one environment (docs/collection.md).",
             [("deepgreen envs --detect", "cuda or cpu, and why")])
    add_arguments(p)

    p = verb("collect", cmd_collect, "run the campaign: one process per run, resumable",
             "Run every run of the plan, each in its own process, in the plan's interleaved "
             "order, and write completed runs atomically to OUT/runs/<campaign>/<run_id>/ "
             "(then: deepgreen flatten OUT/runs --out PKG). Failed runs go to OUT/failed/, "
             "never into OUT/runs; a failed run's progress line ends with the last line its stack "
             "wrote. The campaign stops after --max-consecutive-failures runs in a row failed for "
             "the same reason, and is refused before its first run when a dataset it reads is not "
             "prepared, or when the file system of OUT cannot hold the run directories still "
             "to write. OUT must be new, empty, or a folder this campaign's collect started "
             "(OUT/campaign.json): running it again skips completed runs and retries the rest; "
             "a folder of another campaign, a package or other files is refused before any work. "
             "Each run's progress line says what it measures, and a line NOT MEASURED, once "
             "before the first run, says which counters the host lacks and what that leaves "
             "empty. "
             "Refuses a host without the energy counters of the plan's measurement boundary "
             "(NVML and RAPL on a cuda campaign, RAPL on a cpu one) unless "
             f"{ALLOW_OPTION} is given. With --executor slurm the runs not yet completed are "
             "submitted as a Slurm job array, one exclusive task per run, with the same staging "
             "and failure records; cancelled, timed-out and node-failed tasks are recorded "
             "failed with Slurm's reason and resubmitted by the next collect, and "
             "--max-consecutive-failures cancels the queued tasks.")
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder: new, empty, or one this campaign's earlier collect wrote "
                        "(resumed; OUT/campaign.json records the campaign and its plan); a folder "
                        "that holds another campaign, a package or other files is refused before "
                        "any work")
    p.add_argument(ALLOW_OPTION, action="store_true",
                   help="collect without the missing counters: empty energy cells with the reason")
    p.add_argument("--synthetic", metavar="REASON",
                   help="mark the package synthetic, with the reason (e.g. a rehearsal on fake "
                        "counters): its descriptor, title and every report then say so")
    from deepgreen_audit.device.errors import MAX_CONSECUTIVE_FAILURES

    p.add_argument("--max-consecutive-failures", type=int, default=MAX_CONSECUTIVE_FAILURES,
                   metavar="N", help="stop the campaign (exit 1) after N consecutive runs failed for "
                                     "the same reason (default "
                                     f"{MAX_CONSECUTIVE_FAILURES}; 0: never); with --executor slurm "
                                     "the queued tasks are cancelled (scancel) and the array's "
                                     "record OUT/slurm/<job>.json says why")
    p.add_argument("--max-runs", type=int, metavar="N",
                   help="local executor: end this session after N runs were started (exit 0); "
                        "the next collect resumes with the next run: how a between-window "
                        "calibration's points are collected at moments of their own "
                        "(collect/calibration.toml), e.g. --max-runs 2")
    _executor_options(p, preflight=False)


def _executor_options(p, preflight: bool) -> None:
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help="local: every run on this machine, one after another (default); slurm: one "
                        "exclusive Slurm array task per run (docs/collection.md)")
    if preflight:
        p.add_argument("--out", metavar="DIR",
                       help="with --executor slurm: the output folder, which a probe job on a compute "
                            "node must be able to write")
    p.add_argument("--partition", help="Slurm partition (sbatch --partition)")
    p.add_argument("--account", help="Slurm account (sbatch --account)")
    p.add_argument("--time", metavar="LIMIT",
                   help="time limit of one run's task (sbatch --time; default: the plan's run_timeout_s "
                        "plus 10 minutes)")
    p.add_argument("--gres", help="generic resources of one task, e.g. gpu:1 (sbatch --gres; default: "
                                  "gpu:N when the plan's [hosts] gpus_per_run is N > 0)")
    if not preflight:
        p.add_argument("--dry-run", action="store_true",
                       help="with --executor slurm: print the batch script(s) and submit nothing")
        p.add_argument("--no-wait", action="store_true",
                       help="with --executor slurm: submit and return; the next collect settles the tasks")
