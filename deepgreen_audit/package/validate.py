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

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.canonical import DATETIME_RE, INTEGER_RE, NUMBER_RE
from deepgreen_audit.package.checksums import parse_sums, sha256_bytes
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.report import Report
from deepgreen_audit.package.schema import TABLES, TableSchema, load_schema, pandera_schema
from deepgreen_audit.package.tables import canonical_text, parse_text

_TYPE_RE = {"integer": INTEGER_RE, "number": NUMBER_RE, "datetime": DATETIME_RE,
            "boolean": re.compile("true|false")}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
#: Dates and times a measurement can carry: none before 2000 (no NVML energy counter
#: existed) and none after 2100; anything else is a corrupt or mistyped cell.
PLAUSIBLE_DATETIMES = (pd.Timestamp("2000-01-01", tz="UTC"), pd.Timestamp("2100-01-01", tz="UTC"))
#: Tables every run must have rows in (referential completeness, beyond the foreign keys).
RUN_CHILDREN = ("environment", "blocks")


def validate(location: str | Path | None = None, tables: tuple[str, ...] = TABLES,
             descriptor_check=None) -> Report:
    """Validate the package at `location` (folder or descriptor); never raises for bad data.

    `tables` names the resources (and `schemas/<name>.json`) the package must
    hold: the four campaign tables by default; other kinds of package (the
    API-level profiles) pass their own, with `descriptor_check(package, report)`
    returning False to stop when the descriptor is not of their kind.
    """
    try:
        package = Package.open(location)
    except UserError as exc:
        report = Report(str(location or "datapackage.json"), "validate")
        report.add(exc.code if exc.code == "missing-descriptor" else "descriptor-error", str(exc))
        return report
    report = Report(str(package.descriptor_path), "validate", synthetic=package.synthetic,
                    notice=package.notice())
    report.stats["provenance"] = {k: package.descriptor.get(k) for k in
                                  ("name", "title", "provenance") if k in package.descriptor}
    if descriptor_check is not None and not descriptor_check(package, report):
        return report
    try:
        sums = _check_checksums(package, report)
    except UserError as exc:
        report.add(exc.code, exc.message)
        sums = None
    keys: dict[str, dict] = {}
    total_bytes = 0
    for name in tables:
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
        table_keys = _check_table(schema, data, report)
        if table_keys is not None:
            keys[name] = table_keys
    _check_foreign_keys(tables, keys, report)
    _check_runs_complete(keys, report)
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


def _split_columns(data: bytes, text: str, name: str, report: Report):
    """Header and text columns (pyarrow string arrays), plus the parsed rows when quoted.

    Fast path: a file without quotes or carriage returns is read by pyarrow's
    CSV reader (no cell can hold a delimiter, so it is canonical CSV as far
    as quoting goes).  Anything else, or any parse problem, goes through
    Python's csv module, which reports rows precisely.
    """
    if '"' not in text and "\r" not in text and text.endswith("\n"):
        header = text[: text.index("\n")].split(",")
        if len(set(header)) == len(header) and all(header):
            try:
                table = pcsv.read_csv(
                    io.BytesIO(data),
                    read_options=pcsv.ReadOptions(use_threads=True, block_size=1 << 22),
                    parse_options=pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False),
                    convert_options=pcsv.ConvertOptions(
                        column_types={c: pa.string() for c in header}, strings_can_be_null=False))
                return header, {c: table.column(c).combine_chunks() for c in header}, None
            except (pa.ArrowInvalid, ValueError):
                pass
    try:
        parsed = parse_text(text, name)
    except UserError as exc:
        report.add(exc.code, exc.message, resource=name, row=exc.row)
        return None
    width = len(parsed.header)
    rows = []
    for i, row in enumerate(parsed.rows):
        if len(row) != width:
            report.add("field-count", f"{len(row)} cells, the header has {width}",
                       resource=name, row=i + 2)
        else:
            rows.append(row)
    columns = {c: pa.array([r[i] for r in rows], type=pa.string())
               for i, c in enumerate(parsed.header)}
    return parsed.header, columns, parsed


def _check_table(schema: TableSchema, data: bytes, report: Report) -> dict | None:
    """Text-level and row checks of one table; returns its key columns (text arrays)."""
    name = schema.name
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.add("encoding-error", f"byte {exc.start} is not UTF-8", resource=name,
                   row=data[: exc.start].count(b"\n") + 1)
        return None
    if text.startswith("\ufeff"):
        report.add("byte-order-mark", "the file starts with a byte-order mark (U+FEFF); "
                   "canonical CSV has none", resource=name, row=1)
        return None
    if not text:
        report.add("empty-table", "the file is empty: not even a header row", resource=name, row=1)
        return None
    if "\r" in text:
        report.add("line-ending", "CR or CRLF line endings; canonical CSV uses LF",
                   resource=name, row=text[: text.index("\r")].count("\n") + 1)
    if text and not text.endswith("\n"):
        report.add("truncated-row", "the last row does not end with a newline: the file "
                   "was cut short", resource=name, row=text.count("\n") + 1)
    split = _split_columns(data, text, name, report)
    if split is None:
        return None
    header, columns, parsed = split
    expected = schema.field_names
    for col in expected:
        if col not in header:
            report.add("missing-column", f"the header lacks column {col!r}", resource=name,
                       row=1, field=col)
    for col in header:
        if col not in expected:
            report.add("extra-column", f"the header has column {col!r}, which the schema "
                       "does not define", resource=name, row=1, field=col)
    present = [c for c in header if c in expected]
    if present != [c for c in expected if c in header]:
        report.add("header-order", "columns are not in the schema's order: "
                   + ", ".join(expected), resource=name, row=1)
    nrows = len(next(iter(columns.values()))) if columns else 0
    frame = {}
    bad_any = np.zeros(nrows, dtype=bool)
    for col in present:
        frame[col], bad = _typed_column(name, schema.field(col), columns[col], report)
        bad_any |= bad
    typed = pd.DataFrame(frame)
    _run_pandera(schema, typed, report)
    key_cols = [c for c in schema.primary_key if c in columns]
    keys = {c: columns[c] for c in key_cols}
    if len(key_cols) == len(schema.primary_key) and key_cols:
        key_frame = pd.DataFrame({c: columns[c].to_pandas() for c in key_cols})
        dup = key_frame.duplicated(keep="first").to_numpy()
        for i in np.flatnonzero(dup)[:50]:
            report.add("primary-key-error", "primary key (" + ", ".join(
                f"{c}={key_frame.iloc[i][c]}" for c in key_cols) + ") repeats an earlier row",
                resource=name, row=int(i) + 2)
        if not dup.any() and not bad_any.any():
            _check_order(schema, typed, report)
    if parsed is not None and not report.findings_for(name):
        canonical = canonical_text(parsed.header, parsed.rows)
        if canonical != text:
            line = _first_difference(canonical, text)
            report.add("non-canonical-row", "not written in canonical CSV (quoting or spacing); "
                       "rewrite the package with deepgreen", resource=name, row=line)
    report.stats[name] = {"rows": nrows, "bytes": len(data)}
    return keys


def _typed_column(resource, field, arr: pa.StringArray, report):
    """Type-check text cells; returns values for pandera (bad cells missing) and the bad mask."""
    empty = pc.equal(arr, "").to_numpy(zero_copy_only=False)
    bad = np.zeros(len(arr), dtype=bool)
    if field.type in _TYPE_RE:
        ok = pc.match_substring_regex(arr, "^(?:" + _TYPE_RE[field.type].pattern + ")$")
        bad = ~ok.to_numpy(zero_copy_only=False) & ~empty
        for i in np.flatnonzero(bad):
            report.add("type-error", f"{arr[i].as_py()!r} is not a {field.type}" +
                       (" (canonical form: ISO 8601 UTC ending in Z)" if field.type == "datetime" else ""),
                       resource=resource, row=int(i) + 2, field=field.name)
    missing = empty | bad
    masked = pc.if_else(pa.array(missing), pa.scalar(None, pa.string()), arr)
    if field.type == "number":
        distinct = pc.unique(masked).drop_null().to_pylist()
        odd = [t for t in distinct if repr(float(t)) != t]
        if odd:
            hits = pc.is_in(masked, value_set=pa.array(odd)).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(hits):
                text = arr[i].as_py()
                report.add("non-canonical-cell", f"{text!r} is written {repr(float(text))!r} "
                           "in canonical form", resource=resource, row=int(i) + 2, field=field.name)
        values = pc.cast(masked, pa.float64()).to_numpy(zero_copy_only=False)
    elif field.type == "integer":
        long = pc.greater_equal(pc.utf8_length(masked), 19).fill_null(False).to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(long):
            if not _INT64[0] <= int(arr[i].as_py()) <= _INT64[1]:
                bad[i] = True
                report.add("type-error", f"{arr[i].as_py()} is outside the 64-bit integer range",
                           resource=resource, row=int(i) + 2, field=field.name)
        masked = pc.if_else(pa.array(empty | bad), pa.scalar(None, pa.string()), arr)
        values = pc.cast(masked, pa.int64()).to_pandas()
    elif field.type == "boolean":
        values = pc.equal(masked, "true").to_pandas()
    elif field.type == "datetime":
        try:
            values = pc.cast(masked, pa.timestamp("us", tz="UTC")).to_pandas()
        except pa.ArrowInvalid:
            for i in np.flatnonzero(~missing):
                try:
                    pd.Timestamp(arr[i].as_py())
                except ValueError:
                    bad[i] = True
                    report.add("type-error", f"{arr[i].as_py()!r} is not a valid date and time",
                               resource=resource, row=int(i) + 2, field=field.name)
            masked = pc.if_else(pa.array(empty | bad), pa.scalar(None, pa.string()), arr)
            values = pc.cast(masked, pa.timestamp("us", tz="UTC")).to_pandas()
        low, high = PLAUSIBLE_DATETIMES
        implausible = ((values < low) | (values >= high)).fillna(False).to_numpy()
        for i in np.flatnonzero(implausible):
            bad[i] = True
            report.add("constraint-error", f"{arr[i].as_py()!r} is not a plausible date "
                       f"(from {low.year} to {high.year - 1})", resource=resource, row=int(i) + 2,
                       field=field.name)
        values = values.mask(implausible)
    else:
        values = masked.to_pandas()
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


def _check_foreign_keys(tables: tuple[str, ...], keys: dict[str, dict], report: Report) -> None:
    for name in tables:
        if name not in keys:
            continue
        for fields, ref, ref_fields in load_schema(name).foreign_keys:
            if ref not in keys or any(f not in keys[name] for f in fields) \
                    or any(f not in keys[ref] for f in ref_fields):
                continue
            child, parent = _joined(keys[name], fields), _joined(keys[ref], ref_fields)
            dangling = ~pc.is_in(child, value_set=parent).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(dangling):
                report.add("foreign-key-error", f"{', '.join(fields)}={child[i].as_py()} "
                           f"refers to no row of {ref}", resource=name, row=int(i) + 2,
                           field=fields[0])


def _check_runs_complete(keys: dict[str, dict], report: Report) -> None:
    """Every run has its environment row and its blocks, so every verb can read it whole."""
    if "runs" not in keys or "run_id" not in keys["runs"]:
        return
    run_ids = keys["runs"]["run_id"]
    for child in RUN_CHILDREN:
        if "run_id" not in keys.get(child, {}):
            continue
        absent = ~pc.is_in(run_ids, value_set=keys[child]["run_id"]).to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(absent):
            report.add("incomplete-run", f"run_id={run_ids[i].as_py()} has no row in {child}",
                       resource="runs", row=int(i) + 2, field="run_id")


def _joined(columns: dict, fields) -> pa.Array:
    if len(fields) == 1:
        return columns[fields[0]]
    return pc.binary_join_element_wise(*(columns[f] for f in fields), "\x1f")


def _first_difference(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.split("\n"), b.split("\n")), start=1):
        if x != y:
            return number
    return min(a.count("\n"), b.count("\n")) + 1
