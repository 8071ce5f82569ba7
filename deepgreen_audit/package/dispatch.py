"""What the package verbs do with whichever kind of package they are given.

The kind comes from the descriptor (`kinds.kind_of`).  A package of ours is
validated by `validate.validate` parameterised by its kind's tables; a
foreign Frictionless package by frictionless (`foreign`).  A verb that does
not apply to a kind refuses it with a message naming the verb that does.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.kinds import CODECARBON_LOG, FOREIGN, require_verb
from deepgreen_audit.report import Report


def validate_package(location: str | Path | None = None, *, hide_pandas: bool = False) -> Report:
    """Validate the package at `location`, whatever its kind; never raises for bad data.

    The report's stats name the kind (`kind`) and the tables checked (`tables`).
    `hide_pandas` validates a package of ours with pandas hidden from pyarrow, which would
    otherwise import it (`arrays.pandas_hidden`: only for a process that ends afterwards)."""
    from deepgreen_audit.package import arrays, validate as _validate
    from deepgreen_audit.package.foreign import validate_foreign

    try:
        package = Package.open(location)
    except UserError:
        return _validate.validate(location)  # which reports the unreadable descriptor
    try:
        kind = package.kind
    except UserError as exc:
        report = Report(str(package.descriptor_path), "validate")
        report.add(exc.code, exc.message)
        return report
    if kind is FOREIGN:
        report = Report(str(package.descriptor_path), "validate")
        validate_foreign(package, report)
    else:
        with arrays.pandas_hidden() if hide_pandas else contextlib.nullcontext():
            report = _validate.validate(location, kind.tables)
        report.stats["tables"] = list(kind.tables)
    report.stats["kind"] = kind.name
    return report


def check_verb(location: str | Path | None, verb: str) -> None:
    """Refuse `verb` on a kind of package it does not apply to; a descriptor that cannot be
    read is left to the verb, which reports it in its own words."""
    try:
        package = Package.open(location)
    except UserError:
        return
    require_verb(package.kind, verb, package.descriptor_path)


def is_codecarbon_log(location: str | Path | None) -> bool:
    """Whether `location` is a package of CodeCarbon logs (`deepgreen import codecarbon`),
    which the audit hands to its own suite."""
    try:
        return Package.open(location).kind is CODECARBON_LOG
    except UserError:
        return False
