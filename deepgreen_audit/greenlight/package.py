"""The API-level data package: `api_calls` and `api_samples`, plus SHA256SUMS.

Same format as the replication package (canonical CSV, SHA256SUMS, a Data
Package descriptor with inline schemas from `schemas/`) but with its own
table list, so the writer and the validator here are the shared ones
parameterised by `API_TABLES`; the per-table checks are
`deepgreen_audit.package.validate`'s, unchanged.
"""

from __future__ import annotations

from pathlib import Path


from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic, descriptor as _descriptor
from deepgreen_audit.package import validate as _validate
from deepgreen_audit.package.checksums import FILENAME as SUMS_NAME, format_sums, sha256_bytes
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.report import Report
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable, canonical_bytes, rows_from_columns

#: The tables of an API-level package, in the order they are written.
API_TABLES: tuple[str, ...] = ("api_calls", "api_samples")
#: The descriptor key that says which kind of package this is.
KIND_KEY = "deepgreen:package"
KIND = "api-profiles"


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
                      overwrite: bool = False, inputs=()) -> Path:
    """Write the API tables under `out` atomically and describe them; returns the descriptor.

    `inputs` are what the caller read, which `out` must not overlap."""
    out = Path(out)
    data = {}
    for name in API_TABLES:
        expected = load_schema(name).field_names
        if tables[name].header != expected:
            raise ValueError(f"{name}: header {tables[name].header} is not the schema's {expected}")
        data[name] = canonical_bytes(tables[name])
    sums = {f"{name}.csv": sha256_bytes(data[name]) for name in API_TABLES}
    descriptor = {"$schema": _descriptor.PACKAGE_PROFILE, KIND_KEY: KIND}
    descriptor.update({k: v for k, v in meta.items() if k not in _descriptor.GENERATED_KEYS})
    descriptor["checksums"] = SUMS_NAME
    descriptor["resources"] = [{
        "name": name, "type": "table", "path": f"{name}.csv", "format": "csv",
        "mediatype": "text/csv", "encoding": "utf-8", "bytes": len(data[name]),
        "hash": "sha256:" + sums[f"{name}.csv"], "schema": load_schema(name).descriptor,
    } for name in API_TABLES]
    with atomic.StagedDirectory(out, overwrite, inputs=inputs) as staged:
        for name in API_TABLES:
            (staged.path / f"{name}.csv").write_bytes(data[name])
        (staged.path / SUMS_NAME).write_text(format_sums(sums), encoding="utf-8")
        (staged.path / _descriptor.DESCRIPTOR_NAME).write_text(_descriptor.dumps(descriptor),
                                                               encoding="utf-8")
    return out / _descriptor.DESCRIPTOR_NAME


def validate_api_package(location: str | Path) -> Report:
    """Integrity of an API-level package: checksums, schemas, keys, canonical form."""
    return _validate.validate(location, API_TABLES, descriptor_check=_is_api_package)


def _is_api_package(package: Package, report: Report) -> bool:
    if package.descriptor.get(KIND_KEY) != KIND:
        report.add("descriptor-error", f"not an API-level package ({KIND_KEY} is not {KIND!r})")
        return False
    return True


def open_api_package(location: str | Path) -> Package:
    """Open and validate an API-level package, or a UserError naming the first problem."""
    report = validate_api_package(location)
    if not report.valid:
        first = report.findings[0]
        raise UserError(f"is not a valid API-level package: [{first.id}] {first.where()}: "
                        f"{first.message}", path=location, code="invalid-package")
    return Package.open(location)
