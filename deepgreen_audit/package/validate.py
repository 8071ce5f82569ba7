"""Integrity validation of a replication package.

Checks, in order: the descriptor (paths, the four resources, schemas equal
to `schemas/`), SHA256SUMS and the descriptor's bytes and hash, then each
table as text (encoding, line endings, a truncated last line, header,
cell counts, types, canonical form), its constraints as the Table Schema
states them (vectorised over pyarrow columns: validation reads no more than a
pyarrow reader must), its primary key and row order, and
last the foreign keys between tables.  This is at least what
`frictionless validate` checks, plus checksums and canonical form; the
conformance audit (the experiment specification) is `deepgreen audit`.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import arrays, compute, paths
from deepgreen_audit.package.canonical import DATETIME_RE, INTEGER_RE, NUMBER_RE, canonical_number, canonical_spelling
from deepgreen_audit.package.checksums import parse_sums, sha256_bytes, sha256_file
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES, TableSchema, load_schema
from deepgreen_audit.package.tables import TextTable, canonical_text, parse_text
from deepgreen_audit.report import Report

_TYPE_RE = {"integer": INTEGER_RE, "number": NUMBER_RE, "datetime": DATETIME_RE,
            "boolean": re.compile("true|false")}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
#: Dates and times a measurement can carry: none before 2000 (no NVML energy counter
#: existed) and none after 2100; anything else is a corrupt or mistyped cell.
PLAUSIBLE_DATETIMES = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: Tables every run must have rows in (referential completeness, beyond the foreign keys).
RUN_CHILDREN = ("environment", "blocks")


@dataclass(frozen=True)
class Keys:
    """A table's key columns (text, or dictionary-encoded text for a table read block by
    block) and the CSV line each of their rows starts on, which is its row number in findings
    (the header is line 1); None when row i lies on line i + 2 (no quoted line breaks)."""

    columns: dict[str, pa.Array]
    lines: np.ndarray | None

    def line(self, i: int) -> int:
        """The CSV line row `i` starts on."""
        return int(self.lines[i]) if self.lines is not None else int(i) + 2


@dataclass(frozen=True)
class ResourceCheck:
    """What checking one table resource found: its findings (a report of its own), its key
    columns and its typed table (None where the checks could not reach them), its size."""

    report: Report
    keys: Keys | None
    typed: pa.Table | None
    size_bytes: int


@dataclass(frozen=True)
class TableCheck:
    """The key columns of a table whose text could be split into rows, and its typed table
    (the schema's types) when every column is there in order."""

    keys: Keys
    typed: pa.Table | None


@dataclass(frozen=True)
class SplitColumns:
    """A table's text split into columns: the header, each column's cells as a pyarrow string
    array, the CSV line each row starts on, and the parsed rows (only when the file is quoted)."""

    header: list[str]
    columns: dict[str, pa.Array]
    lines: np.ndarray
    parsed: TextTable | None


def validate(location: str | Path | None = None, tables: tuple[str, ...] = TABLES) -> Report:
    """Validate the package at `location` (folder or descriptor); never raises for bad data
    (see `validate_tables`)."""
    return validate_tables(location, tables)[0]


def validate_tables(location: str | Path | None = None,
                    tables: tuple[str, ...] = TABLES) -> tuple[Report, dict[str, pa.Table]]:
    """The validation report of the package at `location`, and the typed table (the schema's
    types) of each table that validates, so a caller that reads them next (the audit) need
    not parse them again.

    `tables` names the resources (and `schemas/<name>.json`) the package must
    hold: the four campaign tables by default; other kinds of package pass their
    kind's tables (`package.kinds`, which also says what kind a descriptor is).
    """
    try:
        package = Package.open(location)
    except UserError as exc:
        report = Report(str(location or "datapackage.json"), "validate")
        report.add(exc.code if exc.code == "missing-descriptor" else "descriptor-error", str(exc))
        return report, {}
    report = Report(str(package.descriptor_path), "validate", synthetic=package.synthetic,
                    notice=package.notice())
    report.stats["provenance"] = {k: package.descriptor.get(k) for k in
                                  ("name", "title", "provenance") if k in package.descriptor}
    _check_resource_names(package, tables, report)
    try:
        sums = _check_checksums(package, tables, report)
    except UserError as exc:
        report.add(exc.code, exc.message)
        sums = None
    keys: dict[str, Keys] = {}
    typed_tables: dict[str, pa.Table] = {}
    total_bytes = 0
    # The tables are checked side by side (pyarrow and numpy release the GIL), each into a
    # report of its own, merged in table order so the report reads the same every time.
    # The largest tables go first, so that the small ones fill in after them.
    with ThreadPoolExecutor(max_workers=min(len(tables), os.cpu_count() or 1) or 1) as pool:
        futures = {name: pool.submit(_check_resource, package, name, sums, report.subject)
                   for name in sorted(tables, key=lambda name: -_size_of(package, name))}
        checked = [futures[name].result() for name in tables]
    for name, check in zip(tables, checked):
        report.merge(check.report)
        total_bytes += check.size_bytes
        if check.keys is not None:
            keys[name] = check.keys
            if check.typed is not None and check.report.valid:
                typed_tables[name] = check.typed
    _check_foreign_keys(tables, keys, report)
    _check_runs_complete(keys, report)
    report.stats["bytes"] = total_bytes
    return report, typed_tables


def _size_of(package: Package, name: str) -> int:
    """A table file's size (0 where it cannot be known here: its check says why)."""
    try:
        return os.stat(package.table_path(name)).st_size
    except (UserError, OSError):
        return 0


def _check_resource(package: Package, name: str, sums: dict | None, subject: str) -> ResourceCheck:
    """One table's findings (a report of its own), its key columns, its typed table and size."""
    report = Report(subject, "validate")
    schema = load_schema(name)
    try:
        path = package.table_path(name)
        resource = package.resource(name)
    except UserError as exc:
        report.add(exc.code, exc.message, resource=name)
        return ResourceCheck(report, None, None, 0)
    if resource.get("schema") != schema.descriptor:
        report.add("schema-mismatch", "the descriptor's schema differs from "
                   f"schemas/{name}.json; regenerate the descriptor", resource=name)
    if path.is_symlink():
        report.add("symlink", f"{path} is a symbolic link", resource=name)
        return ResourceCheck(report, None, None, 0)
    if not path.exists():
        report.add("missing-table", f"{path} does not exist", resource=name)
        return ResourceCheck(report, None, None, 0)
    try:
        if paths.regular_file(path).st_size > STREAM_BLOCK_BYTES:
            streamed = _check_table_blocks(schema, path, resource, sums, report)
            if streamed is not None:
                return streamed
        data = paths.read_bytes(path)
    except UserError as exc:
        report.add(exc.code, str(exc), resource=name)
        return ResourceCheck(report, None, None, 0)
    _check_hashes(name, path, sha256_bytes(data), len(data), resource, sums, report)
    checked = _check_table(schema, data, report)
    if checked is None:
        return ResourceCheck(report, None, None, len(data))
    return ResourceCheck(report, checked.keys, checked.typed, len(data))


#: A table file larger than this is read and checked block by block, so that validation holds
#: a block, the typed table and its keys (dictionary-encoded), never the file's text; a smaller
#: one is read whole.
STREAM_BLOCK_BYTES = 32 << 20


class _BlockedTable:
    """One table checked block by block: each column's findings in a report of its own (merged
    in column order at the end, as the whole-file check orders them), the primary key's
    columns with one dictionary for all blocks, and the typed blocks."""

    def __init__(self, schema: TableSchema, subject: str):
        self.schema = schema
        self.rows = 0
        self.type_reports = {c: Report(subject, "validate") for c in schema.field_names}
        self.constraint_reports = {c: Report(subject, "validate") for c in schema.field_names}
        self.key_codes: dict[str, dict[str, int]] = {c: {} for c in schema.primary_key}
        self.key_blocks: dict[str, list[np.ndarray]] = {c: [] for c in schema.primary_key}
        self.key_bad = False
        self.typed_blocks: list[pa.Table] = []

    def add(self, columns: dict[str, pa.Array]) -> None:
        """Check one block's rows (text columns, in the schema's order)."""
        schema = self.schema
        n = len(columns[schema.field_names[0]])
        lines = np.arange(self.rows + 2, self.rows + 2 + n)
        typed, bad = {}, {}
        for col in schema.field_names:
            field = schema.field(col)
            typed[col], bad[col] = _typed_column(schema.name, field, columns[col], lines,
                                                 self.type_reports[col])
            for code, i, message in _constraint_failures(field, typed[col], bad[col], unique=False):
                self.constraint_reports[col].add(code, message, resource=schema.name,
                                                 row=int(lines[i]), field=col)
        for col, codes_of in self.key_codes.items():
            self.key_bad |= bool(bad[col].any()) or not arrays.valid(typed[col]).all()
            encoded = compute.dictionary_encode(columns[col])
            mapping = np.array([codes_of.setdefault(v, len(codes_of))
                                for v in encoded.dictionary.to_pylist()], dtype=np.int32)
            self.key_blocks[col].append(mapping[arrays.values(encoded.indices)])
            if schema.field(col).type == "string":  # a key's few values, once per block
                typed[col] = compute.dictionary_encode(typed[col])
        self.typed_blocks.append(pa.table([typed[c] for c in schema.field_names],
                                          names=schema.field_names))
        self.rows += n

    def finish(self, report: Report) -> TableCheck:
        """Merge the findings into `report`, check uniqueness and the primary key over the
        whole table, and return its keys and typed table."""
        schema = self.schema
        typed_table = pa.concat_tables(self.typed_blocks) if self.typed_blocks else \
            schema.arrow_schema.empty_table()
        self.typed_blocks = []
        for col in schema.field_names:
            field = schema.field(col)
            if field.unique:
                column = _decoded(typed_table.column(col).combine_chunks())
                index, distinct = arrays.codes(column)
                for i in np.flatnonzero(arrays.repeats(index)):
                    self.constraint_reports[col].add(
                        "unique-error", f"{distinct[index[i]]!r} repeats in a unique column",
                        resource=schema.name, row=int(i) + 2, field=col)
        for part in (*self.type_reports.values(), *self.constraint_reports.values()):
            report.merge(part)
        keys = Keys({c: arrays.from_codes(np.concatenate(self.key_blocks[c]) if self.key_blocks[c]
                                          else np.zeros(0, np.int32), list(self.key_codes[c]))
                     for c in schema.primary_key}, None)
        typed = {c: typed_table.column(c) for c in schema.primary_key}
        _check_primary_key(schema, keys, typed, self.key_bad, report)
        report.stats[schema.name] = {"rows": self.rows}
        return TableCheck(keys, typed_table)


def _check_table_blocks(schema: TableSchema, path: Path, resource: dict, sums: dict | None,
                        report: Report) -> ResourceCheck | None:
    """A large table checked block by block (see STREAM_BLOCK_BYTES), hashed as it is read.

    Only plain canonical CSV is read so: the schema's header, then rows of UTF-8 cells with no
    quote, no carriage return and no empty line, the last ending in a newline.  None where a
    block is anything else (`report` untouched); the whole-file check then reads it and says
    exactly what is wrong."""
    header = (",".join(schema.field_names) + "\n").encode("utf-8")
    digest = hashlib.sha256()
    size = 0
    rest = b""
    table = _BlockedTable(schema, report.subject)
    with paths.open_regular(path) as handle:
        while block := handle.read(STREAM_BLOCK_BYTES):
            digest.update(block)
            size += len(block)
            data = rest + block
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
            if size == len(block) and data:  # the first block: the header
                if not data.startswith(header):
                    return None
                data = data[len(header):]
            if data:
                columns = _plain_block_columns(data, schema.field_names)
                if columns is None:
                    return None
                table.add(columns)
    if rest or size == 0:
        return None
    _check_hashes(schema.name, path, digest.hexdigest(), size, resource, sums, report)
    checked = table.finish(report)
    report.stats[schema.name]["bytes"] = size
    return ResourceCheck(report, checked.keys, checked.typed, size)


def _plain_block_columns(data: bytes, header: list[str]) -> dict[str, pa.Array] | None:
    """The text columns of rows of plain canonical CSV (see `_check_table_blocks`), or None."""
    if b'"' in data or b"\r" in data or b"\n\n" in data or data.startswith(b"\n"):
        return None
    return _plain_rows(pa.py_buffer(data), header)


def _plain_rows(rows: pa.Buffer, header: list[str]) -> dict[str, pa.Array] | None:
    """The text columns of CSV rows (no header line) that hold no quote, read by pyarrow's
    CSV reader without a copy and in one block, so that each column is one array; None where
    pyarrow cannot read them (a row with another number of cells, a cell not UTF-8)."""
    if not rows.size:
        return {c: arrays.strings([]) for c in header}
    try:
        table = pcsv.read_csv(
            pa.BufferReader(rows),
            read_options=pcsv.ReadOptions(use_threads=False, block_size=rows.size,
                                          column_names=header),
            parse_options=pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in header},
                                                strings_can_be_null=False))
    except (pa.ArrowInvalid, ValueError):
        return None
    return {c: table.column(c).combine_chunks() for c in header}


def _check_resource_names(package: Package, tables: tuple[str, ...], report: Report) -> None:
    """No two resources share a name; a table's is reported with the table (`Package.resource`
    refuses it), any other's here."""
    names = Counter(res.get("name") for res in package.descriptor["resources"]
                    if isinstance(res, dict) and isinstance(res.get("name"), str))
    for name, count in names.items():
        if count > 1 and name not in tables:
            report.add("duplicate-resource", f"{count} resources are named {name!r}", resource=name)


def _check_checksums(package: Package, tables: tuple[str, ...],
                     report: Report) -> dict[str, str] | None:
    """{file name: digest} from SHA256SUMS, each of whose lines must hold: well formed, named
    once, and naming a file beside it (a table's is checked with the table, any other here)."""
    path = package.checksums_path
    if not path.exists():
        report.add("checksum-missing", f"{path} does not exist")
        return None
    try:
        sums, problems = parse_sums(path)
    except UserError as exc:
        report.add("checksum-format", str(exc), resource=path.name, row=exc.row)
        return None
    for problem in problems:
        report.add(problem.code, problem.message, resource=path.name, row=problem.number)
    table_files = set()
    for name in tables:
        with contextlib.suppress(UserError):  # reported with the table
            table_files.add(package.table_path(name).name)
    for name, line in sums.items():
        if name in table_files:
            continue
        listed = path.parent / name
        if "/" in name or name in (".", "..") or listed.is_symlink() or not listed.is_file():
            report.add("checksum-extra", f"names {name}, which is no file beside {path.name}",
                       resource=path.name, row=line.number)
        elif (digest := sha256_file(listed)) != line.digest:
            report.add("checksum-mismatch", f"{name} has SHA256 {digest}, this line says "
                       "another", resource=path.name, row=line.number)
    return {name: line.digest for name, line in sums.items()}


def _check_hashes(name, path, digest: str, size: int, resource, sums, report) -> None:
    if sums is not None:
        listed = sums.get(path.name)
        if listed is None:
            report.add("checksum-missing", f"SHA256SUMS has no line for {path.name}", resource=name)
        elif listed != digest:
            report.add("checksum-mismatch", f"{path.name} has SHA256 {digest}, SHA256SUMS says "
                       f"{listed}: the file changed after the package was written", resource=name)
    if resource.get("bytes") != size:
        report.add("bytes-mismatch", f"{path.name} has {size} bytes, the descriptor says "
                   f"{resource.get('bytes')}", resource=name)
    if resource.get("hash") != f"sha256:{digest}":
        report.add("hash-mismatch", f"{path.name} has sha256:{digest}, the descriptor says "
                   f"{resource.get('hash')}", resource=name)


def _plain_columns(data: bytes) -> SplitColumns | None:
    """Header and text columns of a table in plain canonical CSV, its rows read by pyarrow
    straight from its bytes (`_plain_rows`): no quote (so no cell holds a delimiter), no
    carriage return and no byte-order mark, a header of distinct names, UTF-8 throughout
    (pyarrow checks each cell) and a newline at the end.  None for anything else, which
    `_split_columns` then reads and reports row by row."""
    if not data.endswith(b"\n") or data.startswith(codecs.BOM_UTF8) or b'"' in data or b"\r" in data:
        return None
    header_end = data.index(b"\n")
    try:
        header = data[:header_end].decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    if len(set(header)) != len(header) or not all(header):
        return None
    columns = _plain_rows(pa.py_buffer(data).slice(header_end + 1), header)
    if columns is None:
        return None
    return SplitColumns(header, columns, np.arange(2, len(columns[header[0]]) + 2), None)


def _split_columns(text: str, name: str, report: Report) -> SplitColumns | None:
    """Header, text columns (pyarrow string arrays), the CSV line each of their rows starts
    on, and the parsed rows, of a table that is not plain canonical CSV (`_plain_columns`):
    read by Python's csv module, which reports rows precisely."""
    try:
        parsed = parse_text(text, name)
    except UserError as exc:
        report.add(exc.code, exc.message, resource=name, row=exc.row)
        return None
    width = len(parsed.header)
    rows, lines = [], []
    for row, line in zip(parsed.rows, parsed.lines()):
        if len(row) != width:
            report.add("field-count", f"{len(row)} cells, the header has {width}",
                       resource=name, row=line)
        else:
            rows.append(row)
            lines.append(line)
    columns = {c: pa.array([r[i] for r in rows], type=pa.string())
               for i, c in enumerate(parsed.header)}
    return SplitColumns(parsed.header, columns, np.array(lines, dtype=np.int64), parsed)


def _text(data: bytes, name: str, report: Report) -> str | None:
    """A table's text, with what is wrong with it as text (encoding, byte-order mark, empty,
    line endings, a last line cut short); None where no row can be read from it."""
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
    if not text.endswith("\n"):
        report.add("truncated-row", "the last row does not end with a newline: the file "
                   "was cut short", resource=name, row=text.count("\n") + 1)
    return text


def _check_table(schema: TableSchema, data: bytes, report: Report) -> TableCheck | None:
    """Text-level and row checks of one table; returns its key columns (text arrays, with
    their rows' lines) and, when every column is there in order, the typed table."""
    name = schema.name
    split, text = _plain_columns(data), None
    if split is None:
        text = _text(data, name, report)
        split = _split_columns(text, name, report) if text is not None else None
    if split is None:
        return None
    header, columns, lines, parsed = split.header, split.columns, split.lines, split.parsed
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
    typed, bad = {}, {}
    for col in present:
        typed[col], bad[col] = _typed_column(name, schema.field(col), columns[col], lines, report)
    _check_constraints(schema, typed, bad, lines, report)
    key_cols = [c for c in schema.primary_key if c in columns]
    keys = Keys({c: columns[c] for c in key_cols}, lines)
    _check_primary_key(schema, keys, typed, any(bad[c].any() or not arrays.valid(typed[c]).all()
                                                for c in key_cols), report)
    if parsed is not None and text is not None and not report.findings_for(name):
        canonical = canonical_text(parsed.header, parsed.rows)
        if canonical != text:
            line = _first_difference(canonical, text)
            report.add("non-canonical-row", "not written in canonical CSV (quoting or spacing); "
                       "rewrite the package with deepgreen", resource=name, row=line)
    report.stats[name] = {"rows": nrows, "bytes": len(data)}
    whole = present == expected
    return TableCheck(keys, pa.Table.from_arrays([typed[c] for c in expected], schema=schema.arrow_schema)
                      if whole else None)


def _typed_column(resource, field, arr: pa.StringArray, lines: np.ndarray, report):
    """Type-check text cells; returns the typed column (bad and empty cells null) and the bad mask."""
    empty = arrays.values(compute.utf8_length(arr)) == 0
    bad = np.zeros(len(arr), dtype=bool)
    typed = _all_canonical(field, arr, empty)
    if typed is not None:
        return typed, bad
    if field.type in _TYPE_RE:
        ok = arrays.mask(compute.match_substring_regex(arr, "^(?:" + _TYPE_RE[field.type].pattern + ")$"))
        bad = ~ok & ~empty
        for i in np.flatnonzero(bad):
            text = arr[int(i)].as_py()
            canonical = canonical_spelling(text, field.type)
            if canonical is not None:
                report.add("non-canonical-cell", f"{text!r} is written {canonical!r} in canonical "
                           "form", resource=resource, row=int(lines[i]), field=field.name)
                continue
            report.add("type-error", f"{text!r} is not a valid {field.type}" +
                       (" (canonical form: ISO 8601 UTC ending in Z)" if field.type == "datetime" else ""),
                       resource=resource, row=int(lines[i]), field=field.name)
    if field.type == "number":
        typed = compute.cast(_nulled(arr, empty | bad), pa.float64())
        _check_canonical_numbers(resource, field, arr, ~(empty | bad), lines, report)
    elif field.type == "integer":
        long = (arrays.values(compute.utf8_length(arr)) >= 19) & ~bad
        for i in np.flatnonzero(long):
            text = arr[int(i)].as_py()
            if len(text) > 20 or not _INT64[0] <= int(text) <= _INT64[1]:
                bad[i] = True
                report.add("type-error", f"{arr[i].as_py()} is outside the 64-bit integer range",
                           resource=resource, row=int(lines[i]), field=field.name)
        typed = compute.cast(_nulled(arr, empty | bad), pa.int64())
    elif field.type == "boolean":
        typed = compute.match_substring(_nulled(arr, empty | bad), "true")
    elif field.type == "datetime":
        typed = _typed_datetimes(resource, field, arr, empty, bad, lines, report)
    else:
        typed = _nulled(arr, empty)
    return typed, bad


def _all_canonical(field, arr: pa.StringArray, empty: np.ndarray) -> pa.Array | None:
    """The typed column of a number or integer column whose every cell is already the
    canonical text of its value (the common case: the type's pattern need not run, as
    canonical texts match it); None otherwise, and the cell-by-cell checks say what is wrong."""
    if field.type not in ("number", "integer"):
        return None
    try:
        typed = compute.cast(_nulled(arr, empty), field.arrow_type)
    except pa.ArrowInvalid:
        return None
    if field.type == "integer":
        canonical = arrays.mask(compute.equal(compute.cast(typed, pa.string()), arr)) | empty
    else:
        canonical = (arrays.mask(compute.is_finite(typed)) | empty).all() and \
            not _non_canonical_numbers(arr, ~empty)
    return typed if np.all(canonical) else None


def _nulled(arr: pa.Array, where: np.ndarray) -> pa.Array:
    """`arr` with the cells `where` is True made null."""
    if not where.any():
        return arr
    return compute.if_else(arrays.from_mask(where), pa.nulls(len(arr), arr.type), arr)


def _check_canonical_numbers(resource, field, arr, judged: np.ndarray, lines: np.ndarray,
                             report) -> None:
    """A number is written in its shortest round-trip form (Python's repr), nothing else."""
    odd = _non_canonical_numbers(arr, judged)
    if not odd:
        return
    hits = arrays.mask(compute.is_in(arr, value_set=pa.array(odd))) & judged
    for i in np.flatnonzero(hits):
        text = arr[int(i)].as_py()
        report.add("non-canonical-cell", f"{text!r} is written {canonical_number(float(text))!r} "
                   "in canonical form", resource=resource, row=int(lines[i]), field=field.name)


def _non_canonical_numbers(arr: pa.StringArray, judged: np.ndarray) -> list[str]:
    """The distinct texts among the cells `judged` that are not the canonical text (repr,
    zero unsigned) of their number.

    Each distinct text is judged once (a column repeats its values many times): arrow
    writes the shortest digits too, so only texts that differ from arrow's, put in
    repr's layout, and negative zero are judged by `canonical_number` itself."""
    distinct = compute.unique(arr if judged.all() else compute.filter(arr, arrays.from_mask(judged)))
    try:
        shortest = compute.cast(compute.cast(distinct, pa.float64()), pa.string())
    except pa.ArrowInvalid:
        shortest = None  # a number arrow cannot hold (overflow): repr judges every text
    if shortest is not None:
        differs = compute.not_equal(shortest, distinct)
        distinct, shortest = compute.filter(distinct, differs), compute.filter(shortest, differs)
        if len(distinct) > _JUDGED_ONE_BY_ONE:  # fewer are judged by repr faster than by RE2
            distinct = compute.filter(distinct, compute.or_(compute.not_equal(_repr_layout(shortest), distinct),
                                                  compute.equal(distinct, "-0.0")))
    return [text for text in distinct.to_pylist() if canonical_number(float(text)) != text]


#: Up to this many distinct texts that differ from arrow's shortest are judged by repr one by
#: one: fewer than compiling the layout patterns below costs.
_JUDGED_ONE_BY_ONE = 1000
#: Where arrow's shortest text of a float differs from Python's repr in layout only
#: (regular expression, replacement): integral values lack ".0", and arrow keeps fixed
#: notation down to 1e-6 where repr turns to an exponent below 1e-4, and repr writes
#: an exponent with at least two digits.  (RE2 syntax: `\10` is group 1, then 0.)
_REPR_LAYOUT = ((r"^(-?[0-9]+)$", r"\1.0"),
                (r"^(-?)0\.0000([1-9])([0-9]+)$", r"\1\2.\3e-05"), (r"^(-?)0\.0000([1-9])$", r"\1\2e-05"),
                (r"^(-?)0\.00000([1-9])([0-9]+)$", r"\1\2.\3e-06"), (r"^(-?)0\.00000([1-9])$", r"\1\2e-06"),
                (r"e([+-])([0-9])$", r"e\10\2"))


def _repr_layout(text: pa.StringArray) -> pa.StringArray:
    for pattern, replacement in _REPR_LAYOUT:
        text = compute.replace_substring_regex(text, pattern=pattern, replacement=replacement)
    return text


def _typed_datetimes(resource, field, arr, empty, bad, lines, report) -> pa.Array:
    """Datetimes as UTC timestamps; an impossible date (Feb 30) or one outside
    PLAUSIBLE_DATETIMES is reported and made null."""
    try:
        typed = compute.cast(_nulled(arr, empty | bad), _TIMESTAMP)
    except pa.ArrowInvalid:
        for i in np.flatnonzero(~(empty | bad)):
            try:
                compute.cast(arr[i:i + 1], _TIMESTAMP)
            except pa.ArrowInvalid:
                bad[i] = True
                report.add("type-error", f"{arr[i].as_py()!r} is not a valid date and time",
                           resource=resource, row=int(lines[i]), field=field.name)
        typed = compute.cast(_nulled(arr, empty | bad), _TIMESTAMP)
    low, high = (int(t.timestamp()) * 1_000_000 for t in PLAUSIBLE_DATETIMES)
    micros = arrays.values(typed)
    implausible = arrays.valid(typed) & ((micros < low) | (micros >= high))
    for i in np.flatnonzero(implausible):
        bad[i] = True
        report.add("constraint-error", f"{arr[i].as_py()!r} is not a plausible date "
                   f"(from {PLAUSIBLE_DATETIMES[0].year} to {PLAUSIBLE_DATETIMES[1].year - 1})",
                   resource=resource, row=int(lines[i]), field=field.name)
    return _nulled(typed, implausible)


def _check_constraints(schema: TableSchema, typed: dict[str, pa.Array], bad: dict[str, np.ndarray],
                       lines: np.ndarray, report: Report) -> None:
    """The Table Schema's constraints on the typed columns (every one of ENFORCED_CONSTRAINTS).

    A cell that failed its type is reported once, as a type error, not again here."""
    for name, column in typed.items():
        for code, i, message in _constraint_failures(schema.field(name), column, bad[name]):
            report.add(code, message, resource=schema.name, row=int(lines[i]), field=name)


#: The Table Schema constraint keywords `_constraint_failures` enforces; a schema using any
#: other is caught by tests/test_schema_rules.py before it can pass unchecked.
ENFORCED_CONSTRAINTS = frozenset({"required", "unique", "minimum", "maximum", "exclusiveMinimum",
                                  "exclusiveMaximum", "minLength", "maxLength", "pattern", "enum"})
#: Each bound on a value: its keyword, the Field attribute holding it, and the test a
#: value fails it by.
_BOUNDS = (("minimum", "minimum", np.less), ("maximum", "maximum", np.greater),
           ("exclusiveMinimum", "exclusive_minimum", np.less_equal),
           ("exclusiveMaximum", "exclusive_maximum", np.greater_equal))


def _constraint_failures(field, column: pa.Array, bad: np.ndarray, unique: bool = True):
    """(code, index, message) for each cell of `column` that breaks one of `field`'s constraints
    (`unique` False: all but uniqueness, for a block of a table read block by block)."""
    present = arrays.valid(column)
    if field.required:
        for i in np.flatnonzero(~present & ~bad):
            yield "constraint-error", int(i), "a value is required"
    for keyword, attribute, broken in _BOUNDS:
        limit = getattr(field, attribute)
        if limit is not None:
            number = arrays.values(column)
            for i in np.flatnonzero(present & broken(number, limit)):
                yield ("constraint-error", int(i),
                       f"{number[i].item()!r} breaks the constraint: {keyword} {limit}")
    if field.min_length is not None or field.max_length is not None:
        length = arrays.values(compute.cast(compute.utf8_length(compute.fill_null(column, "")), pa.int64()))
        for keyword, limit, broken in (("minLength", field.min_length, np.less),
                                       ("maxLength", field.max_length, np.greater)):
            if limit is not None:
                for i in np.flatnonzero(present & broken(length, limit)):
                    yield ("constraint-error", int(i), f"{length[i]} characters break the "
                           f"constraint: {keyword} {limit}")
    if field.pattern is not None:
        for i in np.flatnonzero(present & ~_matches(column, field.pattern)):
            yield ("constraint-error", int(i),
                   f"{column[int(i)].as_py()!r} breaks the constraint: pattern {field.pattern}")
    if field.enum is None and not (field.unique and unique):
        return
    index, distinct = arrays.codes(column)
    if field.enum is not None:
        outside = np.isin(index, [k for k, value in enumerate(distinct) if value not in field.enum])
        for i in np.flatnonzero(outside):
            yield ("constraint-error", int(i), f"{distinct[index[i]]!r} breaks the "
                   f"constraint: one of {', '.join(field.enum)}")
    if field.unique and unique:
        for i in np.flatnonzero(arrays.repeats(index)):
            yield ("unique-error", int(i),
                   f"{distinct[index[i]]!r} repeats in a unique column")


def _matches(column: pa.Array, pattern: str) -> np.ndarray:
    """Where each cell matches the whole of `pattern` (as `re.fullmatch`): with arrow's RE2,
    or, for a pattern RE2 does not support, with Python's `re` on each distinct value."""
    encoded = compute.dictionary_encode(column)  # each distinct value matched once (keys repeat)
    try:
        matched = arrays.mask(compute.match_substring_regex(encoded.dictionary, f"^(?:{pattern})$"))
        return matched[arrays.values(encoded.indices)] & arrays.valid(encoded.indices) \
            if len(matched) else np.zeros(len(column), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        index, distinct = arrays.codes(column)
        compiled = re.compile(pattern)
        return np.isin(index, [k for k, value in enumerate(distinct) if compiled.fullmatch(value)])


def _key_index(columns: dict[str, pa.Array], key: list[str]) -> np.ndarray:
    """One dense code per distinct primary key (several columns combined)."""
    combined = np.zeros(len(columns[key[0]]), dtype=np.int64)
    for col in key:
        index, distinct = arrays.codes(columns[col])
        combined = np.unique(combined * (len(distinct) + 1) + index + 1, return_inverse=True)[1]
    return combined


def _check_primary_key(schema: TableSchema, keys: Keys, typed: dict[str, pa.Array], key_bad: bool,
                       report: Report) -> None:
    """No primary key repeats, and (when every key cell is valid) the rows are in primary-key
    order (enums by their order in the schema): the one canonical order of a table.

    Rows whose keys strictly increase are both, which one pass over the ranks shows; the
    repeats are searched only otherwise."""
    key_cols = list(keys.columns)
    if len(key_cols) != len(schema.primary_key) or not key_cols:
        return
    ranks = None if key_bad else _key_ranks(schema, keys, typed)
    if ranks is not None and _strictly_increasing(ranks):
        return
    dup = arrays.repeats(_key_index(keys.columns, key_cols))
    for i in np.flatnonzero(dup)[:50]:
        report.add("primary-key-error", "primary key (" + ", ".join(
            f"{c}={keys.columns[c][int(i)].as_py()}" for c in key_cols) + ") repeats an earlier row",
            resource=schema.name, row=keys.line(int(i)))
    if ranks is not None and not dup.any():
        order = np.lexsort(ranks[::-1])
        moved = np.flatnonzero(order != np.arange(len(order)))
        if len(moved):
            report.add("row-order", "rows are not in primary-key order ("
                       + ", ".join(schema.primary_key) + "); first misplaced row",
                       resource=schema.name, row=keys.line(int(moved[0])))


def _key_ranks(schema: TableSchema, keys: Keys, typed: dict[str, pa.Array]) -> list[np.ndarray]:
    """Each primary-key column as numbers that sort as the key does: a number, integer or
    datetime by its value, an enum by its order in the schema, any other text as text."""
    ranks = []
    for col in schema.primary_key:
        field = schema.field(col)
        if field.type in ("integer", "number", "datetime"):
            column = typed[col]
            ranks.append(arrays.values(column.combine_chunks() if isinstance(column, pa.ChunkedArray)
                                       else column))
            continue
        index, distinct = arrays.codes(keys.columns[col])
        rank = {v: i for i, v in enumerate(field.enum if field.enum is not None else sorted(distinct))}
        # a value outside the enum (reported as a constraint error) sorts last
        ranks.append(np.array([rank.get(v, len(rank)) for v in distinct], dtype=np.int64)[index])
    return ranks


def _strictly_increasing(ranks: list[np.ndarray]) -> bool:
    """Whether each row's key tuple is greater than the row's before it."""
    later = np.zeros(len(ranks[0]) - 1 if len(ranks[0]) else 0, dtype=bool)
    tied = np.ones_like(later)
    for rank in ranks:
        later |= tied & (rank[1:] > rank[:-1])
        tied &= rank[1:] == rank[:-1]
    return bool(later.all())


def _check_foreign_keys(tables: tuple[str, ...], keys: dict[str, Keys], report: Report) -> None:
    for name in tables:
        if name not in keys:
            continue
        for fields, ref, ref_fields in load_schema(name).foreign_keys:
            if ref not in keys or any(f not in keys[name].columns for f in fields) \
                    or any(f not in keys[ref].columns for f in ref_fields):
                continue
            child = _joined(keys[name].columns, fields)
            parent = _joined(keys[ref].columns, ref_fields)
            dangling = ~_present_in(child, parent)
            for i in np.flatnonzero(dangling):
                report.add("foreign-key-error", f"{', '.join(fields)}={child[int(i)].as_py()} "
                           f"refers to no row of {ref}", resource=name, row=keys[name].line(int(i)),
                           field=fields[0])


def _check_runs_complete(keys: dict[str, Keys], report: Report) -> None:
    """Every run has its environment row and its blocks, so every verb can read it whole."""
    if "runs" not in keys or "run_id" not in keys["runs"].columns:
        return
    run_ids = keys["runs"].columns["run_id"]
    for child in RUN_CHILDREN:
        if child not in keys or "run_id" not in keys[child].columns:
            continue
        absent = ~_present_in(run_ids, keys[child].columns["run_id"])
        for i in np.flatnonzero(absent):
            report.add("incomplete-run", f"run_id={run_ids[int(i)].as_py()} has no row in {child}",
                       resource="runs", row=keys["runs"].line(int(i)), field="run_id")


def _present_in(child: pa.Array, parent: pa.Array) -> np.ndarray:
    """Where each cell of `child` is a value of `parent` (a null never is), judged once per
    distinct value, so a dictionary-encoded key of millions of rows costs its dictionary."""
    index, distinct = arrays.codes(child)
    known = set(arrays.codes(parent)[1])
    return np.array([value in known for value in distinct] + [False], dtype=bool)[index]


def _joined(columns: dict, fields) -> pa.Array:
    if len(fields) == 1:
        return columns[fields[0]]
    return compute.binary_join_element_wise(*(_decoded(columns[f]) for f in fields), separator="\x1f")


def _decoded(column: pa.Array) -> pa.Array:
    return column.dictionary_decode() if isinstance(column, pa.DictionaryArray) else column


def _first_difference(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.split("\n"), b.split("\n")), start=1):
        if x != y:
            return number
    return min(a.count("\n"), b.count("\n")) + 1
