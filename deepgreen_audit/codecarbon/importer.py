"""`deepgreen import codecarbon PATH... --out PKG`: CodeCarbon logs to a `codecarbon-log` package.

Reads one or many `emissions.csv` files (a folder: every `*.csv` under it, sorted), of any
CodeCarbon layout (`layout.py`): columns in any order, CRLF or LF line endings, with or without
a final newline, a UTF-8 byte-order mark.  Each row becomes one row of the `codecarbon_log`
table with its source file and line; nothing is recomputed or filled in.

Decisions
=========

* A file is CodeCarbon output when its header holds CodeCarbon's `REQUIRED` columns; any
  other file is refused in one line naming it (and the columns it lacks).  A row with another
  number of cells than the header (a torn last line: the run was killed while CodeCarbon
  wrote it) is not imported, and is not dropped silently either: the log's other rows import,
  and the row's line, its cell count and its text are kept in the sources (`rejected_rows`),
  which the import's summary names and the audit fails (integrity.rows-read).
* A cell that is not a value of its column (``nan``, ``inf``, text in a number column, a
  fractional count) is left empty and named in `cell_problems`; the source line keeps its
  text.  Columns that are not CodeCarbon's are kept verbatim in `extra_columns`.
* A row holding CodeCarbon's column names is another header (logs of two versions pasted one
  after the other): the rows below it are read with it, and its line is kept in the sources.
  A log with a header and no rows imports, and its verdict says it has no rows.
* Runs: rows of one file with the same run_id are one CodeCarbon run (its flushes write
  cumulative rows); `flush` numbers them in file order and `final_row` marks the last.  A
  1.x row (no run_id) is a run of its own.  A task file's rows (a `task_name`) are each a
  measurement of their own, keyed `<run_id>/<task_name>`: CodeCarbon writes each task's delta,
  not a cumulative flush.
* The sources (path, bytes, SHA-256, header, layout, line endings, final newline) go to
  ``codecarbon-sources.json`` beside the table; the inputs are never modified, and the package
  is written atomically (`package.writer`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from deepgreen_audit.codecarbon.layout import COLUMNS, REQUIRED, layout_of, row_layout
from deepgreen_audit.errors import UserError, path_text
from deepgreen_audit.package import paths
from deepgreen_audit.package.checked import refuse_invalid
from deepgreen_audit.package.kinds import CODECARBON_LOG
from deepgreen_audit.package.paths import files_under, regular_file
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable, records_with_lines, rows_from_columns
from deepgreen_audit.package.writer import write_package

TABLE = "codecarbon_log"
SOURCES_FILE = "codecarbon-sources.json"
#: Characters of a rejected row's text kept in the sources (a torn row can be a whole line).
REJECTED_TEXT_CHARS = 200


def discover(paths: list[Path]) -> tuple[list[Path], Path]:
    """The files to read (a folder's `*.csv`, recursively, sorted) and the folder their
    names are relative to."""
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = files_under(p, "*.csv")
            if not found:
                raise UserError("holds no *.csv file", path=p, code="missing-input")
            files += found
        elif p.exists():  # a FIFO or device too: the reader refuses it by name
            files.append(p)
        elif p.is_symlink():  # to nothing: refused as such, by the one gate
            regular_file(p)
        else:
            raise UserError("no such file or folder", path=p, code="missing-input")
    resolved = [f.resolve() for f in files]
    if len(set(resolved)) != len(resolved):
        raise UserError("a log is given twice", path=paths[0])
    dirs = [p.resolve() if Path(p).is_dir() else Path(p).resolve().parent for p in paths]
    root = Path(os.path.commonpath(dirs))
    return files, root


#: A log's row as read: its line, its header (shared by the rows under it) and its cells.
RawRow = tuple[int, tuple[str, ...], list[str]]


def read_log(path: Path, name: str) -> tuple[dict, list[RawRow]]:
    """One log: its source facts and its rows, each with its line and the header it is read
    with (rows are read one at a time: a long log is never held twice)."""
    data = paths.read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"is not CodeCarbon output: not UTF-8 text (byte {exc.start})",
                        path=path, code="not-codecarbon") from None
    records = records_with_lines(csv.reader(_lines(text)))
    try:
        first = next(records, None)
        out, headers, rejected = _rows_of(path, first, records)
    except csv.Error as exc:
        raise UserError(f"is not CodeCarbon output: not CSV ({exc})", path=path,
                        code="not-codecarbon") from None
    assert first is not None  # _rows_of refuses a log without a header
    crlf = b"\r\n" in data
    source = {"source_file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
              "header": [h.strip() for h in first[1]], "layout": layout_of([h.strip() for h in first[1]]),
              "rows": len(out), "later_headers": headers, "rejected_rows": rejected,
              "line_endings": "CRLF" if crlf else ("CR" if b"\r" in data else "LF"),
              "final_newline": data.endswith(b"\n") or data.endswith(b"\r"),
              "byte_order_mark": data.startswith(b"\xef\xbb\xbf")}
    return source, out


#: A line and its ending (CRLF, CR or LF), as a file opened with newline="" reads it.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _lines(text: str) -> Iterator[str]:
    """The lines of `text` one at a time, each with its ending, as the csv module reads a file
    opened with newline="" (io.StringIO would hold a copy of a long log four bytes a character)."""
    return (match.group() for match in _LINE.finditer(text))


def _rows_of(path: Path, first, records) -> tuple[list[RawRow], list[dict], list[dict]]:
    """A log's rows under its header (`first`, the first record), the later headers and the
    rows whose cells do not match their header."""
    if first is None or not any(cell.strip() for cell in first[1]):
        raise UserError("is not CodeCarbon output: empty, no header row", path=path, row=1,
                        code="not-codecarbon")
    header = tuple(h.strip() for h in first[1])
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        hint = ("; it looks ';'-separated, as a spreadsheet re-saves a CSV: give the file "
                "CodeCarbon wrote" if len(header) == 1 and ";" in header[0] else "")
        raise UserError(f"is not CodeCarbon output: its header lacks {', '.join(missing)} "
                        f"(it has {', '.join(header[:6])[:200]}{', ...' if len(header) > 6 else ''})"
                        + hint, path=path, row=1, code="not-codecarbon")
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise UserError(f"repeats the column(s) {', '.join(repeated)} in its header", path=path,
                        row=1, code="not-codecarbon")
    out: list[RawRow] = []
    headers: list[dict] = []
    rejected: list[dict] = []
    last_line = 1
    for number, row in records:  # (the line a record starts on: a cell may span lines)
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # a blank line (an editor's final newline twice) holds no row
        last_line = number
        names = [cell.strip() for cell in row]
        if all(c in names for c in REQUIRED):
            # another header: logs of two CodeCarbon versions pasted one after the other
            header = tuple(names)
            headers.append({"line": number, "header": list(header)})
            continue
        if len(row) != len(header):
            rejected.append({"line": number, "cells": len(row), "header_cells": len(header),
                             "text": ",".join(row)[:REJECTED_TEXT_CHARS]})
            continue
        out.append((number, header, row))
    for r in rejected:
        r["last_row"] = r["line"] == last_line
    return out, headers, rejected


def _number(text: str, column: str, integer: bool, problems: list[str]):
    text = text.strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        problems.append(f"{column}: {text!r} is not a number")
        return None
    if not math.isfinite(value):
        problems.append(f"{column}: {text!r} is not a finite number")
        return None
    if integer:
        if value != int(value):
            problems.append(f"{column}: {text!r} is not a whole count")
            return None
        return int(value)
    return value


def table_columns(source: dict, rows: list[RawRow]) -> dict[str, list]:
    """The package table's columns of one log (column -> its Python values, a row each)."""
    schema = load_schema(TABLE)
    types = {f.name: f.type for f in schema.fields}
    columns: dict[str, list] = {name: [] for name in types}
    layouts: dict[tuple[str, ...], str] = {}
    counts: dict[str, int] = {}
    for line, header, cells_of_row in rows:
        cells = dict(zip(header, cells_of_row))
        layout = layouts.get(header) or layouts.setdefault(header, layout_of(list(header)))
        extra = [h for h in header if h not in COLUMNS]
        problems: list[str] = []
        row: dict[str, Any] = dict.fromkeys(types)
        for cc, column in COLUMNS.items():
            if cc not in cells:
                continue
            text = cells[cc]
            if types[column] in ("number", "integer"):
                row[column] = _number(text, cc, types[column] == "integer", problems)
            else:
                row[column] = text.strip() or None
        row.update({"source_file": source["source_file"], "source_line": line,
                    "layout": row_layout(layout, row.get("codecarbon_version")),
                    "run_key": _run_key(row, line),
                    "extra_columns": " | ".join(f"{h}={cells[h]}" for h in extra if cells[h] != "")
                    or None,
                    "cell_problems": " | ".join(problems) or None})
        counts[row["run_key"]] = counts.get(row["run_key"], 0) + 1
        row["flush"] = counts[row["run_key"]]
        for name, value in row.items():
            columns[name].append(value)
    columns["final_row"] = [flush == counts[key] for flush, key in zip(columns["flush"],
                                                                        columns["run_key"])]
    return columns


def _run_key(row: dict[str, Any], line: int) -> str:
    """The measurement a row belongs to: a task's row is the task's own (its run's other tasks
    and its run's row are others), a run's rows are its flushes; a row without a run_id is its
    own."""
    if not row["run_id"]:
        return f"line-{line}"
    return f"{row['run_id']}/{row['task_name']}" if row.get("task_name") else row["run_id"]


def build_table(paths: list[Path]) -> tuple[TextTable, list[dict], dict[str, Path]]:
    """The package table of the logs at `paths`, their sources, and each log's path by the
    name its rows' `source_file` holds."""
    files, root = discover(paths)
    schema = load_schema(TABLE)
    sources, located = [], {}
    columns: dict[str, list] = {f.name: [] for f in schema.fields}
    for path in files:
        name = path_text(path.resolve().relative_to(root).as_posix())
        source, raw = read_log(path, name)
        sources.append(source)
        located[name] = path
        for column, values in table_columns(source, raw).items():
            columns[column] += values
        del raw
    order = sorted(range(len(columns["source_file"])),
                   key=lambda k: (columns["source_file"][k], columns["source_line"][k]))
    if order != sorted(order):
        columns = {name: [values[k] for k in order] for name, values in columns.items()}
    return TextTable(schema.field_names, rows_from_columns(schema, columns)), sources, located


def import_logs(paths: list[Path], out: Path, *, overwrite: bool = False,
                descriptor_path: Path | None = None, meta: dict | None = None) -> tuple[Path, dict]:
    """Import the CodeCarbon logs at `paths` into a package at `out`; returns (descriptor, report)."""
    if descriptor_path is not None and Path(descriptor_path).resolve() != (
            Path(out) / "datapackage.json").resolve():
        raise UserError("a CodeCarbon-log package keeps its descriptor inside PKG; drop --descriptor",
                        path=descriptor_path)
    paths = [Path(p) for p in paths]
    table, sources, located = build_table(paths)
    meta = meta or {
        "name": "codecarbon-logs",
        "title": "CodeCarbon logs: " + ", ".join(s["source_file"] for s in sources[:5])
                 + (f" and {len(sources) - 5} more" if len(sources) > 5 else ""),
        "description": ("CodeCarbon emissions.csv rows imported by 'deepgreen import codecarbon', "
                        "one row per source row with its file and line; values as CodeCarbon "
                        "wrote them, in CodeCarbon's documented units. Sources: "
                        f"{SOURCES_FILE}."),
        "synthetic": False,
        "provenance": {"importer": "deepgreen import codecarbon",
                       "sources": [{k: s[k] for k in ("source_file", "sha256", "bytes")}
                                   for s in sources]},
    }
    extra = {SOURCES_FILE: (json.dumps({"sources": sources}, indent=2, ensure_ascii=False)
                            + "\n").encode()}
    path = write_package({TABLE: table}, Path(out), meta, overwrite=overwrite, extra_files=extra,
                         check=refuse_invalid(partial(_source_cell, table, located),
                                              CODECARBON_LOG),
                         inputs=paths, kind=CODECARBON_LOG)
    rows = len(table.rows)
    report = {"logs": len(sources), "rows": rows, "sources": sources,
              "summary": "\n".join(
                  [f"imported {rows:,} row(s) of {len(sources)} CodeCarbon log(s)"]
                  + [f"  {s['source_file']}: {s['rows']} row(s), layout {s['layout']}, "
                     f"{s['line_endings']}{'' if s['final_newline'] else ', no final newline'}"
                     + _rejected_words(s) for s in sources[:20]]
                  + [f"  {s['source_file']}:{_rejected_words(s)}" for s in sources[20:]
                     if s["rejected_rows"]]
                  + ([f"  ... {len(sources) - 20} more"] if len(sources) > 20 else [])
                  + [f"wrote {out} (described by {path}); run 'deepgreen audit {out}' next"])}
    return path, report


def _rejected_words(source: dict) -> str:
    """'; NOT IMPORTED: line 169 (1 cell of 31: a torn row)' for a log with rejected rows."""
    rejected = source["rejected_rows"]
    if not rejected:
        return ""
    lines = ", ".join(f"line {r['line']} ({r['cells']} cell(s) of {r['header_cells']})"
                      for r in rejected[:5])
    more = f" and {len(rejected) - 5} more" if len(rejected) > 5 else ""
    return (f"; NOT IMPORTED: {lines}{more}: rows with another number of cells than the header "
            "(a torn row: 'deepgreen audit' fails them)")


def import_source(source, out: Path, *, overwrite: bool = False,
                  descriptor_path: Path | None = None) -> tuple[Path, dict]:
    """The `import` verb's entry point: `source` is one path or a list of them."""
    paths = list(source) if isinstance(source, (list, tuple)) else [source]
    return import_logs(paths, out, overwrite=overwrite, descriptor_path=descriptor_path)


#: The CodeCarbon column each package column holds (COLUMNS reversed).
SOURCE_COLUMNS = {column: cc for cc, column in COLUMNS.items()}


def _source_cell(table: TextTable, located: dict[str, Path], finding) -> tuple | None:
    """The log, line and CodeCarbon column behind a finding on the staged package (for
    `refuse_invalid`: an input the schema refuses is an input error, named where it is)."""
    lines = table.lines()
    if finding.resource != TABLE or finding.row not in lines:
        return None
    cells = dict(zip(table.header, table.rows[lines.index(finding.row)]))
    path = located.get(cells["source_file"])
    if path is None:
        return None
    column = SOURCE_COLUMNS.get(finding.field or "")
    where = "" if column or not finding.field else f"the log's {finding.field.replace('_', ' ')}: "
    return str(path), int(cells["source_line"]), column, where
