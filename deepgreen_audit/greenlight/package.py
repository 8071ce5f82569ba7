"""The API-level data package: `api_calls` and `api_samples`, plus SHA256SUMS.

Same format as the replication package (canonical CSV, SHA256SUMS, a Data
Package descriptor with inline schemas from `schemas/`) but of its own kind,
`kinds.API_PROFILES`, which names its tables; the writer and the validator
are the shared ones parameterised by that kind.
"""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import validate as _validate
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.kinds import API_PROFILES, KIND_KEY
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable, rows_from_columns
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.report import Report


def text_table(name: str, columns: dict[str, list]) -> TextTable:
    """Canonical text rows of table `name` from Python values per column, in key order."""
    schema = load_schema(name)
    rows = rows_from_columns(schema, columns)
    keys = [schema.field_names.index(k) for k in schema.primary_key]
    rows.sort(key=lambda r: tuple(_key(schema.fields[i], r[i]) for i in keys))
    return TextTable(header=schema.field_names, rows=rows)


def _key(field, text: str):
    """The sort key of a key cell, as the validator orders rows (enums by their order)."""
    if field.enum is not None:
        return field.enum.index(text)
    return int(text) if field.type == "integer" else text


def write_api_package(tables: dict[str, TextTable], out: Path, meta: dict, *,
                      overwrite: bool = False, inputs=(), check=None) -> Path:
    """Write the API tables under `out` atomically and describe them; returns the descriptor.

    `inputs` are what the caller read, which `out` must not overlap; `check` is
    `write_package`'s, called on the staged package."""
    return write_package(tables, out, meta, overwrite=overwrite, inputs=inputs, kind=API_PROFILES,
                         check=check)


def validate_api_package(location: str | Path) -> Report:
    """Integrity of an API-level package: the shared validator over its kind's tables.  A
    package of another kind (as `kinds` reads its descriptor) is one finding saying so."""
    try:
        kind = Package.open(location).kind
    except UserError:
        kind = API_PROFILES  # the validator reports the unreadable descriptor in its own words
    if kind is not API_PROFILES:
        report = Report(str(location), "validate")
        report.add("descriptor-error", f"not an API-level package: it is {kind.title!r} "
                   f"({KIND_KEY} is not {API_PROFILES.name!r})")
        return report
    return _validate.validate(location, API_PROFILES.tables)


def open_api_package(location: str | Path, report: Report | None = None) -> Package:
    """Open an API-level package that validates (`report`, when the caller has validated it
    already), or a UserError naming the first problem."""
    report = report or validate_api_package(location)
    if not report.valid:
        first = report.findings[0]
        raise UserError(f"is not a valid API-level package: [{first.id}] {first.where()}: "
                        f"{first.message}", path=location, code="invalid-package")
    return Package.open(location)
