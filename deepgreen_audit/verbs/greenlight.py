"""Verbs of the API-level layer: `profile-api` and `api-audit` (thin: parse, call, print)."""

from __future__ import annotations

import sys
from pathlib import Path


def cmd_profile_api(args) -> int:
    from deepgreen_audit.greenlight.profile import DEFAULT_CALLS, StableState, profile_api

    calls = args.call or list(DEFAULT_CALLS)
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = StableState(measurement_interval_s=args.interval_s, max_wait_s=args.max_wait_s)
    result = profile_api(calls, sizes, Path(args.out), experiments=args.experiments,
                         durations_only=args.durations_only,
                         allow_missing_counters=args.allow_missing_counters, settings=settings,
                         min_window_s=args.min_window_s, overwrite=args.overwrite,
                         progress=lambda line: print("  " + line, file=sys.stderr, flush=True))
    for skip in result.skipped:
        print(f"skipped {skip['api_call']}: {skip['reason']}")
    print(f"profiled {len(result.rows)} (call, size) windows; wrote {args.out} "
          f"(described by {result.descriptor})")
    return 0


def cmd_api_audit(args) -> int:
    from deepgreen_audit.greenlight.checks import run_checks
    from deepgreen_audit.greenlight.importer import records_from_package
    from deepgreen_audit.greenlight.package import open_api_package, validate_api_package
    from deepgreen_audit.greenlight.summary import REASON_UNEXPLAINED, compare_published
    from deepgreen_audit.package.dispatch import check_verb
    from deepgreen_audit.verbs.audit import refuse_evidence_folder, write_evidence

    check_verb(args.package, "api-audit")
    if args.evidence:
        refuse_evidence_folder(Path(args.evidence), [Path(args.package)], overwrite=False)
    report = validate_api_package(args.package)
    if not report.valid:
        print(report.format_text())
        return 1
    calls = open_api_package(args.package, report).table("api_calls").to_pylist()
    checks = run_checks(calls, report.subject)
    comparison = None
    if args.published:
        comparison = compare_published(Path(args.published), records_from_package(args.package))
        checks.stats["comparison"] = {"rows": [r.__dict__ for r in comparison.rows],
                                      "not_compared": comparison.not_compared}
    unexplained = comparison is not None and any(r.reason == REASON_UNEXPLAINED
                                                 for r in comparison.rows)
    csvs = write_evidence(args.evidence, checks)
    if args.json:
        print(checks.to_json(csvs), end="")
    else:
        print(report.format_text())
        print(checks.format_text(evidence_rows=args.show))
        if comparison is not None:
            print(comparison.format_text(verbose=args.verbose))
    return max(int(unexplained), checks.exit_status(args.strict))


def register(verb) -> None:
    from deepgreen_audit.console import strict_option

    p = verb("profile-api", cmd_profile_api, "measure framework API calls at several input sizes",
             "Profile API calls (PyTorch, TensorFlow, JAX) at several input sizes with this "
             "project's counters (RAPL through powercap sysfs, NVML's energy counter): wait for a "
             "stable state (power spread and temperature), take the idle baseline, repeat each call "
             "until its window spans the counter's update period, subtract the baseline, record "
             "input sizes (pickle length) and write an API-level package (api_calls, api_samples). "
             "A host without counters is refused unless --durations-only (or "
             "--allow-missing-counters) says otherwise; calls of an absent framework are skipped "
             "with the reason recorded.")
    p.add_argument("--call", action="append", metavar="NAME",
                   help="API call to profile (repeatable; default: one of each framework); known: "
                        "torch.matmul, torch.nn.functional.conv2d, torch.nn.functional.relu, "
                        "torch.sum, tensorflow.linalg.matmul, jax.numpy.matmul")
    p.add_argument("--sizes", default="64,256,1024", metavar="N,N",
                   help="input sizes: side of the square input (default 64,256,1024)")
    p.add_argument("--experiments", type=int, default=1, help="repetitions of the whole set")
    p.add_argument("--out", required=True, metavar="PKG", help="package folder to write")
    p.add_argument("--durations-only", action="store_true",
                   help="read no counter: durations only, energy cells empty with the reason")
    p.add_argument("--allow-missing-counters", action="store_true",
                   help="measure with the counters the host has; the others' cells stay empty")
    p.add_argument("--min-window-s", type=float, default=1.0,
                   help="shortest measured window per (call, size), seconds (default 1)")
    p.add_argument("--interval-s", type=float, default=0.5,
                   help="power reading interval of the stable-state wait (default 0.5 s)")
    p.add_argument("--max-wait-s", type=float, default=120.0,
                   help="longest stable-state wait before measuring anyway (default 120 s)")
    p.add_argument("--overwrite", action="store_true", help="replace PKG if it exists")

    p = verb("api-audit", cmd_api_audit, "audit an API-level package (Greenlight/FECoM, profile-api)",
             "Validate an API-level package (checksums, schemas, keys), run the API-level checks "
             "(calls shorter than the sampling interval, unstable baselines, negative normalised "
             "energy, lag windows running into the next call) and, with --published, recompute the "
             "per-API summaries from the package's samples and compare them with the published "
             "summary files under DIR. Exit 1 if the package is invalid or a difference has no "
             "explanation (or, with --strict, any check finds something).",
             [("deepgreen import greenlight ../shared/greenlight --out api/", "FECoM's records"),
              ("deepgreen api-audit api/", "their audit")])
    p.add_argument("package", metavar="PKG", help="API-level package folder or its datapackage.json")
    p.add_argument("--published", metavar="DIR", help="folder with published summaries to compare")
    p.add_argument("--show", type=int, default=5, help="calls shown per check that finds something (default 5)")
    p.add_argument("--verbose", action="store_true", help="list every differing row")
    strict_option(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--evidence", metavar="DIR",
                   help="also write each finding's complete evidence as DIR/<id>-evidence.csv (DIR "
                        "new or empty); the JSON carries the first rows of each and names its CSV "
                        "(details.evidence_csv, as audit --evidence)")
