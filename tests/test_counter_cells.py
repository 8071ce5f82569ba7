"""The counter cells of the blocks table, parsed once into flat arrays (S5.counter-recompute and
S5.rapl-wraps), against the plain reading of each cell, block by block, with Python integers."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from deepgreen_audit.audit.checks.measurement import (
    RAPL_COLUMNS,
    _per_block,
    counter_cells,
    rapl_readings,
)
from deepgreen_audit.columnar.frame import Frame


def _cells(values: list[str | None]) -> np.ndarray:
    """A counter column as a computed frame holds it: an object array of str or None."""
    cells = np.empty(len(values), dtype=object)
    cells[:] = values
    return cells


def _plain(cell: str | None) -> list[int] | None:
    return None if cell is None else [int(x) for x in cell.split(";")]


def _random_blocks(seed: int, n: int = 300, big: bool = False) -> Frame:
    """RAPL cells of `n` blocks: 1-3 domains, some cells missing, some with another number of
    domains, wraps recorded or not, counters that went down; readings past 2^63 with `big`."""
    rng = random.Random(seed)
    top = 2 ** 70 if big else 2 ** 32
    rows = []
    for _ in range(n):
        k = rng.randint(1, 3)
        start = [rng.randrange(top) for _ in range(k)]
        end = [rng.randrange(top) for _ in range(k)]
        ranges = [top] * k
        wraps = [int(e < s) + rng.choice([0, 0, 1]) for s, e in zip(start, end)]
        cells = [";".join(map(str, v)) for v in (start, end, ranges, wraps)]
        if rng.random() < 0.3:
            cells[3] = None
        if rng.random() < 0.1:
            cells[rng.randrange(3)] += ";7"
        if rng.random() < 0.1:
            cells[rng.randrange(4)] = None
        rows.append(cells)
    return Frame.of({c: _cells([r[i] for r in rows]) for i, c in enumerate(RAPL_COLUMNS)})


def test_cells_parse_into_flat_readings_with_offsets():
    parsed = counter_cells(pa.array(["1;2", None, "5", "10;20;30"]))
    assert parsed.values.tolist() == [1, 2, 5, 10, 20, 30]
    assert parsed.counts.tolist() == [2, 0, 1, 3]
    assert parsed.of(np.array([3, 0])).tolist() == [10, 20, 30, 1, 2]
    assert _per_block(parsed.of(np.array([0, 2, 3])), parsed.counts[[0, 2, 3]]).tolist() == [3, 5, 60]


def test_a_reading_past_64_bits_is_kept_exact():
    parsed = counter_cells(pa.array([f"{2 ** 64 + 1};3", "4"]).dictionary_encode())
    assert parsed.values.tolist() == [2 ** 64 + 1, 3, 4]
    assert parsed.values.dtype == object


def _reference(b: Frame) -> dict[int, tuple[list[int], ...]]:
    """Block -> (start, end, range, wraps used, recorded?) of each complete block, read cell by cell."""
    out = {}
    for i, (s, e, r, w) in enumerate(zip(*([_plain(c) for c in b[col].tolist()]
                                           for col in RAPL_COLUMNS))):
        if s is None or e is None or r is None or not len(s) == len(e) == len(r):
            continue
        if w is not None and len(w) != len(s):
            continue
        used = w if w is not None else [int(y < x) for x, y in zip(s, e)]
        out[i] = (s, e, r, used, [w is not None] * len(s))
    return out


def test_rapl_readings_are_those_of_each_complete_block_read_alone():
    for seed, big in [(1, False), (2, False), (3, True)]:
        b = _random_blocks(seed, big=big)
        rapl = rapl_readings(b)
        expected = _reference(b)
        assert rapl.blocks.tolist() == sorted(expected)
        flat = [[v for i in sorted(expected) for v in expected[i][k]] for k in range(5)]
        got = [rapl.start, rapl.end, rapl.range, rapl.wraps, rapl.recorded]
        assert [g.tolist() for g in got] == flat
        # the energy each block drew, exactly as the cell-by-cell sum gives it
        drawn = _per_block((rapl.end - rapl.start + rapl.wraps * rapl.range) / 1e6, rapl.counts)
        assert drawn.tolist() == [sum((e - s + w * r) / 1e6 for s, e, r, w, _ in zip(*expected[i]))
                                  for i in sorted(expected)]
