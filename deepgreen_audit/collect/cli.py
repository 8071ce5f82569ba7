"""Verbs of the collection layer: plan, preflight, collect (thin: parse, call, print)."""

from __future__ import annotations

import sys
from pathlib import Path

from deepgreen_audit.collect.instruments import ALLOW_OPTION


def _progress(n: int, total: int, run_id: str, what: str) -> None:
    print(f"  [{n}/{total}] {run_id}: {what}", file=sys.stderr, flush=True)


def cmd_plan(args) -> int:
    from deepgreen_audit.collect.plan import format_schedule, load_plan

    plan = load_plan(Path(args.plan) if args.plan else None)
    if args.print:
        sys.stdout.write(format_schedule(plan, Path(args.out) / "work"))
        return 0
    configs = {(j.ecosystem, j.architecture, j.dataset) for j in plan.jobs}
    reps = max(j.repetition for j in plan.jobs)
    print(f"plan {plan.path}: campaign {plan.campaign!r}, {len(configs)} configurations x "
          f"{reps} repetitions = {len(plan.jobs)} runs, {plan.jobs[0].epochs} epochs each, "
          f"interleaved, seeds from master seed {plan.master_seed}")
    undefined = sorted({j.ecosystem for j in plan.jobs} - set(plan.stacks))
    if undefined:
        print(f"  no stack defined yet for: {', '.join(undefined)}")
    print("  'deepgreen plan --print' lists every run with its seed and exact command")
    return 0


def cmd_preflight(args) -> int:
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.collect.preflight import format_checks, run_checks

    plan = load_plan(Path(args.plan) if args.plan else None)
    checks = run_checks(plan, allow_missing_counters=args.allow_missing_counters,
                        allow_unpinned=args.allow_unpinned)
    print(f"preflight of {plan.path} ({len(plan.jobs)} runs):")
    print(format_checks(checks))
    failed = [c for c in checks if c.status == "fail"]
    print(f"{len(failed)} check(s) failed" if failed else "every job can run")
    return 1 if failed else 0


def cmd_collect(args) -> int:
    from deepgreen_audit.collect.driver import collect
    from deepgreen_audit.collect.plan import load_plan

    plan = load_plan(Path(args.plan) if args.plan else None)
    print(f"collecting {len(plan.jobs)} runs of {plan.path} into {args.out}", file=sys.stderr)
    summary = collect(plan, Path(args.out), allow_missing_counters=args.allow_missing_counters,
                      progress=_progress, synthetic_reason=args.synthetic)
    print(f"{len(summary.completed)} completed, {len(summary.skipped)} already done, "
          f"{len(summary.failed)} failed; run tree: {summary.runs_dir} "
          f"(deepgreen flatten {summary.runs_dir} --out PKG)")
    for run_id, reason in summary.failed.items():
        print(f"  failed: {run_id}: {reason}")
    if summary.failed:
        print("  run the same command again to retry the failed runs (completed runs are skipped)")
    return 0 if summary.ok else 1


def register(verb) -> None:
    plan_help = "campaign plan (default: collect/plan.toml)"
    p = verb("plan", cmd_plan, "show the campaign plan (runs, seeds, order, commands)",
             "Expand the campaign plan (collect/plan.toml, with configurations and repetitions "
             "from collect/experiment.toml) into its runs: interleaved order, distinct seeds. "
             "--print lists every run with its schedule position, repetition index, seed and "
             "the exact command, so that external stacks can be driven on the same schedule.")
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument("--print", action="store_true", help="list every run and its exact command")
    p.add_argument("--out", default="collected", metavar="DIR",
                   help="output folder the printed commands use (default: collected)")

    p = verb("preflight", cmd_preflight, "check that every job of the plan can run here",
             "Check the interpreter, CodeCarbon (3.x and the pinned collect/codecarbon.ini), the "
             "NVML and RAPL energy counters, and for each stack of the plan that it is defined, "
             "importable or built, and that its data is present. Exit 0 when every job can run, "
             "1 otherwise, with one line per check.")
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument(ALLOW_OPTION, action="store_true",
                   help="treat missing counters as a warning (collect would record empty cells)")
    p.add_argument("--allow-unpinned", action="store_true",
                   help="treat a framework version other than the specification's pin as a warning "
                        "(runs record the version found; the audit's S4.pinned-versions flags it)")

    p = verb("collect", cmd_collect, "run the campaign: one process per run, resumable",
             "Run every run of the plan, each in its own process, in the plan's interleaved "
             "order, and write completed runs atomically to OUT/runs/<campaign>/<run_id>/ "
             "(then: deepgreen flatten OUT/runs --out PKG). Failed runs go to OUT/failed/, "
             "never into OUT/runs. Running it again skips completed runs and retries the rest. "
             "Refuses a host without NVML or RAPL energy counters unless "
             f"{ALLOW_OPTION} is given.")
    p.add_argument("--plan", metavar="TOML", help=plan_help)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; reused on resume)")
    p.add_argument(ALLOW_OPTION, action="store_true",
                   help="collect without the missing counters: empty energy cells with the reason")
    p.add_argument("--synthetic", metavar="REASON",
                   help="mark the package synthetic, with the reason (e.g. a rehearsal on fake "
                        "counters): its descriptor, title and every report then say so")
