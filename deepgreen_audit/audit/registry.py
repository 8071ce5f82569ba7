"""The registry of audit checks: small functions, each with an id, a spec section,
a severity and a docstring, run by one driver (`deepgreen_audit.audit.driver`).

A check is a function ``fn(ctx) -> Outcome`` decorated with `check`::

    @check("S5.tracking-mode", "S5", table="environment")
    def tracking_mode(ctx):
        \"\"\"Every run tracked CodeCarbon in the specified mode.\"\"\"
        ...
        return Outcome.failed("2 runs in process mode", rows=2)

It returns `Outcome.passed`, `Outcome.failed` (reported as ``fail`` for
severity ``error`` and ``warn`` for ``warning``) or raises `Skip` when its
inputs are missing; a skipped check is never a pass.  Modules holding checks
are listed in `CHECK_MODULES`; a module of another layer registers its checks
by decorating them and adding its dotted name there (one line).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

#: Sections a check can belong to: the specification's, plus package integrity and sources.
SECTIONS = ("integrity", "S1", "S2", "S3", "S4", "S5", "S6", "source")
SEVERITIES = ("error", "warning")

#: Modules whose import registers checks, in the order their checks run.
CHECK_MODULES: tuple[str, ...] = (
    "deepgreen_audit.audit.checks.integrity",
    "deepgreen_audit.audit.checks.model",
    "deepgreen_audit.audit.checks.recipe",
    "deepgreen_audit.audit.checks.measurement",
    "deepgreen_audit.audit.checks.replication",
    "deepgreen_audit.audit.checks.sources",
)


class Skip(Exception):
    """Raised by a check whose inputs or dependencies are missing."""


@dataclass(frozen=True)
class Outcome:
    """What one check found: ok or not, a message, and how many rows it concerns."""

    ok: bool
    message: str
    rows: int | None = None
    details: dict | None = None

    @classmethod
    def passed(cls, message: str, rows: int | None = None, details: dict | None = None) -> "Outcome":
        return cls(True, message, rows, details)

    @classmethod
    def failed(cls, message: str, rows: int | None = None, details: dict | None = None) -> "Outcome":
        return cls(False, message, rows, details)


@dataclass(frozen=True)
class Check:
    id: str
    section: str
    severity: str
    table: str | None
    func: Callable

    @property
    def doc(self) -> str:
        return " ".join((self.func.__doc__ or "").split())


REGISTRY: dict[str, Check] = {}


def check(id: str, section: str, *, severity: str = "error", table: str | None = None):
    """Register the decorated function as the check `id` of `section`.

    `table` names the table whose rows `rows_affected` counts (row-level checks).
    """
    if section not in SECTIONS:
        raise ValueError(f"check {id}: unknown section {section!r}")
    if severity not in SEVERITIES:
        raise ValueError(f"check {id}: unknown severity {severity!r}")
    if not id.startswith(section + "."):
        raise ValueError(f"check {id}: its id must start with its section {section!r}")

    def register(func):
        if not (func.__doc__ or "").strip():
            raise ValueError(f"check {id} needs a docstring: it is what `audit --list` prints")
        if id in REGISTRY and REGISTRY[id].func.__qualname__ != func.__qualname__:
            raise ValueError(f"check id {id} registered twice")
        REGISTRY[id] = Check(id, section, severity, table, func)
        return func
    return register


def registered_checks() -> list[Check]:
    """Every registered check, in the order of CHECK_MODULES and definition (whichever
    module another one imported first: the HTML report's figures import two of them)."""
    for module in CHECK_MODULES:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(CHECK_MODULES)}
    return sorted(REGISTRY.values(), key=lambda c: rank.get(c.func.__module__, len(rank)))
