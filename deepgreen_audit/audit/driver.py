"""The audit of a replication package: the suite `audit` run by the suite runner
(deepgreen_audit.suite.run: the integrity gate first, then every check), against the
specification scoped to what the package declares, with the round-trip proof started beside
it and collected last.
"""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.beside import Beside
from deepgreen_audit.package.descriptor import DESCRIPTOR_NAME, Package
from deepgreen_audit.package.rundirs import RoundTrip, prove_round_trip
from deepgreen_audit.report import Finding, Report
from deepgreen_audit.spec import load_spec, scoped
from deepgreen_audit.suite.registry import Check, select_checks
from deepgreen_audit.suite.run import INTEGRITY_ID, run_suite

if TYPE_CHECKING:
    from deepgreen_audit.audit.context import AuditContext

ROUND_TRIP_ID = "integrity.round-trip"


def audit(location: str | Path | None = None, **options) -> Report:
    """Audit the package at `location` (see `audit_with_context`)."""
    return audit_with_context(location, **options)[0]


def audit_with_context(location: str | Path | None = None, *, spec: dict[str, Any] | None = None,
                       spec_path: str | Path | None = None, select: list[str] | None = None,
                       sources_root: Path | None = None,
                       round_trip: Beside[RoundTrip] | None = None,
                       calibration: Path | None = None) -> tuple[Report, AuditContext | None]:
    """Audit the package at `location` against the specification; never raises for bad data.
    Returns the report and the context its checks read (None when the package does not
    validate), from which the HTML page draws its figures.

    A package whose descriptor declares a `scope` (a pilot, a smoke run: the plan's [scope])
    is held to that scope: its repetitions, epochs and levels replace the full design's.

    `spec` (or `spec_path`) replaces collect/experiment.toml; `select` keeps
    only the checks whose id starts with one of its prefixes.  `round_trip` is the proof
    already started beside the audit (`start_round_trip`), whose finding the audit collects;
    its caller stops it (`cancel`) once the audit returns or raises.  `calibration` is the
    between-window calibration package S6.calibration-window reads (None: none).
    """
    registered = select_checks(audit_checks(), select, keep=(INTEGRITY_ID,))
    spec = spec or load_spec(str(spec_path) if spec_path else None)
    return _audit(resolve_package(location), registered, spec, sources_root, round_trip,
                  calibration)


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


def _audit(location, registered, spec: dict[str, Any], sources_root: Path | None,
           round_trip: Beside[RoundTrip] | None,
           calibration: Path | None = None) -> tuple[Report, AuditContext | None]:
    def context_of(report: Report, integrity: Report, typed_tables: dict[str, Any]) -> AuditContext:
        from deepgreen_audit.audit.context import AuditContext

        package = Package.open(location)
        scoped_spec = scoped(spec, package.descriptor.get("scope"), package.descriptor_path)
        scope = scoped_spec.get("scope")
        if scope:
            report.stats["scope"] = scope
            report.notes.append("audited against the scope the package declares: "
                                + ", ".join(f"{k} {v}" for k, v in scope.items()))
        for key, labels in scoped_spec.get("scope_outside_spec", {}).items():
            report.notes.append(f"the declared scope's {key} name what the specification does "
                                f"not hold, left out of the design: {', '.join(map(str, labels))}")
        ctx = AuditContext(package, scoped_spec, sources_root, integrity, typed_tables)
        ctx.round_trip = round_trip
        ctx.calibration = calibration
        return ctx

    def round_trip_time(c: Check[AuditContext], finding: Finding, ctx: AuditContext) -> Finding:
        """The round trip's finding takes its own time, measured in its process."""
        if c.id == ROUND_TRIP_ID and round_trip is not None and round_trip.seconds is not None:
            return dataclasses.replace(finding, seconds=round_trip.seconds)
        return finding

    return run_suite(location, registered, context_of, last=ROUND_TRIP_ID, adjust=round_trip_time)


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
