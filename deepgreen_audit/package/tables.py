"""Reading and writing the tables: text level (exact) and typed (pyarrow).

Text level keeps every cell exactly as written; it is what validation,
flatten and restore use, so nothing is lost in a parse.  The typed reader
turns a table into a pyarrow Table with the types of its Table Schema, for
the audit and the analysis.
"""

from __future__ import annotations

import csv
import gc
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths
from deepgreen_audit.package.canonical import format_value
from deepgreen_audit.package.schema import TableSchema

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class TextTable:
    """A CSV table as text: its header and its rows (lists of cell strings).

    `starts` holds the CSV line each row starts on when that is not its index + 2 (a
    quoted cell held a line break, or a line was empty): findings name rows by line."""

    header: list[str]
    rows: list[list[str]]
    starts: list[int] | None = None

    def lines(self) -> list[int]:
        """The CSV line each row starts on (the header is line 1)."""
        return self.starts if self.starts is not None else list(range(2, len(self.rows) + 2))

    def column(self, name: str) -> list[str]:
        i = self.header.index(name)
        return [r[i] for r in self.rows]

    def columns(self) -> dict[str, list[str]]:
        return {name: list(col) for name, col in zip(self.header, zip(*self.rows))} if self.rows \
            else {name: [] for name in self.header}


@contextmanager
def cycle_collection_paused():
    """Pause Python's cycle collector while text tables are built or taken apart.

    They are millions of small lists that form no cycles, yet each few hundred trigger a
    collection that scans them all again: with it paused, reading or restoring a package
    takes half the time.  Nested uses are fine; the collector resumes as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _csv_writer(buffer):
    return csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)


def canonical_text(header: list[str], rows: list[list[str]]) -> str:
    """The canonical CSV text of a header and text rows."""
    return canonical_rows([header, *rows])


def canonical_rows(rows: list[list[str]]) -> str:
    """The canonical CSV text of rows ("" for none).  Each row's text depends on that row
    alone, so a table's text is its header's followed by its rows', however they are grouped
    (the streaming round trip hashes a table one run at a time)."""
    if not rows:
        return ""
    plain = _plain_text(rows)
    if plain is not None:
        return plain
    buffer = io.StringIO()
    _csv_writer(buffer).writerows(rows)
    return buffer.getvalue()


def _plain_text(rows: list[list[str]]) -> str | None:
    """The CSV text of rows none of whose cells needs quoting (the csv module quotes a cell
    with a comma, a quote or a line break, and a lone empty cell), joined in one pass; None
    when some cell does.  A cell holding a comma or a line feed shows as one too many."""
    text = "\n".join(map(",".join, rows))
    if '"' in text or "\r" in text or min(map(len, rows)) < 2 \
            or text.count(",") != sum(map(len, rows)) - len(rows) \
            or text.count("\n") != len(rows) - 1:
        return None
    return text + "\n"


def canonical_bytes(table: TextTable) -> bytes:
    return canonical_text(table.header, table.rows).encode("utf-8")


def parse_text(text: str, path: Path | str) -> TextTable:
    """Parse CSV text; rows with the wrong number of cells are kept for the validator.

    Text without quotes, carriage returns or empty lines (canonical CSV, nearly always) is
    split on commas and line feeds, which is what the csv module would make of it, at a
    fraction of the cost; anything else goes through the csv module."""
    with cycle_collection_paused():
        if text.endswith("\n") and not text.startswith("\n") and not any(
                mark in text for mark in ('"', "\r", "\n\n")):
            lines = text[:-1].split("\n")
            return TextTable(header=lines[0].split(","), rows=[line.split(",") for line in lines[1:]])
        return _parse_rows(csv.reader(io.StringIO(text, newline=""), strict=True), path)


def records_with_lines(reader) -> Iterator[tuple[int, list[str]]]:
    """Each record of a `csv.reader` with the line it starts on (the first line is 1): a
    quoted cell may hold line breaks, so a record's index is not its line, and a message
    names the line a reader finds the record on."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        yield start, row


def _parse_rows(reader, path: Path | str) -> TextTable:
    try:
        header = next(reader)
    except StopIteration:
        raise UserError("the table is empty: no header row", path=path, code="empty-table") from None
    except csv.Error as exc:
        raise UserError(f"the header cannot be parsed as CSV: {exc}", path=path, row=1,
                        code="csv-error") from None
    rows, starts = [], []
    try:
        while True:
            starts.append(reader.line_num + 1)
            rows.append(next(reader))
    except StopIteration:
        starts.pop()
    except csv.Error as exc:
        raise UserError(f"cannot be parsed as CSV: {exc}", path=path, row=reader.line_num,
                        code="csv-error") from None
    return TextTable(header=header, rows=rows, starts=starts)


#: How many bytes `stream_rows` reads at a time.
STREAM_CHUNK_BYTES = 1 << 16


def stream_rows(path: Path, digest=None,
                chunk_bytes: int = STREAM_CHUNK_BYTES) -> Iterator[tuple[int, list[list[str]]]]:
    """The rows of the CSV file `path`, the header first, in batches of rows on consecutive
    lines, each with the line its first row starts on: what `read_text` gives, holding no more
    than `chunk_bytes` of the file (and its longest row) at a time.

    `digest` (a hashlib object), when given, is fed the file's bytes as they are read, so that
    one pass parses and hashes the file.  A piece without quotes, carriage returns or empty
    lines is split on line feeds and commas, as in `parse_text`; otherwise it is read line by
    line, and a record with a quote (which may span lines: a quoted cell may hold a line break)
    goes through the csv module with only the file's own line feeds ending lines (newline="").
    Bytes that are not UTF-8 and malformed CSV are UserErrors naming the line."""
    with paths.open_regular(path) as handle:
        number = 1                # the line the next row starts on
        carry = b""               # a line not yet ended by a line feed
        pending = _Pending()      # the lines of a record whose quoted cell goes on
        while True:
            block = handle.read(chunk_bytes)
            if digest is not None:
                digest.update(block)
            data = carry + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            data, carry = data[:cut], data[cut:]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"is not UTF-8 (byte {exc.start} of line {number})", path=path,
                                row=number + data[:exc.start].count(b"\n"),
                                code="encoding-error") from None
            if not pending.lines and text.endswith("\n") and not text.startswith("\n") and not any(
                    mark in text for mark in ('"', "\r", "\n\n")):
                rows = [line.split(",") for line in text[:-1].split("\n")]
                yield number, rows
                number += len(rows)
            elif text:
                for start, rows in _lines_to_rows(text, pending, number, path):
                    yield start, rows
                number += text.count("\n") + (not text.endswith("\n"))
            if not block:
                break
        if pending.lines:  # a quote never closed: the csv module says where
            for start, rows in _lines_to_rows("", pending, number, path, end=True):
                yield start, rows


@dataclass
class _Pending:
    """The lines of a record whose quoted cell goes on past them, and their quotes."""

    lines: list[str] = field(default_factory=list)
    quotes: int = 0


def _lines_to_rows(text: str, pending: _Pending, number: int, path: Path, end: bool = False
                   ) -> Iterator[tuple[int, list[list[str]]]]:
    """The rows of `text` (whole lines from line `number` on, the last one without a line feed
    only at the end of the file), line by line; `pending` holds the lines before them of a
    record whose quoted cell goes on, and is left holding those of one that still does."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    start = number - len(pending.lines)
    batch: list[list[str]] = []
    for line in lines:
        if not pending.lines and line.endswith("\n") and line != "\n" and '"' not in line \
                and "\r" not in line:
            batch.append(line[:-1].split(","))
            number += 1
            continue
        if batch:
            yield start, batch
            batch = []
        if not pending.lines:
            start = number
        pending.lines.append(line)
        pending.quotes += line.count('"')
        number += 1
        if pending.quotes % 2 == 0:
            yield from _csv_records("".join(pending.lines), path, start)
            pending.lines, pending.quotes = [], 0
            start = number
    if batch:
        yield start, batch
    if end and pending.lines:
        yield from _csv_records("".join(pending.lines), path, start)
        pending.lines, pending.quotes = [], 0


def _csv_records(text: str, path: Path, start: int) -> Iterator[tuple[int, list[list[str]]]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    lines_before = 0
    try:
        for row in reader:
            yield start + lines_before, [row]
            lines_before = reader.line_num
    except csv.Error as exc:
        raise UserError(f"cannot be parsed as CSV: {exc}", path=path,
                        row=start + reader.line_num - 1, code="csv-error") from None


def read_text(path: Path) -> TextTable:
    """Read a CSV file as text; refuses anything that is not UTF-8."""
    return text_table(paths.read_bytes(path), path)


def text_table(data: bytes, path: Path) -> TextTable:
    """The CSV `data` read from `path` as text; refuses anything that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"is not UTF-8 (byte {exc.start})", path=path, row=line,
                        code="encoding-error") from None
    return parse_text(text, path)


def rows_from_columns(schema: TableSchema, columns: dict[str, list]) -> list[list[str]]:
    """Canonical text rows from Python values per column (None = missing)."""
    fields = schema.fields
    missing = [f.name for f in fields if f.name not in columns]
    if missing:
        raise ValueError(f"{schema.name}: no values for columns {missing}")
    n = len(columns[fields[0].name])
    formatted = []
    for f in fields:
        values = columns[f.name]
        if len(values) != n:
            raise ValueError(f"{schema.name}.{f.name}: {len(values)} values, expected {n}")
        formatted.append([format_value(v, f.type) for v in values])
    return [list(r) for r in zip(*formatted)] if n else []


def typed(schema: TableSchema, table: TextTable) -> pa.Table:
    """The typed pyarrow Table of a text table that has passed validation."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for i, f in enumerate(schema.fields):
        text = pa.array([r[i] for r in table.rows], type=pa.string())
        nulls = pc.equal(text, "")
        text = pc.if_else(nulls, pa.scalar(None, pa.string()), text)
        if f.type == "boolean":
            arrays.append(pc.equal(text, "true"))
        else:
            arrays.append(pc.cast(text, f.arrow_type))
    return pa.Table.from_arrays(arrays, schema=schema.arrow_schema)
