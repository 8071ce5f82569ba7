"""Running a suite of checks over one audited package, for every kind alike.

The integrity gate comes first: the checks read typed tables, which only a valid package
has (deepgreen_audit.package.validate), so on an invalid package `integrity.validate` fails
naming the first error and every other check is skipped; the report then says that the audit
did not finish.  On a valid package each check runs once, in the suite's order, through
`run_check`, and the report lists the findings in that order.  What a kind adds (its context,
notes on the report, a finding reworded in its terms) it passes in; nothing here knows a kind.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from deepgreen_audit.report import Finding, Report
from deepgreen_audit.suite.registry import Check, run_check

#: The check that stands for the integrity gate in every suite's report.
INTEGRITY_ID = "integrity.validate"

Context = TypeVar("Context")


def run_suite(location: str | Path | None, checks: Sequence[Check[Context]],
              context_of: Callable[[Report, Report, dict[str, Any]], Context], *,
              tables: tuple[str, ...] | None = None,
              last: str | None = None,
              adjust: Callable[[Check[Context], Finding, Context], Finding] | None = None
              ) -> tuple[Report, Context] | tuple[Report, None]:
    """The audit report of the package at `location` and the context its checks read (None
    when it does not validate).

    `context_of(report, integrity, typed_tables)` makes the kind's context from the
    validation report and the typed tables (it may add notes to the audit's `report`); the
    typed tables are the context's from then on.  `tables` names the resources the kind's
    package holds (the campaign's four by default).  `last` is a check run after all the
    others (one that collects work started beside the audit) and listed in its place;
    `adjust` rewrites a finding once its check has run (a kind's words, a time measured
    elsewhere)."""
    from deepgreen_audit.package.validate import validate_tables

    started = time.perf_counter()
    integrity, typed_tables = (validate_tables(location) if tables is None
                               else validate_tables(location, tables))
    validated_in_s = time.perf_counter() - started  # integrity.validate's time: it reads the result
    report = Report(integrity.subject, "audit", synthetic=integrity.synthetic,
                    notice=integrity.notice)
    if not integrity.valid:
        report.findings.extend(refused(checks, integrity, validated_in_s))
        return report, None
    ctx = context_of(report, integrity, typed_tables)
    del typed_tables  # the context's now: each goes once it is read
    # arrow's allocator keeps the pages of what validation and the context freed for reuse, and
    # the checks allocate Python objects, not arrow's: given back, a long log's audit is ~100 MB less
    pa.default_memory_pool().release_unused()
    findings = {}
    for c in sorted(checks, key=lambda c: c.id == last):  # stable: `last` last
        finding = run_check(c, ctx)
        if c.id == INTEGRITY_ID:
            finding = dataclasses.replace(finding, seconds=(finding.seconds or 0.0) + validated_in_s)
        findings[c.id] = adjust(c, finding, ctx) if adjust else finding
    report.findings.extend(findings[c.id] for c in checks)
    return report, ctx


def refused(checks: Sequence[Check[Context]], integrity: Report, validated_in_s: float) -> list[Finding]:
    """The findings of a package that does not validate: the gate fails naming the first
    error, every other check is not run."""
    first = integrity.findings[0] if integrity.findings else None
    found = []
    for c in checks:
        if c.id == INTEGRITY_ID:
            found.append(c.finding(
                "fail", f"the package does not validate: {integrity.error_count} error(s)"
                + (f"; first: [{first.id}] {first.where()}: {first.message}" if first else ""),
                rows_affected=integrity.error_count, seconds=validated_in_s))
        else:
            found.append(c.finding("skip", f"not run: the package does not validate ({INTEGRITY_ID})"))
    return found
