"""The one driver that runs the registered checks over a package.

Integrity comes first (deepgreen_audit.package.validate): checks read typed
tables, which only a valid package has, so on an invalid package every other
check is skipped and the audit says it did not finish.
"""

from __future__ import annotations

import dataclasses
import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.beside import Beside
from deepgreen_audit.package.descriptor import DESCRIPTOR_NAME, Package
from deepgreen_audit.package.rundirs import RoundTrip, prove_round_trip
from deepgreen_audit.registry import registered_checks, run_check, select_checks
from deepgreen_audit.report import Report
from deepgreen_audit.spec import load_spec, scoped

if TYPE_CHECKING:
    from deepgreen_audit.audit.context import AuditContext

INTEGRITY_ID = "integrity.validate"
ROUND_TRIP_ID = "integrity.round-trip"


def audit(location: str | Path | None = None, **options) -> Report:
    """Audit the package at `location` (see `audit_with_context`)."""
    return audit_with_context(location, **options)[0]


def audit_with_context(location: str | Path | None = None, *, spec: dict | None = None,
                       spec_path: str | Path | None = None, select: list[str] | None = None,
                       sources_root: Path | None = None,
                       round_trip: Beside[RoundTrip] | None = None
                       ) -> tuple[Report, AuditContext | None]:
    """Audit the package at `location` against the specification; never raises for bad data.
    Returns the report and the context its checks read (None when the package does not
    validate), from which the HTML page draws its figures.

    A package whose descriptor declares a `scope` (a pilot, a smoke run: the plan's [scope])
    is held to that scope: its repetitions, epochs and levels replace the full design's.

    `spec` (or `spec_path`) replaces collect/experiment.toml; `select` keeps
    only the checks whose id starts with one of its prefixes.  `round_trip` is the proof
    already started beside the audit (`start_round_trip`), whose finding the audit collects;
    its caller stops it (`cancel`) once the audit returns or raises.
    """
    registered = select_checks(registered_checks(), select, keep=(INTEGRITY_ID,))
    spec = spec or load_spec(str(spec_path) if spec_path else None)
    return _audit(resolve_package(location), registered, spec, sources_root, round_trip)


def start_round_trip(location, select: list[str] | None = None) -> Beside[RoundTrip] | None:
    """The round-trip proof of the package at `location` started in a forked child process
    (package/beside.py), when `select` keeps it; for `audit_with_context(round_trip=...)`.

    The proof reads the tables on its own, as text, and needs nothing else the audit
    computes: the program starts it first, before it imports numpy and pyarrow (which the
    proof does not use), so that it runs on the second core from the start, beside
    validation and the other checks; its finding is collected last.  Only for the
    `deepgreen` program, whose process holds nothing else: a library caller's process may
    run threads of its own (a framework's), which a fork would copy in whatever state they
    are in."""
    if select and not any(ROUND_TRIP_ID.startswith(prefix) for prefix in select):
        return None
    return Beside(partial(_prove_round_trip, resolve_package(location)))


def _prove_round_trip(location) -> RoundTrip:
    """The proof in the program's child, which runs nothing else: it may fork a reader."""
    return prove_round_trip(Package.open(location), pipelined=True)


def _audit(location, registered, spec: dict, sources_root: Path | None,
           round_trip: Beside | None) -> tuple[Report, AuditContext | None]:
    from deepgreen_audit.audit.context import AuditContext
    from deepgreen_audit.package.validate import validate_tables

    started = time.perf_counter()
    integrity, typed_tables = validate_tables(location)
    validated_in = time.perf_counter() - started  # integrity.validate's time: it reads the result
    report = Report(integrity.subject, "audit", synthetic=integrity.synthetic,
                    notice=integrity.notice)
    if not integrity.valid:
        first = integrity.findings[0] if integrity.findings else None
        for c in registered:
            if c.id == INTEGRITY_ID:
                report.findings.append(c.finding(
                    "fail", f"the package does not validate: {integrity.error_count} error(s); "
                    f"first: [{first.id}] {first.where()}: {first.message}" if first else
                    "the package does not validate", rows_affected=integrity.error_count,
                    seconds=validated_in))
            else:
                report.findings.append(c.finding(
                    "skip", "not run: the package does not validate (integrity.validate)"))
        return report, None
    package = Package.open(location)
    spec = scoped(spec, package.descriptor.get("scope"), package.descriptor_path)
    scope = spec.get("scope")
    if scope:
        report.stats["scope"] = scope
        report.notes.append("audited against the scope the package declares: "
                            + ", ".join(f"{k} {v}" for k, v in scope.items()))
    for key, labels in spec.get("scope_outside_spec", {}).items():
        report.notes.append(f"the declared scope's {key} name what the specification does not "
                            f"hold, left out of the design: {', '.join(map(str, labels))}")
    ctx = AuditContext(package, spec, sources_root, integrity, typed_tables)
    ctx.round_trip = round_trip
    del typed_tables  # the context's now: each goes once it is a frame
    findings = {}
    for c in sorted(registered, key=lambda c: c.id == ROUND_TRIP_ID):  # stable: that one last
        finding = run_check(c, ctx)
        if c.id == INTEGRITY_ID:
            finding = dataclasses.replace(finding, seconds=(finding.seconds or 0.0) + validated_in)
        elif c.id == ROUND_TRIP_ID and round_trip is not None and round_trip.seconds is not None:
            finding = dataclasses.replace(finding, seconds=round_trip.seconds)  # its own time
        findings[c.id] = finding
    report.findings.extend(findings[c.id] for c in registered)
    return report, ctx


def resolve_package(location: str | Path | None) -> str | Path | None:
    """A tables folder without its own descriptor (the shipped `replication/`) is described
    by the datapackage.json one level up whose resources lie in it."""
    if location is None:
        return location
    folder = Path(location)
    parent_descriptor = folder.parent / DESCRIPTOR_NAME
    if (os.path.isdir(folder) and not os.path.lexists(folder / DESCRIPTOR_NAME)
            and os.path.isfile(parent_descriptor)):
        try:
            package = Package.open(parent_descriptor)
            if package.tables_dir.resolve() == folder.resolve():
                return parent_descriptor
        except UserError:
            pass
    return location
