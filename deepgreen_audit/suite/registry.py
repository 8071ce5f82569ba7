"""The one registry of checks: small functions, each with an id, a section, a severity and a
docstring, grouped in suites that one driver each runs (`run_check` turns a check into a
`Finding` the same way for all of them).

A check is a function ``fn(ctx) -> Outcome`` decorated with `check`, its context parameter
annotated with the suite's context class (mypy checks each one)::

    @check("S5.tracking-mode", "S5", table="environment")
    def tracking_mode(ctx: AuditContext) -> Outcome:
        \"\"\"Every run tracked CodeCarbon in the specified mode.\"\"\"
        ...
        return Outcome.failed("2 runs in process mode", rows=2)

It returns `Outcome.passed` or `Outcome.failed` (reported as ``fail`` for severity
``error`` and ``warn`` for ``warning``; `Outcome.allowed_gap` is a defect the user
accepted, a ``warn``), raises `NotApplicable` when what it checks is absent by the
package's declared scope or kind (one architecture, a local collection, a CPU campaign,
counters the collection declared missing), or raises `Skip` when inputs it needs are
missing where they should be; a skipped check is never a pass, and only a `Skip` (a check
that could not run) leaves the audit unfinished.  What `ctx` is belongs to the suite: the audit's
`AuditContext`, parity's probes of one stack, the API-level calls, the preflight's plan.

Each kind names the modules that hold its suite's checks, by importing them
(`audit.checks.audit_checks`, `collect.parity.parity_checks`, ...), and asks
`registered_checks` for them in order: the registry imports nothing above it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from deepgreen_audit.errors import UserError, did_you_mean
from deepgreen_audit.report import NOT_APPLICABLE, NOT_VERIFIED, SEVERITIES, Finding, Report

#: The suites, each with the sections its checks can belong to.
SUITES: dict[str, tuple[str, ...]] = {
    "audit": ("integrity", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "source"),
    "parity": ("S1", "S2", "S3", "S6"),
    "api-audit": ("S5",),
    "preflight": ("host", "counter", "version", "stack"),
    "codecarbon": ("integrity", "S5", "S6"),
}

class Skip(Exception):
    """Raised by a check whose inputs are missing where they should be: it could not run, so
    what it checks is not verified (the report's `basis` "not verified")."""


class NotApplicable(Skip):
    """Raised by a check that does not apply to the package: what it checks is absent by the
    package's declared scope or kind (`basis` "not applicable").  Reported as a skip, never
    as an unfinished audit, and `--strict` does not fail for it."""


@dataclass(frozen=True)
class Outcome:
    """What one check found: ok or not, a message, how many rows it concerns, its evidence."""

    ok: bool
    message: str
    rows: int | None = None
    details: dict[str, Any] | None = None
    #: a defect the user chose to accept (preflight's --allow-missing-counters): a warning
    allowed: bool = False
    #: how many of the `rows` fail only because the package leaves a checked cell empty (or
    #: lacks the reading): when that is all of them, nothing contradicts the specification and
    #: the finding is "not recorded, so not verifiable" (`Finding.basis`)
    unrecorded: int = 0

    @classmethod
    def passed(cls, message: str, rows: int | None = None, details: dict[str, Any] | None = None) -> Outcome:
        return cls(True, message, rows, details)

    @classmethod
    def failed(cls, message: str, rows: int | None = None, details: dict[str, Any] | None = None,
               unrecorded: int = 0) -> Outcome:
        """A defect; `unrecorded` counts the `rows` that fail only for an empty cell."""
        return cls(False, message, rows, details, unrecorded=int(unrecorded))

    @property
    def basis(self) -> str | None:
        """Why a failed outcome failed: "not recorded" when every failing row fails only for
        what the package does not record, else "contradicted" (the data contradicts the
        specification somewhere).  A check that does not count its unrecorded rows is
        contradicted: a real finding is never filed away as a gap in the records."""
        if self.ok:
            return None
        return "not recorded" if self.unrecorded and self.unrecorded == self.rows else "contradicted"

    @classmethod
    def allowed_gap(cls, message: str, rows: int | None = None, details: dict[str, Any] | None = None,
                    unrecorded: int = 0) -> Outcome:
        """A defect reported as `warn` whatever the check's severity, because the user allowed it
        (a collection declared its missing counters) or the declared scope explains it;
        `rows`, `details` and `unrecorded` as for `failed`."""
        return cls(False, message, rows, details, allowed=True, unrecorded=int(unrecorded))


#: A suite's context: what its checks read (`AuditContext`, `LogContext`, a protocol of them).
Context = TypeVar("Context")
#: The context a check declares it reads; a check reads it and nothing else.
Reads = TypeVar("Reads", contravariant=True)


@dataclass(frozen=True)
class Figure(Generic[Reads]):
    """A figure of the audit's page that shows what convicted a check's rows, declared by the
    checks it shows (`check(..., figure=...)`): drawn once, under the first of them that the
    data contradicts, linked from the others.  `draw(ctx, report)` returns the image (a data:
    URI) and what it shows, or None when there is nothing to draw."""

    key: str
    title: str
    draw: Callable[[Reads, Report], tuple[str, str] | None]


@dataclass(frozen=True)
class Check(Generic[Reads]):
    id: str
    suite: str
    section: str
    severity: str
    table: str | None
    func: Callable[[Reads], Outcome]
    #: the page's figure of the check's evidence; None where its table is the evidence
    figure: Figure[Reads] | None = None
    #: what to change in the set-up so that the next measurement passes (`Finding.remedy`)
    remedy: str | None = None

    @property
    def doc(self) -> str:
        return " ".join((self.func.__doc__ or "").split())

    def finding(self, status: str, message: str, **where) -> Finding:
        """A finding of this check (its id, section, severity; the table it counts rows of)."""
        where.setdefault("resource", self.table)
        return Finding(id=self.id, status=status, message=message, severity=self.severity,
                       section=self.section, **where)


#: Each suite's checks by id, whatever context each reads: `registered_checks` gives them to a
#: kind typed by its context, `check_for` proves a reused one can read another kind's.
REGISTRY: dict[str, dict[str, Check[Any]]] = {suite: {} for suite in SUITES}

#: A check function: one context argument (its suite's context class), an `Outcome`.
CheckFunc = TypeVar("CheckFunc", bound=Callable[[Any], Outcome])


def check(id: str, section: str, *, suite: str = "audit", severity: str = "error",
          table: str | None = None, figure: Figure[Any] | None = None,
          remedy: str | None = None) -> Callable[[CheckFunc], CheckFunc]:
    """Register the decorated function as the check `id` of `section` in `suite`.

    `table` names the table whose rows `rows_affected` counts (row-level checks); `figure` the
    page's figure that shows its evidence; `remedy` what to change in the set-up, which a
    failing or warning finding carries.
    """
    if section not in SUITES.get(suite, ()):
        raise ValueError(f"check {id}: unknown section {section!r} of suite {suite!r}")
    if severity not in SEVERITIES:
        raise ValueError(f"check {id}: unknown severity {severity!r}")
    if not id.startswith(section + "."):
        raise ValueError(f"check {id}: its id must start with its section {section!r}")

    def register(func: CheckFunc) -> CheckFunc:
        if not (func.__doc__ or "").strip():
            raise ValueError(f"check {id} needs a docstring: it is what the check lists print")
        known = REGISTRY[suite].get(id)
        if known is not None and known.func.__qualname__ != func.__qualname__:
            raise ValueError(f"check id {id} registered twice in suite {suite}")
        REGISTRY[suite][id] = Check(id, suite, section, severity, table, func, figure, remedy)
        return func
    return register


def check_for(func: Callable[[Context], Outcome], kind: type[Context],
              suite: str = "audit") -> Check[Context]:
    """The registered check `func` of `suite`, to run on contexts of `kind` (another kind's
    context than the one it was written for): the type checker proves that `kind` gives what
    the check declares it reads (its parameter's type, a protocol)."""
    found = next((c for c in REGISTRY[suite].values() if c.func is func), None)
    if found is None:
        raise ValueError(f"{func.__qualname__} is not a registered check of suite {suite}")
    return found


def registered_checks(suite: str, modules: Sequence[ModuleType],
                      context: type[Context]) -> list[Check[Context]]:
    """The checks of `suite` that `modules` define, in the order of `modules` and of definition
    (whichever module another imported first), each reading a `context`.  Each kind names its
    suite's modules (`audit.checks.audit_checks`, ...): no layer imports one above it to find
    its checks."""
    rank = {module.__name__: i for i, module in enumerate(modules)}
    return sorted((c for c in REGISTRY[suite].values() if c.func.__module__ in rank),
                  key=lambda c: rank[c.func.__module__])


def select_checks(checks: list[Check[Context]], select: list[str] | None,
                  keep: tuple[str, ...] = ()) -> list[Check[Context]]:
    """The checks whose id starts with one of the `select` prefixes, plus those in `keep` (the
    integrity check every audit runs first); all of them without `select`.

    A prefix that matches no check is a usage error naming the valid ones, never an audit
    that runs nothing and passes (a typo, `--select S9`, must not make a CI gate green).
    """
    if not select:
        return list(checks)
    unknown = [p for p in select if not any(c.id.startswith(p) for c in checks)]
    if unknown:
        sections = list(dict.fromkeys(c.section for c in checks))
        close = did_you_mean(unknown[0], [*sections, *(c.id for c in checks)])
        hint = f" ({close})" if close else ""
        raise UserError(f"--select {unknown[0]} matches no check{hint}; valid prefixes are the "
                        f"sections {', '.join(sections)} or any check id ('deepgreen audit "
                        "--list')", code="usage-error")
    return [c for c in checks if c.id in keep or any(c.id.startswith(p) for p in select)]


def run_check(c: Check[Context], ctx: Context, **where: str | None) -> Finding:
    """One check's finding; a crash is a failure naming the error (a bug), never a pass or a skip.

    A crash counts as `fail` whatever the check's severity: the check could not say that
    what it checks conforms, so a strict run must not exit 0.  `where` (resource=...)
    says what the finding is about when the check runs once per subject (parity's stacks).
    """
    started = time.perf_counter()
    try:
        outcome = c.func(ctx)
    except NotApplicable as exc:
        return c.finding("skip", str(exc), basis=NOT_APPLICABLE,
                         seconds=time.perf_counter() - started, **where)
    except Skip as exc:
        return c.finding("skip", str(exc), basis=NOT_VERIFIED,
                         seconds=time.perf_counter() - started, **where)
    except UserError as exc:
        return c.finding("skip", f"could not run: {exc}", basis=NOT_VERIFIED,
                         seconds=time.perf_counter() - started, **where)
    except Exception as exc:  # a bug in a check must not hide the other checks' results
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return c.finding("fail", f"the check crashed ({type(exc).__name__}: {exc} at "
                                 f"{Path(last.filename).name}:{last.lineno}); report this as a bug",
                         seconds=time.perf_counter() - started, **where)
    seconds = time.perf_counter() - started
    status = "pass" if outcome.ok else ("fail" if c.severity == "error" and not outcome.allowed else "warn")
    rows = outcome.rows if outcome.rows is not None else (0 if c.table and outcome.ok else None)
    return c.finding(status, outcome.message, rows_affected=rows, details=outcome.details,
                     basis=outcome.basis, seconds=seconds, remedy=None if outcome.ok else c.remedy,
                     **where)
