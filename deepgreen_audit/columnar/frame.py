"""A table's columns as numpy arrays, and rows grouped by key: what the checks compute on.

The audit once computed on pandas frames.  Importing pandas alone took longer than reading
and hashing the whole package (benchmarks/bench_floor.py), and each pandas call costs tens
of microseconds before it touches a row, which ~50 checks on small tables pay thousands of
times.  numpy comes with pyarrow, which reads the tables, and costs microseconds a call.

One representation per schema type, so every check reads a column alike:

- integer and number: float64, NaN where the cell is empty (integers are exact up to 2^53;
  the `integer` columns are written back as integers in evidence);
- string: object, a Python str or None, one object per distinct text (a long log repeats
  its host's texts in every row);
- boolean: object, True, False or None;
- datetime: datetime64[us] (UTC), NaT where empty.

A column is converted from its arrow table the first time a check reads it.
"""

from __future__ import annotations

import math
import operator
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, overload

import numpy as np
import pyarrow as pa

from deepgreen_audit.package import compute

#: One microsecond, the unit of a datetime column.
_US = np.timedelta64(1, "us")


def _numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """One arrow column as the numpy array its schema type maps to (see the module)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        encoded = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        values = np.asarray(encoded.dictionary.to_pylist() + [None], dtype=object)
        codes = np.asarray(compute.cast(compute.fill_null(encoded.indices, -1), pa.int64()))
        return values[codes]
    if pa.types.is_timestamp(kind):
        return np.asarray(compute.cast(column, pa.timestamp("us")).to_numpy(), dtype="datetime64[us]")
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return np.asarray(compute.fill_null(compute.cast(column, pa.float64()), math.nan).to_numpy())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        whole = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        return _numpy(compute.dictionary_encode(whole))  # one str object per distinct text
    if pa.types.is_boolean(kind) or pa.types.is_null(kind):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    raise TypeError(f"no numpy column for arrow type {kind}")


class Frame:
    """Columns of one length, each a numpy array (see the module for the types), some
    computed only when first read."""

    def __init__(self, columns: Mapping[str, np.ndarray | Callable[[], np.ndarray]], length: int,
                 integer: Iterable[str] = (), source: pa.Table | None = None):
        self._columns = dict(columns)
        self._length = length
        #: columns that hold integers (as float64): evidence writes them as integers
        self.integer = frozenset(integer) & set(self._columns)
        #: the arrow table these rows are the rows of, where they are (`arrow`)
        self.source = source

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Frame:
        """The columns of a typed table, each converted when first read."""
        def later(name: str) -> Callable[[], np.ndarray]:
            return lambda: _numpy(table.column(name))
        integer = [f.name for f in table.schema if pa.types.is_integer(f.type)]
        return cls({name: later(name) for name in table.column_names}, table.num_rows, integer,
                   table)

    def arrow(self, name: str) -> pa.Array | pa.ChunkedArray:
        """Column `name` as arrow: the table's own column where these rows are its rows (a
        text column read without making a Python string of each cell), else built from the
        numpy column."""
        if self.source is not None and name in self.source.column_names:
            return self.source.column(name)
        return pa.array(self[name])

    @classmethod
    def of(cls, columns: Mapping[str, Iterable], integer: Iterable[str] = ()) -> Frame:
        """A frame of computed columns (each an array or a sequence, all of one length)."""
        arrays = {name: _array(values) for name, values in columns.items()}
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        return cls(arrays, lengths.pop() if lengths else 0, integer)

    @classmethod
    def from_records(cls, records: list[dict], columns: Iterable[str] | None = None) -> Frame:
        """A frame of dicts (one a row), columns in `columns` or the first row's order."""
        names = list(columns) if columns is not None else list(records[0]) if records else []
        return cls.of({n: [r.get(n) for r in records] for n in names})

    def __len__(self) -> int:
        return self._length

    def __contains__(self, name: str) -> bool:
        return name in self._columns

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def empty(self) -> bool:
        return self._length == 0

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._columns[name]
        if callable(column):
            column = self._columns[name] = column()
        return column

    def missing(self, name: str) -> np.ndarray:
        """True where column `name` has no value (from the arrow table's validity where the
        column is not converted yet: a text column need not become Python strings)."""
        column = self._columns[name]
        if callable(column) and self.source is not None and name in self.source.column_names:
            return np.asarray(compute.is_null(self.source.column(name)).to_numpy(), dtype=bool)
        return missing(self[name])

    def take(self, rows: np.ndarray) -> Frame:
        """The rows at `rows` (a boolean mask or positions), columns converted when read."""
        rows = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, dtype=np.intp)

        def later(name: str) -> Callable[[], np.ndarray]:
            return lambda: self[name][rows]
        return Frame({name: later(name) for name in self._columns}, len(rows), self.integer)

    def select(self, names: Iterable[str]) -> Frame:
        """The columns `names`, in that order."""
        names = list(names)
        return Frame({n: partial(self.__getitem__, n) for n in names}, self._length, self.integer,
                     self.source)

    def assign(self, **columns) -> Frame:
        """This frame with `columns` added or replaced (arrays, sequences or one value)."""
        added = {name: np.full(self._length, values, dtype=object) if np.ndim(values) == 0
                 and not isinstance(values, np.ndarray) else _array(values)
                 for name, values in columns.items()}
        return Frame({**{n: partial(self.__getitem__, n) for n in self._columns}, **added},
                     self._length, self.integer - set(added),
                     self.source.drop_columns([n for n in added if n in self.source.column_names])
                     if self.source is not None else None)

    def sort(self, key: np.ndarray, descending: bool = False) -> Frame:
        """The rows in the order of `key` (stable; ties keep their order; NaN last)."""
        return self.take(order(key, descending))

    def records(self, digits: int | None = None) -> ColumnRows:
        """The rows as dicts of plain JSON values (`plain_value`), each made when read."""
        return ColumnRows({name: self[name] for name in self._columns}, self._length, digits,
                          self.integer)


def _array(values) -> np.ndarray:
    """A sequence as a numpy array: numbers as numbers, anything else as objects."""
    if isinstance(values, np.ndarray):
        return values
    values = list(values)
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.asarray(values)
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def missing(values: np.ndarray) -> np.ndarray:
    """True where `values` holds no value: NaN, NaT or None."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind == "M":
        return np.isnat(values)
    if values.dtype == object:  # None, or a NaN among objects (elementwise, in C)
        return np.equal(values, np.array(None)) | np.not_equal(values, values)
    return np.zeros(len(values), dtype=bool)


def order(key: np.ndarray, descending: bool = False) -> np.ndarray:
    """Positions that sort `key`, stable, missing values last either way (as pandas'
    sort_values does)."""
    gone = missing(key)
    present = np.flatnonzero(~gone)
    values = factorize(key)[0][present] if key.dtype == object else key[present]  # texts: ranks
    if descending:
        # stable descending: sort the values read backwards ascending, stably, and reverse
        # that (equal values end up in their first order)
        reversed_order = np.argsort(values[::-1], kind="stable")[::-1]
        within = len(values) - 1 - reversed_order
    else:
        within = np.argsort(values, kind="stable")
    return np.concatenate([present[within], np.flatnonzero(gone)])


def plain_value(value, digits: int | None = None, whole: bool = False):
    """One cell as a JSON value: numpy scalars as Python's, a missing or non-finite number
    as null (JSON has no NaN or Infinity), a datetime as ISO 8601 in UTC, floats rounded to
    `digits` when given, and a float of an integer column (`whole`) as an integer."""
    if value is None or value is getattr(sys.modules.get("pandas"), "NA", None):
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        if not math.isfinite(value):
            return None
        if whole:
            return int(value)
        return float(value) if digits is None else round(float(value), digits)
    if isinstance(value, np.datetime64):
        return None if np.isnat(value) else utc(value).isoformat()
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, (int, str)) else str(value)


def plain_column(values: np.ndarray, digits: int | None = None, whole: bool = False) -> list:
    """A column as plain JSON values, each as `plain_value` gives it, a whole numeric column at
    once (a long log's evidence holds millions of cells)."""
    kind = values.dtype.kind
    if kind == "b":
        return values.tolist()
    if kind in "iu":
        return values.tolist()
    if kind == "f":
        finite = math.isfinite
        if whole:
            return [int(v) if finite(v) else None for v in values.tolist()]
        if digits is None:
            return [v if finite(v) else None for v in values.tolist()]
        return [round(v, digits) if finite(v) else None for v in values.tolist()]
    if kind == "O":
        return [v if type(v) is str else plain_value(v, digits, whole) for v in values.tolist()]
    return [plain_value(v, digits, whole) for v in values]


def rows_of(columns: dict[str, list], length: int) -> list[dict]:
    """Row dicts from equally long columns of plain values."""
    names = list(columns)
    if not names:
        return [{} for _ in range(length)]
    return [dict(zip(names, cells)) for cells in zip(*columns.values())]


class ColumnRows(Sequence[dict]):
    """Rows as dicts, held as columns and made only when read: a finding's evidence and a
    long log's run verdicts are a hundred thousand rows, which as dicts would cost more memory
    than the log itself, while the reports read their first rows and only `audit --evidence
    DIR` or `--json` read them all.  A row's values are plain JSON values (`plain_value`,
    floats to `digits`), or with `plain=False` the columns' own Python values (a NaN stays a
    float, for `safe.json_ready` to give its reason)."""

    #: rows made at a time when all are read
    _CHUNK = 4096

    def __init__(self, columns: Mapping[str, np.ndarray], length: int, digits: int | None = None,
                 integer: Iterable[str] = (), plain: bool = True):
        # a column that is a view of a larger array (a pandas frame's block of every column of
        # one type) is copied: the rows would otherwise keep the whole block alive
        self._columns = {name: values.copy() if isinstance(values, np.ndarray) and values.base
                         is not None else values for name, values in columns.items()}
        self._length = length
        self._digits = digits
        self._integer = frozenset(integer)
        self._plain = plain

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, k: int) -> dict: ...
    @overload
    def __getitem__(self, k: slice) -> list[dict]: ...

    def __getitem__(self, k):
        if isinstance(k, slice):
            return self._rows(*k.indices(self._length))
        position = operator.index(k) + (self._length if k < 0 else 0)
        if not 0 <= position < self._length:
            raise IndexError(k)
        return self._rows(position, position + 1, 1)[0]

    def __iter__(self) -> Iterator[dict]:
        for start in range(0, self._length, self._CHUNK):
            yield from self._rows(start, min(start + self._CHUNK, self._length), 1)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == self._length and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ColumnRows({self._length} rows: {', '.join(self._columns)})"

    @property
    def keys(self) -> list[str]:
        """Each row's keys, in order (every row has them all)."""
        return list(self._columns)

    def column(self, name: str) -> list:
        """Column `name`'s plain values (None in every row where no row has the key)."""
        if name not in self._columns:
            return [None] * self._length
        return self._cells(name, slice(None))

    def renamed(self, names: Mapping[str, str], drop: Iterable[str] = ()) -> ColumnRows:
        """The same rows with keys renamed (`names`, old: new) and `drop` left out."""
        dropped = set(drop)
        return ColumnRows({names.get(k, k): v for k, v in self._columns.items() if k not in dropped},
                          self._length, self._digits,
                          {names.get(k, k) for k in self._integer if k not in dropped}, self._plain)

    def _cells(self, name: str, part: slice) -> list:
        values = self._columns[name][part]
        if self._plain:
            return plain_column(values, self._digits, name in self._integer)
        return values.tolist()

    def _rows(self, start: int, stop: int, step: int) -> list[dict]:
        part = slice(start, stop, step)
        return rows_of({name: self._cells(name, part) for name in self._columns},
                       len(range(start, stop, step)))


def utc(value: np.datetime64) -> datetime:
    """A datetime64[us] cell as a timezone-aware datetime (UTC)."""
    micros = int((value - np.datetime64(0, "us")) // _US)
    return datetime.fromtimestamp(0, UTC) + (np.timedelta64(micros, "us").item())


def seconds(delta: np.ndarray) -> np.ndarray:
    """timedelta64 values as float seconds (NaN where NaT)."""
    out = delta / np.timedelta64(1, "s")
    return np.asarray(out, dtype=float)


def counts(values: Iterable) -> list[tuple[Any, int]]:
    """(value, how many) of each distinct value (missing ones left out), most frequent first;
    values as frequent as one another in the order they first appear (as pandas'
    value_counts orders them)."""
    tally: dict = {}
    for v in values:
        if v is None or v != v:
            continue
        tally[v] = tally.get(v, 0) + 1
    return sorted(tally.items(), key=lambda item: -item[1])


def mode(values: Iterable):
    """The commonest value (the least of equally common ones, as pandas' mode), or None."""
    found = counts(values)
    if not found:
        return None
    most = found[0][1]
    return min(v for v, n in found if n == most)


def nunique(values: np.ndarray) -> int:
    """How many distinct values (missing ones not counted)."""
    return len(counts(values)) if values.dtype == object else \
        len(np.unique(values[~missing(values)]))


#: factorize's results by the id of the array, with a weak reference to it: the checks group
#: the same few key columns (a table's run_id) again and again, and a column is never changed
_factorized: dict[int, tuple[weakref.ref, tuple[np.ndarray, np.ndarray]]] = {}


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's index into the sorted distinct values (-1 where missing), and those values
    (computed once per array: see `_factorized`)."""
    known = _factorized.get(id(values))
    if known is not None and known[0]() is values:
        return known[1]
    found = _factorize(values)
    for shared in found:  # shared by every caller: read-only
        shared.setflags(write=False)
    key = id(values)
    _factorized[key] = (weakref.ref(values, lambda _: _factorized.pop(key, None)), found)
    return found


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """factorize, computed.  Objects (texts) are numbered in a dict first and only the few
    distinct ones sorted: sorting every row's Python string, as np.unique does, costs seven
    times as much."""
    gone = missing(values)
    codes = np.full(len(values), -1, dtype=np.int64)
    present = values[~gone]
    if values.dtype != object:
        uniques, codes[~gone] = np.unique(present, return_inverse=True)
        return codes, uniques
    first_seen: dict = {}
    seen_codes = np.fromiter((first_seen.setdefault(v, len(first_seen)) for v in present),
                             dtype=np.int64, count=len(present))
    distinct = np.empty(len(first_seen), dtype=object)
    distinct[:] = list(first_seen)
    by_value = np.argsort(distinct, kind="stable") if len(distinct) else np.zeros(0, dtype=np.intp)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[by_value] = np.arange(len(distinct))
    codes[~gone] = rank[seen_codes]
    return codes, distinct[by_value]


def smallest(values: np.ndarray) -> float:
    """The least value, NaN skipped; NaN when there is none (as pandas' min)."""
    present = values[~np.isnan(values)]
    return float(present.min()) if len(present) else math.nan


def largest(values: np.ndarray) -> float:
    """The greatest value, NaN skipped; NaN when there is none (as pandas' max)."""
    present = values[~np.isnan(values)]
    return float(present.max()) if len(present) else math.nan


def median(values: np.ndarray) -> float:
    """The median, NaN skipped; NaN when there is none (as pandas' median)."""
    present = values[~np.isnan(values)]
    return float(np.median(present)) if len(present) else math.nan


def isin(values: Iterable, allowed: Iterable) -> np.ndarray:
    """True where a value is one of `allowed` (a missing one never is)."""
    allowed = set(allowed)
    values = list(values)
    return np.fromiter((v in allowed for v in values), dtype=bool, count=len(values))


def lookup(keys: np.ndarray, table: Mapping) -> np.ndarray:
    """Each row's key looked up in `table` (a specification table such as S3 train_samples),
    as a float; NaN where the key is missing or the table lacks it (each key looked up once)."""
    codes, distinct = factorize(keys)
    return np.append([float(table.get(key, math.nan)) for key in distinct], math.nan)[codes]


def joined(*parts) -> np.ndarray:
    """Texts joined row by row from columns (object arrays) and plain strings; None where a
    column has none (as pandas' string + string)."""
    n = max(len(p) for p in parts if not isinstance(p, str))
    columns = [[p] * n if isinstance(p, str) else p for p in parts]
    out = np.full(n, None, dtype=object)
    out[:] = [None if any(v is None for v in row) else "".join(row) for row in zip(*columns)]
    return out


def cell_text(value, whole: bool) -> str:
    """A cell as a message writes it: an integer column's float as the integer it holds."""
    return str(int(value)) if whole else str(value)


class Groups:
    """The rows grouped by one or more key columns, groups in sorted key order; a row with
    a missing key is in no group (pandas' groupby with dropna)."""

    def __init__(self, *keys: np.ndarray):
        parts = [factorize(k) for k in keys]
        codes = np.zeros(len(keys[0]), dtype=np.int64)
        gone = np.zeros(len(keys[0]), dtype=bool)
        for part, uniques in parts:
            gone |= part < 0
            codes = codes * max(len(uniques), 1) + np.maximum(part, 0)
        combined, self.codes = np.unique(codes[~gone], return_inverse=True)
        full = np.full(len(codes), -1, dtype=np.int64)
        full[~gone] = self.codes
        #: each row's group (-1: none)
        self.codes = full
        self.count = len(combined)
        #: each group's key values, one array per key column
        self.keys: list[np.ndarray] = []
        for _, uniques in reversed(parts):
            width = max(len(uniques), 1)
            self.keys.insert(0, uniques[combined % width] if len(uniques) else uniques[:0])
            combined = combined // width
        self._order = np.argsort(self.codes, kind="stable")
        self._order = self._order[self.codes[self._order] >= 0]
        self.size = np.bincount(self.codes[self._order], minlength=self.count)
        self._bounds = np.concatenate([[0], np.cumsum(self.size)])

    def __len__(self) -> int:
        return self.count

    def rows(self) -> list[np.ndarray]:
        """Each group's row positions, in row order."""
        return [self._order[self._bounds[i]:self._bounds[i + 1]] for i in range(self.count)]

    def _present(self, values: np.ndarray):
        """Rows in a group with a value: their group and value, by group."""
        rows = self._order[~missing(values[self._order])]
        return self.codes[rows], values[rows]

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Each group's sum, compensated (Kahan) in row order as pandas' group sum is, so that
        a run's summed energy is the same number to the last bit whichever computes it."""
        group, v = self._present(values)
        n = np.bincount(group, minlength=self.count)
        start = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
        total, compensation = np.zeros(self.count), np.zeros(self.count)
        with np.errstate(invalid="ignore"):
            for k in range(int(n.max(initial=0))):  # the k-th value of every group at once
                has = np.flatnonzero(n > k)
                y = v[start[has] + k] - compensation[has]
                t = total[has] + y
                lost = (t - total[has]) - y
                compensation[has] = np.where(np.isnan(lost), 0.0, lost)
                total[has] = t
        return total

    def valid(self, values: np.ndarray) -> np.ndarray:
        """How many values each group has (missing ones not counted)."""
        return np.bincount(self._present(values)[0], minlength=self.count)

    def mean(self, values: np.ndarray) -> np.ndarray:
        n = self.valid(values)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, self.sum(values) / n, np.nan)

    def _sorted(self, values: np.ndarray):
        """The values in a group, sorted by group then value: (values, per-group count, start)."""
        group, v = self._present(values)
        rank = factorize(v)[0] if v.dtype == object else v
        v = v[np.lexsort((rank, group))]
        n = np.bincount(group, minlength=self.count)
        return v, n, np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)

    def _empty(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind == "M":
            return np.full(self.count, np.datetime64("NaT"), dtype=values.dtype)
        if values.dtype.kind == "f":
            return np.full(self.count, np.nan)
        return np.full(self.count, None, dtype=object)

    def min(self, values: np.ndarray) -> np.ndarray:
        v, n, start = self._sorted(values)
        out = self._empty(values)
        out[n > 0] = v[start[n > 0]]
        return out

    def max(self, values: np.ndarray) -> np.ndarray:
        v, n, start = self._sorted(values)
        out = self._empty(values)
        out[n > 0] = v[(start + n - 1)[n > 0]]
        return out

    def median(self, values: np.ndarray) -> np.ndarray:
        """Each group's median of its values (NaN for a group with none)."""
        v, n, start = self._sorted(values)
        out = np.full(self.count, np.nan)
        has = n > 0
        out[has] = (v[start[has] + (n[has] - 1) // 2] + v[start[has] + n[has] // 2]) / 2
        return out

    def first(self, values: np.ndarray) -> np.ndarray:
        """Each group's first value (missing ones skipped, as pandas' first)."""
        group, v = self._present(values)
        out = np.full(self.count, None, dtype=object) if values.dtype == object else \
            np.full(self.count, np.nan)
        seen = np.unique(group, return_index=True)
        out[seen[0]] = v[seen[1]]
        return out

    def nunique(self, values: np.ndarray) -> np.ndarray:
        """How many distinct values each group has (missing ones not counted)."""
        group, v = self._present(values)
        if not len(v):
            return np.zeros(self.count, dtype=np.int64)
        pairs = np.unique(np.stack([group, factorize(v)[0]]), axis=1)
        return np.bincount(pairs[0], minlength=self.count)

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        """A value per group spread to each row of it (NaN or None for rows in no group)."""
        fill = np.nan if per_group.dtype.kind == "f" else None
        out = np.full(len(self.codes), fill, dtype=per_group.dtype if fill is not None or
                      per_group.dtype == object else float)
        inside = self.codes >= 0
        out[inside] = per_group[self.codes[inside]]
        return out

    def shift(self, values: np.ndarray) -> np.ndarray:
        """Each row's previous row's value within its group (in row order); missing at a
        group's first row (pandas' groupby(...).shift(1))."""
        empty = np.datetime64("NaT") if values.dtype.kind == "M" else (
            np.nan if values.dtype.kind == "f" else None)
        out = np.full(len(values), empty, dtype=values.dtype if values.dtype.kind in "fM" else object)
        rows = self._order
        follows = np.flatnonzero(self.codes[rows][1:] == self.codes[rows][:-1]) + 1
        out[rows[follows]] = values[rows[follows - 1]]
        return out
