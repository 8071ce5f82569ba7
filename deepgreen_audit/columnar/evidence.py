"""What a finding cites and the small column computations every kind's checks and analyses
share: evidence rows as plain JSON values, counts in words, relative differences, each run's
summed block energy.  Below every audited kind (`audit`, `codecarbon`) and every analysis."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from deepgreen_audit.columnar.frame import ColumnRows, Frame, Groups, counts
from deepgreen_audit.safe import csv_text


def rows_by_run(frame: Frame) -> list[np.ndarray]:
    """The positions of each run's rows in `frame` (by its run_id column), runs in run_id
    order, each run's rows in frame order."""
    return Groups(frame["run_id"]).rows()


def describe_counts(values, limit: int = 8) -> str:
    """'a: 3, b: 1' from labels, most frequent first."""
    found = counts(values)
    text = ", ".join(f"{k}: {v}" for k, v in found[:limit])
    return text + (f", ... ({len(found) - limit} more)" if len(found) > limit else "")


def relative_difference(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.abs(a - b) / scale, 0.0)


def evidence(frame) -> dict:
    """A finding's evidence: every row of `frame` (a Frame, or a pandas frame of the
    CodeCarbon-log checks) as plain JSON values (the runs or configurations it names and the
    figures that convicted them), so a reader can check each one; the JSON report carries the
    first report.JSON_EVIDENCE_ROWS and the count (`evidence_total`), `audit --evidence DIR`
    writes them all as CSV (`evidence_csv_text`), the HTML page shows the first rows and links
    the rest as CSV."""
    rows = frame.records(digits=6) if isinstance(frame, Frame) else _pandas_rows(frame, digits=6)
    return {"evidence": rows, "evidence_total": len(rows)}


def json_records(frame, digits: int | None = None) -> list[dict]:
    """The rows of a pandas frame as plain JSON values (a comparison's tables)."""
    return list(_pandas_rows(frame, digits))


def _pandas_rows(frame, digits: int | None) -> ColumnRows:
    """The rows of a pandas frame as plain JSON values, each made when read."""
    return ColumnRows({str(name): _numpy(frame[name]) for name in frame.columns}, len(frame),
                      digits)


def _numpy(column) -> np.ndarray:
    """A pandas column as numpy: plain numbers as numbers, anything else (nullable numbers,
    texts, timestamps) as the objects pandas' own rows hold, which plain_value reads."""
    values = column.to_numpy() if isinstance(column.dtype, np.dtype) else None
    if values is not None and values.dtype.kind in "biuf":
        return values
    return column.to_numpy(dtype=object)


def run_block_energy_j(run_ids: np.ndarray, energy_j: np.ndarray) -> dict[str, float]:
    """Each run's summed block energy_j, NaN where a block lacks it: what a whole-run reading
    (Slurm's) is set against, by the audit's check and by the paper alike."""
    groups = Groups(run_ids)
    complete = groups.valid(energy_j) == groups.size
    sums = np.where(complete, groups.sum(energy_j), np.nan)
    return dict(zip(groups.keys[0], sums))


def per_run_evidence(ctx, blocks: Frame, figures: dict | None = None) -> dict:
    """Evidence of a block-level finding, one row per run: its ecosystem, how many of its
    blocks the finding concerns, and `figures` ({column: "median" or "first"}) of those
    blocks; the runs with most blocks first."""
    groups = Groups(blocks["run_id"])
    run_ids = groups.keys[0]
    columns = {"run_id": run_ids, "ecosystem": ctx.of_runs("ecosystem", run_ids),
               "blocks": groups.size}
    for column, how in (figures or {}).items():
        columns[column] = getattr(groups, how)(blocks[column])
    return evidence(Frame.of(columns).sort(groups.size, descending=True))


def evidence_keys(rows: Sequence[dict]) -> list[str]:
    """Every key any evidence row has, in first-seen order."""
    if isinstance(rows, ColumnRows):
        return rows.keys
    return list(dict.fromkeys(k for row in rows for k in row))


def evidence_column(rows: Sequence[dict], key: str) -> list:
    """Each evidence row's value under `key` (None where a row lacks it)."""
    if isinstance(rows, ColumnRows):
        return rows.column(key)
    return [row.get(key) for row in rows]


def evidence_csv_text(rows: Sequence[dict]) -> str:
    """A finding's evidence rows as CSV: every key any row has, a column, in first-seen order;
    each column typed as a table's column (so the file is the one pandas wrote before), every
    text cell held inert for a spreadsheet (safe.csv_text)."""
    columns = evidence_keys(rows)
    cells = [_csv_column(evidence_column(rows, c)) for c in columns]
    return csv_text(columns, zip(*cells))


def _csv_column(values: list) -> list:
    """One evidence column's cells, typed as a table's column: numbers with an empty cell or a
    fraction among them are floats (3 as 3.0), whole numbers alone are integers, anything else
    is text, an empty cell is None."""
    present = [v for v in values if v is not None]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    floats = numbers and bool(present) and (len(present) < len(values)
                                      or any(isinstance(v, float) for v in present))
    return [None if v is None else float(v) if floats else v if numbers else str(v) for v in values]


def evidence_csv_names(finding_ids: list[str]) -> list[str]:
    """The file name of each finding's complete evidence, in the findings' order:
    `<id>-evidence.csv` (the HTML page's download name), `<id>-<k>-evidence.csv` for the k-th
    finding of a repeated id; any character but letters, digits, '.', '_' and '-' as '_'."""
    seen: dict[str, int] = {}
    names = []
    for finding_id in finding_ids:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", finding_id)
        seen[safe] = seen.get(safe, 0) + 1
        names.append(f"{safe}-evidence.csv" if seen[safe] == 1 else f"{safe}-{seen[safe]}-evidence.csv")
    return names
