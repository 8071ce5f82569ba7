"""Verbs `audit` and `spec`: thin wrappers over deepgreen_audit.audit and deepgreen_audit.spec."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from deepgreen_audit.errors import UserError, path_text


def cmd_audit(args) -> int:
    if args.list:
        from deepgreen_audit.audit import docs
        from deepgreen_audit.audit.checks import audit_checks

        if args.markdown:
            if args.check:
                current = docs.doc_path().is_file() and \
                    docs.doc_path().read_text(encoding="utf-8") == docs.to_markdown()
                print(f"{docs.doc_path()} is {'current' if current else 'OUT OF DATE'}")
                return 0 if current else 1
            print(f"wrote {docs.write_markdown()}")
            return 0
        for c in audit_checks():
            print(f"{c.id:<30} {c.section:<9} {c.severity:<7} {c.doc}")
        return 0
    from deepgreen_audit.audit.driver import resolve_package, start_round_trip
    from deepgreen_audit.package.dispatch import check_verb, is_codecarbon_log

    if args.logs:
        return _audit_logs(args)
    if len(args.package) > 1:
        raise UserError(f"one package at a time, not {len(args.package)} (CodeCarbon logs: "
                        "--logs FILE...)", code="usage-error")
    location = resolve_package(args.package[0] if args.package else PACKAGE_DEFAULT)
    check_verb(location, "audit")
    files = report_files(args, location)
    ctx: Any  # the suite's context: a LogContext or an AuditContext (None when validation failed)
    if is_codecarbon_log(location):  # the audit of anyone's CodeCarbon logs
        from deepgreen_audit.codecarbon import audit as codecarbon_audit
        from deepgreen_audit.spec import load_spec

        report, ctx = codecarbon_audit.audit_log(
            location, spec=load_spec(args.spec) if args.spec else None, select=args.select)
        page, evidence_rows = codecarbon_audit.render_log_page, 3
    else:
        # the program's round-trip proof starts first, in a child, before the imports below
        round_trip = start_round_trip(location, args.select) if args.owns_process else None
        try:
            from deepgreen_audit.audit.driver import audit_with_context
            from deepgreen_audit.package import arrays

            with arrays.pandas_hidden() if args.owns_process and not args.html \
                    else contextlib.nullcontext():
                report, ctx = audit_with_context(
                    location, spec_path=args.spec, select=args.select, round_trip=round_trip,
                    sources_root=Path(args.sources) if args.sources else None,
                    calibration=calibration_of(args.calibration, location))
        finally:  # (Ctrl-C during the imports above too: no child outlives the program)
            if round_trip is not None:
                round_trip.cancel()
        page, evidence_rows = _campaign_page, 0
    csvs = write_evidence(args.evidence, report)
    print(report.to_json(csvs) if args.json else report.format_text(evidence_rows=evidence_rows),
          end="" if args.json else "\n")
    if args.strict and not args.json and report.strict_verdict():
        print(report.strict_verdict())
    write_report_files(files, report, lambda: page(report, ctx), csvs, overwrite=args.overwrite)
    return report.exit_status(args.strict)


def calibration_of(given: str | None, location) -> Path | None:
    """The between-window calibration package S6.calibration-window reads: `given` (refused
    unless its descriptor declares a calibration, collect/calibration.toml), else the checkout's
    calibration/ when the audited package is the checkout's shipped one, else None: a
    calibration belongs to the campaign it was collected beside."""
    from deepgreen_audit.package.descriptor import Package
    from deepgreen_audit.resources import shipped_calibration

    if given is None:
        return shipped_calibration(location)
    package = Package.open(given)
    if (package.descriptor.get("scope") or {}).get("schedule") != "calibration":
        raise UserError("is not a between-window calibration package: its descriptor's scope "
                        "does not declare schedule = \"calibration\" (collect/calibration.toml)",
                        path=package.descriptor_path, field="scope.schedule", code="usage-error")
    return package.descriptor_path.parent


def _audit_logs(args) -> int:
    """`--logs`: CodeCarbon logs audited where they lie (a pre-commit hook's or a CI step's
    files): imported into a package in a temporary folder, removed afterwards, and audited as
    such a package is; the report names the logs, not the temporary package."""
    import tempfile

    from deepgreen_audit.codecarbon import audit as codecarbon_audit
    from deepgreen_audit.codecarbon.importer import import_logs
    from deepgreen_audit.spec import load_spec

    if not args.package:
        raise UserError("--logs needs the CodeCarbon logs to audit (files or folders)",
                        code="usage-error")
    logs = [Path(p) for p in args.package]
    files = report_files(args, None, inputs=logs)
    with tempfile.TemporaryDirectory(prefix="deepgreen-logs-") as scratch:
        package = Path(scratch) / "logs"
        import_logs(logs, package)
        report, ctx = codecarbon_audit.audit_log(
            package, spec=load_spec(args.spec) if args.spec else None, select=args.select)
        report.subject = " ".join(path_text(p) for p in logs)
        csvs = write_evidence(args.evidence, report)
        print(report.to_json(csvs) if args.json else report.format_text(evidence_rows=3),
              end="" if args.json else "\n")
        if args.strict and not args.json and report.strict_verdict():
            print(report.strict_verdict())
        write_report_files(files, report, lambda: codecarbon_audit.render_log_page(report, ctx),
                           csvs, overwrite=args.overwrite)
    return report.exit_status(args.strict)


def _campaign_page(report, ctx) -> str:
    """The campaign audit's HTML page (its module is imported only when a page is asked for)."""
    from deepgreen_audit.page.html import render_page

    return render_page(report, ctx)


def report_files(args, location, inputs: list[Path] | None = None) -> dict[str, Path]:
    """The report files the command line asks for (--out, --html, --junit), refused before the
    audit runs, as package outputs are: an existing file without --overwrite, one of the
    package's own files or of the `inputs` given (a data-loss bug), and two outputs on the same
    path."""
    from deepgreen_audit.package import atomic
    from deepgreen_audit.package.descriptor import Package

    files = {kind: Path(path) for kind, path in
             (("json", args.out), ("html", args.html), ("junit", args.junit)) if path}
    if inputs is None:
        try:
            inputs = Package.open(location).input_paths()
        except UserError:  # an unreadable descriptor: the audit reports it; its folder is the input
            inputs = [Path(location or ".")]
    seen: dict[str, str] = {}
    for kind, path in files.items():
        atomic.refuse_overlap(path, inputs)
        real = os.path.realpath(path)
        if real in seen:
            raise UserError(f"--{seen[real]} and --{'out' if kind == 'json' else kind} name the "
                            "same file", path=path, code="usage-error")
        seen[real] = "out" if kind == "json" else kind
        atomic.check_output(path, args.overwrite)
    if args.evidence:
        refuse_evidence_folder(Path(args.evidence), inputs, args.overwrite)
    return files


def refuse_evidence_folder(folder: Path, inputs: list[Path], overwrite: bool) -> None:
    """Refuse, before the audit runs, an --evidence folder that is a file, overlaps an input,
    or already holds files (unless --overwrite: its CSVs of the same names
    are replaced)."""
    from deepgreen_audit.package import atomic

    atomic.refuse_overlap(folder, inputs)
    if folder.exists() and not folder.is_dir():
        raise UserError("is not a folder; --evidence names the folder the evidence CSVs go to",
                        path=folder, code="usage-error")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise UserError("holds files already: --evidence wants a new or empty folder (or "
                        "--overwrite, which replaces its CSVs of the same names)", path=folder,
                        code="output-exists")


def write_evidence(folder: str | None, report) -> list[str | None] | None:
    """With --evidence DIR: each finding's complete evidence as DIR/<id>-evidence.csv (written
    atomically; said on stderr); returns each finding's file (None for one without evidence),
    in the findings' order, for the JSON report's details.evidence_csv.  None without DIR."""
    from deepgreen_audit.columnar.evidence import evidence_csv_names, evidence_csv_text
    from deepgreen_audit.package import atomic

    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    written: list[str | None] = []
    for finding, name in zip(report.findings, evidence_csv_names([f.id for f in report.findings]),
                             strict=True):
        rows = (finding.details or {}).get("evidence")
        if not rows:
            written.append(None)
            continue
        path = Path(folder) / name
        atomic.write_text(path, evidence_csv_text(rows))
        written.append(str(path))
    if any(written):
        print(f"wrote {sum(1 for w in written if w)} evidence CSV(s) into {path_text(folder)}",
              file=sys.stderr)
    if report.stats.get("verdicts"):  # a CodeCarbon-log package: every log's and run's verdict
        from deepgreen_audit.codecarbon.audit import verdict_csvs

        for name, text in verdict_csvs(report).items():
            atomic.write_text(Path(folder) / name, text)
        print(f"wrote log-verdicts.csv and run-verdicts.csv into {path_text(folder)}",
              file=sys.stderr)
    return written


def write_report_files(files: dict[str, Path], report, page,
                       evidence_csv: list[str | None] | None = None, *, overwrite: bool) -> None:
    """Write each asked-for report file atomically and say so (on stderr: stdout is the
    report, which --json keeps parseable); `page` renders the HTML only when it is asked for;
    `evidence_csv`: the complete evidence's files the JSON report names (write_evidence).
    All or none (`atomic.write_files`); without `overwrite`, a file that another command wrote
    meanwhile is not replaced."""
    from deepgreen_audit.package import atomic

    def junit() -> str:
        from deepgreen_audit.page.html import render_junit

        return render_junit(report)

    render = {"json": lambda: report.to_json(evidence_csv), "html": page, "junit": junit}
    atomic.write_files({path: partial(_utf8, render[kind]) for kind, path in files.items()},
                       overwrite=overwrite)
    for path in files.values():
        print(f"wrote {path_text(path)}", file=sys.stderr)


def _utf8(render: Callable[[], str]) -> bytes:
    return render().encode("utf-8")


def cmd_spec(args) -> int:
    from deepgreen_audit import spec

    if not args.markdown:
        raise UserError("choose an output: --markdown")
    if args.check:
        current = spec.markdown_is_current()
        print(f"{spec.markdown_path()} is {'current' if current else 'OUT OF DATE: run deepgreen spec --markdown'}")
        return 0 if current else 1
    if args.stdout:
        print(spec.to_markdown(), end="")
        return 0
    print(f"wrote {spec.write_markdown()}")
    return 0


#: The package an audit reads when none is named.
PACKAGE_DEFAULT = "datapackage.json"


def register(verb) -> None:
    from deepgreen_audit.console import strict_option
    from deepgreen_audit.report import JSON_EVIDENCE_ROWS

    p = verb("audit", cmd_audit, "audit a package against the experiment specification (S1-S6)",
             "Validate PKG (checksums, schemas, keys), prove the round trip to run directories, "
             "then run every registered conformance check of the experiment specification "
             "(collect/experiment.toml, S1 model ... S6 replication) and of the stack sources. "
             "Each finding has an id, a section, a status (pass/fail/warn/skip), a message and "
             "the rows it concerns; the report ends with the counts. A skipped check means the "
             "audit did not finish. Exit 0 when every check passes (warnings allowed), 1 when a "
             "check fails or the package does not validate (with --strict also on a warning or "
             "a skip), 2 on a usage error such as --select matching no check. An API-level package "
             "is audited by 'api-audit' instead. A CodeCarbon-log "
             "package ('import codecarbon') gets the CodeCarbon checks and a verdict per log and "
             "run: measured, partly modelled or modelled (docs/codecarbon.md). See "
             "docs/audit.md.",
             [("deepgreen audit examples/first-campaign --html first-campaign.html --junit "
               "first-campaign.xml", "its page and JUnit file (exit 1)"),
              ("deepgreen audit --select S5 --strict", "the shipped package's S5 checks, strictly"),
              ("deepgreen audit --list", "every check with its section and severity"),
              ("deepgreen synth --out late/ --defect late-reruns",
               "a campaign whose 4 runs were re-run after it, outside its window"),
              ("deepgreen audit late/ --calibration calibration --select S6.calibration-window",
               "those runs, covered by the shipped between-window calibration")])
    p.add_argument("package", nargs="*", metavar="PKG",
                   help="package folder or its datapackage.json (default: ./datapackage.json); "
                        "with --logs, the CodeCarbon logs to audit")
    strict_option(p)
    p.add_argument("--logs", action="store_true",
                   help="the arguments are CodeCarbon logs (files, or folders of *.csv), audited "
                        "where they lie: imported into a temporary package, removed afterwards; "
                        "for a pre-commit hook or a CI step (docs/codecarbon.md), e.g. 'deepgreen "
                        "audit --logs emissions.csv'")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", metavar="FILE", help="also write the JSON report to FILE")
    p.add_argument("--evidence", metavar="DIR",
                   help="also write each finding's complete evidence as DIR/<id>-evidence.csv "
                        "(DIR new or empty, or --overwrite); the JSON report carries the first "
                        f"{JSON_EVIDENCE_ROWS} rows of each and names its CSV "
                        "(details.evidence_csv, evidence_total); for CodeCarbon logs also "
                        "DIR/log-verdicts.csv and DIR/run-verdicts.csv, every log's and run's "
                        "verdict, modelled share and worst finding")
    p.add_argument("--html", metavar="FILE",
                   help="also write the report as one self-contained HTML page (identity, summary, "
                        "every check; each failing or warning finding with its evidence table and "
                        "a figure; no network needed to view it)")
    p.add_argument("--junit", metavar="FILE",
                   help="also write JUnit XML for CI: one test case per check (fail = failure, "
                        "skip = skipped)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of --out, --html and --junit if they exist, and "
                        "the CSVs of --evidence")
    p.add_argument("--list", action="store_true", help="list the registered checks and exit")
    p.add_argument("--markdown", action="store_true",
                   help="with --list: write docs/audit.md from the registry")
    p.add_argument("--check", action="store_true",
                   help="with --list --markdown: only say whether docs/audit.md is current")
    p.add_argument("--spec", metavar="TOML", help="audit against this specification instead")
    p.add_argument("--select", action="append", metavar="PREFIX",
                   help="run only checks whose id starts with PREFIX (repeatable), e.g. S5")
    p.add_argument("--calibration", metavar="CAL",
                   help="the between-window calibration package (collect/calibration.toml) that "
                        "S6.calibration-window checks the runs outside the campaign's interleaved "
                        "window against (default: the checkout's calibration/ when PKG is the "
                        "shipped package; none otherwise)")
    p.add_argument("--sources", metavar="DIR",
                   help="folder whose stacks/ and paper/paper.tex the source checks read "
                        "(default: this project's, which a wheel ships too)")

    p = verb("spec", cmd_spec, "render the experiment specification as Markdown",
             "Generate docs/spec.md, the human-readable experiment specification, from "
             "collect/experiment.toml (the one machine-readable source). --check only says "
             "whether docs/spec.md is current (exit 1 if not).",
             [("deepgreen spec --markdown --check", "is docs/spec.md current?")])
    p.add_argument("--markdown", action="store_true", help="write docs/spec.md")
    p.add_argument("--check", action="store_true", help="only check that docs/spec.md is current")
    p.add_argument("--stdout", action="store_true", help="print the Markdown instead of writing it")
