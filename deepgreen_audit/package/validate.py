"""Integrity validation of a replication package.

Checks, in order: the descriptor (paths, the four resources, schemas equal
to `schemas/`), SHA256SUMS and the descriptor's bytes and hash, then each
table as text (encoding, line endings, a truncated last line, header,
cell counts, types, canonical form), its constraints through the pandera
schema derived from the Table Schema, its primary key and row order, and
last the foreign keys between tables.  This is at least what
`frictionless validate` checks, plus checksums and canonical form; the
conformance audit (the experiment specification) is `deepgreen audit`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.canonical import DATETIME_RE, INTEGER_RE, NUMBER_RE
from deepgreen_audit.package.checksums import parse_sums, sha256_bytes
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.report import Report
from deepgreen_audit.package.schema import TABLES, TableSchema, load_schema, pandera_schema
from deepgreen_audit.package.tables import canonical_text, parse_text

_TYPE_RE = {"integer": INTEGER_RE, "number": NUMBER_RE, "datetime": DATETIME_RE,
            "boolean": re.compile("true|false")}
_CHECK_NAMES = {"not_nullable": "required", "field_uniqueness": "unique"}


def validate(location: str | Path | None = None) -> Report:
    """Validate the package at `location` (folder or descriptor); never raises for bad data."""
    try:
        package = Package.open(location)
    except UserError as exc:
        report = Report(package=str(location or "datapackage.json"))
        report.add(exc.code if exc.code == "missing-descriptor" else "descriptor-error", str(exc))
        return report
    report = Report(package=str(package.descriptor_path), synthetic=package.synthetic,
                    notice=package.notice())
    report.stats["provenance"] = {k: package.descriptor.get(k) for k in
                                  ("name", "title", "provenance") if k in package.descriptor}
    sums = _check_checksums(package, report)
    keys: dict[str, pd.DataFrame] = {}
    total_bytes = 0
    for name in TABLES:
        schema = load_schema(name)
        try:
            path = package.table_path(name)
            resource = package.resource(name)
        except UserError as exc:
            report.add(exc.code, exc.message, resource=name)
            continue
        if resource.get("schema") != schema.descriptor:
            report.add("schema-mismatch", "the descriptor's schema differs from "
                       f"schemas/{name}.json; regenerate the descriptor", resource=name)
        if path.is_symlink():
            report.add("symlink", f"{path} is a symbolic link", resource=name)
            continue
        if not path.is_file():
            report.add("missing-table", f"{path} does not exist", resource=name)
            continue
        data = path.read_bytes()
        total_bytes += len(data)
        _check_hashes(name, path, data, resource, sums, report)
        frame = _check_table(schema, data, report)
        if frame is not None:
            keys[name] = frame
            report.stats[name] = {"rows": len(frame), "bytes": len(data)}
    _check_foreign_keys(keys, report)
    report.stats["bytes"] = total_bytes
    return report


def _check_checksums(package: Package, report: Report) -> dict[str, str] | None:
    path = package.checksums_path
    if not path.is_file():
        report.add("checksum-missing", f"{path} does not exist")
        return None
    try:
        return parse_sums(path)
    except UserError as exc:
        report.add("checksum-format", str(exc))
        return None


def _check_hashes(name, path, data, resource, sums, report) -> None:
    digest = sha256_bytes(data)
    if sums is not None:
        listed = sums.get(path.name)
        if listed is None:
            report.add("checksum-missing", f"SHA256SUMS has no line for {path.name}", resource=name)
        elif listed != digest:
            report.add("checksum-mismatch", f"{path.name} has SHA256 {digest}, SHA256SUMS says "
                       f"{listed}: the file changed after the package was written", resource=name)
    if resource.get("bytes") != len(data):
        report.add("bytes-mismatch", f"{path.name} has {len(data)} bytes, the descriptor says "
                   f"{resource.get('bytes')}", resource=name)
    if resource.get("hash") != f"sha256:{digest}":
        report.add("hash-mismatch", f"{path.name} has sha256:{digest}, the descriptor says "
                   f"{resource.get('hash')}", resource=name)


def _check_table(schema: TableSchema, data: bytes, report: Report) -> pd.DataFrame | None:
    """Text-level and row checks of one table; returns its key columns as text."""
    name = schema.name
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.add("encoding-error", f"byte {exc.start} is not UTF-8", resource=name,
                   row=data[: exc.start].count(b"\n") + 1)
        return None
    if "\r" in text:
        report.add("line-ending", "CR or CRLF line endings; canonical CSV uses LF",
                   resource=name, row=text[: text.index("\r")].count("\n") + 1)
    if text and not text.endswith("\n"):
        report.add("truncated-row", "the last row does not end with a newline: the file "
                   "was cut short", resource=name, row=text.count("\n") + 1)
    try:
        table = parse_text(text, name)
    except UserError as exc:
        report.add(exc.code, exc.message, resource=name, row=exc.row)
        return None
    expected = schema.field_names
    for col in expected:
        if col not in table.header:
            report.add("missing-column", f"the header lacks column {col!r}", resource=name,
                       row=1, field=col)
    for col in table.header:
        if col not in expected:
            report.add("extra-column", f"the header has column {col!r}, which the schema "
                       "does not define", resource=name, row=1, field=col)
    present = [c for c in table.header if c in expected]
    if present != [c for c in expected if c in table.header]:
        report.add("header-order", "columns are not in the schema's order: "
                   + ", ".join(expected), resource=name, row=1)
    width = len(table.header)
    good_rows = []
    for i, row in enumerate(table.rows):
        if len(row) != width:
            report.add("field-count", f"{len(row)} cells, the header has {width}",
                       resource=name, row=i + 2)
        else:
            good_rows.append(row)
    rows = good_rows if len(good_rows) != len(table.rows) else table.rows
    text_cols = {c: [r[i] for r in rows] for i, c in enumerate(table.header) if c in expected}
    frame = {}
    bad_any = np.zeros(len(rows), dtype=bool)
    for col, cells in text_cols.items():
        field = schema.field(col)
        frame[col], bad = _typed_column(name, field, cells, report)
        bad_any |= bad
    typed = pd.DataFrame(frame)
    _run_pandera(schema, typed, report)
    key_cols = [c for c in schema.primary_key if c in text_cols]
    keys = pd.DataFrame({c: text_cols[c] for c in key_cols})
    if len(key_cols) == len(schema.primary_key) and key_cols:
        dup = keys.duplicated(keep="first").to_numpy()
        for i in np.flatnonzero(dup)[:50]:
            report.add("primary-key-error", "primary key (" + ", ".join(
                f"{c}={keys.iloc[i][c]}" for c in key_cols) + ") repeats an earlier row",
                resource=name, row=int(i) + 2)
        if not dup.any() and not bad_any.any():
            _check_order(schema, typed, report)
    if not report.findings_for(name):
        canonical = canonical_text(table.header, table.rows)
        if canonical != text:
            line = _first_difference(canonical, text)
            report.add("non-canonical-row", "not written in canonical CSV (quoting or spacing); "
                       "rewrite the package with deepgreen", resource=name, row=line)
    keys.attrs["rows"] = len(rows)
    return keys


def _typed_column(resource, field, cells, report):
    """Type-check text cells; returns typed values (bad cells missing) and the bad mask."""
    arr = pa.array(cells, type=pa.string())
    empty = pc.equal(arr, "").to_numpy(zero_copy_only=False)
    bad = np.zeros(len(cells), dtype=bool)
    if field.type in _TYPE_RE:
        ok = pc.match_substring_regex(arr, "^(?:" + _TYPE_RE[field.type].pattern + ")$")
        bad = ~ok.to_numpy(zero_copy_only=False) & ~empty
        for i in np.flatnonzero(bad):
            report.add("type-error", f"{cells[i]!r} is not a {field.type}" +
                       (" (canonical form: ISO 8601 UTC ending in Z)" if field.type == "datetime" else ""),
                       resource=resource, row=int(i) + 2, field=field.name)
        if field.type == "number":
            for i in np.flatnonzero(~bad & ~empty):
                if repr(float(cells[i])) != cells[i]:
                    report.add("non-canonical-cell", f"{cells[i]!r} is written "
                               f"{repr(float(cells[i]))!r} in canonical form",
                               resource=resource, row=int(i) + 2, field=field.name)
        elif field.type == "datetime":
            for i in np.flatnonzero(~bad & ~empty):
                try:
                    pd.Timestamp(cells[i])
                except ValueError:
                    bad[i] = True
                    report.add("type-error", f"{cells[i]!r} is not a valid date and time",
                               resource=resource, row=int(i) + 2, field=field.name)
    missing = empty | bad
    masked = pc.if_else(pa.array(missing), pa.scalar(None, pa.string()), arr)
    if field.type == "integer":
        values = pd.array(pc.cast(masked, pa.int64()).to_pylist(), dtype="Int64")
    elif field.type == "number":
        values = pc.cast(masked, pa.float64()).to_numpy(zero_copy_only=False)
    elif field.type == "boolean":
        values = pd.array(pc.equal(masked, "true").to_pylist(), dtype="boolean")
    elif field.type == "datetime":
        values = pd.array(pc.cast(masked, pa.timestamp("us", tz="UTC")).to_pandas())
    else:
        values = pd.Series(masked.to_pylist(), dtype="object")
    return values, bad


def _run_pandera(schema: TableSchema, typed: pd.DataFrame, report: Report) -> None:
    import pandera.errors

    checked = pandera_schema(schema)
    cols = [c for c in schema.field_names if c in typed.columns]
    checked = checked.select_columns(cols) if len(cols) != len(schema.fields) else checked
    try:
        checked.validate(typed, lazy=True)
    except pandera.errors.SchemaErrors as exc:
        cases = exc.failure_cases
        for _, case in cases.iterrows():
            column = case.get("column")
            check = str(case.get("check"))
            index = case.get("index")
            row = int(index) + 2 if index is not None and not pd.isna(index) else None
            if check == "field_uniqueness":
                report.add("unique-error", f"{case.get('failure_case')!r} repeats in a unique column",
                           resource=schema.name, row=row, field=column)
            elif check == "not_nullable":
                report.add("constraint-error", "a value is required", resource=schema.name,
                           row=row, field=column)
            elif row is not None:
                report.add("constraint-error", f"{case.get('failure_case')!r} breaks the "
                           f"constraint: {check}", resource=schema.name, row=row, field=column)


def _sort_key(schema: TableSchema, typed: pd.DataFrame) -> pd.DataFrame:
    key = {}
    for col in schema.primary_key:
        f = schema.field(col)
        if f.enum is not None:
            key[col] = typed[col].map({v: i for i, v in enumerate(f.enum)})
        else:
            key[col] = typed[col]
    return pd.DataFrame(key)


def _check_order(schema: TableSchema, typed: pd.DataFrame, report: Report) -> None:
    """Rows must be in primary-key order: the one canonical order of a table."""
    if len(typed) < 2:
        return
    key = _sort_key(schema, typed)
    order = key.sort_values(list(key.columns), kind="stable").index.to_numpy()
    moved = np.flatnonzero(order != np.arange(len(order)))
    if len(moved):
        report.add("row-order", "rows are not in primary-key order ("
                   + ", ".join(schema.primary_key) + "); first misplaced row",
                   resource=schema.name, row=int(moved[0]) + 2)


def canonical_order(schema: TableSchema, typed: pd.DataFrame) -> np.ndarray:
    """Row positions that put a typed table in its canonical (primary-key) order."""
    key = _sort_key(schema, typed)
    return key.sort_values(list(key.columns), kind="stable").index.to_numpy()


def _check_foreign_keys(keys: dict[str, pd.DataFrame], report: Report) -> None:
    for name in TABLES:
        if name not in keys:
            continue
        for fields, ref, ref_fields in load_schema(name).foreign_keys:
            if ref not in keys or any(f not in keys[name] for f in fields):
                continue
            parent = set(zip(*(keys[ref][f] for f in ref_fields)))
            child = list(zip(*(keys[name][f] for f in fields)))
            for i, value in enumerate(child):
                if value not in parent:
                    report.add("foreign-key-error", f"{', '.join(fields)}={', '.join(value)} "
                               f"refers to no row of {ref}", resource=name, row=i + 2,
                               field=fields[0])


def _first_difference(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.split("\n"), b.split("\n")), start=1):
        if x != y:
            return number
    return min(a.count("\n"), b.count("\n")) + 1
