"""A drawn campaign written N times in a row: a package N times its size in bounded memory.

`deepgreen synth --copies N` draws the campaign once (in memory, as without copies) and
writes it N times in sequence as one package, as if the same campaign had been run N
times one after the other on the host.  Copy k (from 0) of a run differs from the drawn run
only where a run's identity or time lies; every other cell is copied verbatim:

* run id `<config>.r<n>` becomes `<config>.r<n + k R>` and `repetition` n + k R (R: the
  repetitions drawn);
* every datetime (runs.started_at_utc, runs.ended_at_utc, blocks.started_at_utc) moves by
  k x (the drawn campaign's span, first start to last end, plus the median gap between
  consecutive runs), so the copies never overlap and follow one another as runs do;
* `schedule_position` + k n (n: the runs drawn) and the Slurm array task + k n, so the
  copies continue the drawn schedule and job array;
* `process_id` + k x (the drawn process ids' range plus their median step), so the
  copies continue the host's process ids;
* `seed`: new seeds, distinct across the package (random stream `S_COPIES`, one per copy),
  and `initial_weights_sha256` the placeholder of the new seed.

Copy 0 is the drawn campaign unchanged.  The rows are produced per run in the order of the
new run ids (the tables' primary-key order), each built from per-run templates of the
drawn tables' text, so memory holds the drawn campaign and never its copies.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from deepgreen_audit.package.tables import TextTable, canonical_text
from deepgreen_audit.spec import load_spec

#: The random stream of the copies' seeds (generate's streams are 1-7).
S_COPIES = 8
#: Seeds lie below this bound, as the drawn campaign's do (a signed 32-bit integer).
SEED_BOUND = 2**31 - 1


def _line(cells: list[str]) -> str:
    """The canonical CSV line of `cells` (quoted where a cell needs it), with its line feed."""
    return canonical_text(cells, [])


def _rest_lines(rows: list[list[str]], start: int) -> bytes:
    """The canonical lines of `rows` without their first `start` cells; a cell holding a line
    break (which would split a line in two) is refused."""
    sliced = [row[start:] for row in rows]
    text = canonical_text(sliced[0], sliced[1:]) if sliced else ""
    if text.count("\n") != len(rows):
        raise ValueError("a cell holds a line break; copies are built line by line")
    return text.encode("utf-8")


def _lines(rows: list[list[str]], start: int) -> list[bytes]:
    """`_rest_lines`, one line (without its line feed) per row."""
    return _rest_lines(rows, start)[:-1].split(b"\n") if rows else []


def _us(texts: list[str]) -> np.ndarray:
    """Canonical datetimes (ISO 8601 UTC ending in Z) as microseconds since the epoch."""
    return np.array([t[:-1] for t in texts], dtype="datetime64[us]").astype(np.int64)


def format_us(us: np.ndarray) -> list[str]:
    """Microseconds since the epoch as canonical datetimes (`canonical.format_value`'s
    text: no fraction when it is zero, no trailing zeros)."""
    texts = np.datetime_as_string(us.astype("datetime64[us]"), unit="us")
    return [t.rstrip("0").rstrip(".") + "Z" for t in texts.tolist()]


@dataclass
class _Run:
    """One drawn run: its runs row and the text of its rows in the other tables."""

    row: list[str]
    environment: bytes                # the environment line without its run id
    block_heads: list[bytes]          # per block: its cells between run id and started_at_utc
    block_tails: list[bytes]          # per block: its cells after started_at_utc, with "\n"
    block_start_us: np.ndarray        # per block: started_at_utc, microseconds
    block_start_text: list[str]       # per block: started_at_utc as drawn
    samples: bytes                    # its samples lines without their run ids


class Copies:
    """The templates of a drawn campaign and the rules of its copies."""

    def __init__(self, tables: dict[str, TextTable], copies: int, repetitions: int, seed: int):
        """Take the drawn `tables` apart into per-run templates (each table is removed from
        `tables` once read, so the drawn text is held once)."""
        if copies < 1:
            raise ValueError(f"copies must be at least 1, not {copies}")
        self.copies, self.repetitions, self.seed = copies, repetitions, seed
        runs = tables.pop("runs")
        self.header = runs.header
        self.col = {name: runs.header.index(name) for name in runs.header}
        ids = [row[0] for row in runs.rows]
        index = {run_id: i for i, run_id in enumerate(ids)}
        self.n = len(ids)
        env = tables.pop("environment")
        env_of = {row[0]: _rest_lines([row], 1) for row in env.rows}
        blocks = tables.pop("blocks")
        start_col = blocks.header.index("started_at_utc")
        grouped: dict[str, list[list[str]]] = {run_id: [] for run_id in ids}
        for row in blocks.rows:
            grouped[row[0]].append(row)
        del blocks
        self.runs: list[_Run] = []
        for run_id, row in zip(ids, runs.rows):
            rows = grouped.pop(run_id)
            starts = [r[start_col] for r in rows]
            self.runs.append(_Run(
                row=row, environment=env_of.pop(run_id),
                block_heads=_lines([r[:start_col] for r in rows], 1),
                block_tails=[line + b"\n" for line in _lines(rows, start_col + 1)],
                block_start_us=_us(starts), block_start_text=starts, samples=b""))
        samples = tables.pop("samples")
        self.n_samples = len(samples.rows)
        first = 0
        while first < len(samples.rows):
            run_id = samples.rows[first][0]
            last = first
            while last < len(samples.rows) and samples.rows[last][0] == run_id:
                last += 1
            self.runs[index[run_id]].samples = _rest_lines(samples.rows[first:last], 1)
            first = last
        del samples
        self.n_blocks = sum(len(r.block_heads) for r in self.runs)
        self._rules()

    # --- the rules -------------------------------------------------------------------------

    def _cells(self, name: str) -> list[str]:
        return [run.row[self.col[name]] for run in self.runs]

    def _rules(self) -> None:
        starts, ends = _us(self._cells("started_at_utc")), _us(self._cells("ended_at_utc"))
        order = np.argsort(np.array([int(p) for p in self._cells("schedule_position")]))
        gaps = starts[order][1:] - ends[order][:-1]
        self.span_us = int(ends.max() - starts.min())
        self.gap_us = int(np.median(gaps)) if len(gaps) else 0
        #: how far each copy moves in time, microseconds
        self.shift_us = self.span_us + self.gap_us
        pids = np.array([int(p) for p in self._cells("process_id")], dtype=np.int64)[order]
        self.pid_step = int(statistics.median(np.diff(pids).tolist())) if self.n > 1 else 1
        #: how far each copy moves the process ids
        self.pid_offset = int(pids.max() - pids.min()) + max(self.pid_step, 1)
        self.classes = load_spec()["S3_data"]["classes"]
        config = [".".join(run.row[self.col[c]] for c in ("ecosystem", "architecture", "dataset"))
                  for run in self.runs]
        for run, cfg in zip(self.runs, config if self.copies > 1 else ()):
            if run.row[0] != f"{cfg}.r{run.row[self.col['repetition']]}":
                raise ValueError(f"run {run.row[0]} is not named <config>.r<repetition>")
        self.config = config
        first, last = int(order[0]), int(order[-1])
        #: a campaign that starts with the configuration it ends with would run it twice in a
        #: row at every seam between copies (S6.interleaving)
        self.seam_repeats = self.copies > 1 and self.n > 1 and config[first] == config[last]
        self._seeds()

    def _seeds(self) -> None:
        """Each copy's seeds: copy 0's as drawn, copy k's drawn from stream (seed, S_COPIES,
        k) without replacement, a value some earlier run holds drawn again from that
        stream (so the first copies' seeds do not depend on how many there are)."""
        drawn = [int(s) for s in self._cells("seed")]
        used = set(drawn)
        self.seeds = [drawn]
        for k in range(1, self.copies):
            rng = np.random.default_rng([self.seed, S_COPIES, k])
            values = rng.choice(SEED_BOUND, size=self.n, replace=False).tolist()
            for i, value in enumerate(values):
                while value in used:
                    value = int(rng.integers(SEED_BOUND))
                values[i] = value
                used.add(value)
            self.seeds.append(values)

    def run_id(self, i: int, k: int) -> str:
        """Copy k's id of drawn run i (copy 0: the drawn id, an initialiser trial's too)."""
        if k == 0:
            return self.runs[i].row[0]
        return f"{self.config[i]}.r{int(self.runs[i].row[self.col['repetition']]) + k * self.repetitions}"

    def describe(self) -> dict:
        """How the copies differ from the drawn campaign: for the descriptor and the truth."""
        return {
            "copies": self.copies,
            "drawn": {"repetitions": self.repetitions, "runs": self.n, "blocks": self.n_blocks,
                      "samples": self.n_samples},
            "written": {"repetitions": self.repetitions * self.copies,
                        "runs": self.n * self.copies, "blocks": self.n_blocks * self.copies,
                        "samples": self.n_samples * self.copies},
            "rules": (
                "the drawn campaign written copies times in a row, as if run that many times one "
                "after the other on the host; copy k (from 0; copy 0 is the drawn campaign) of "
                "run <config>.r<n> is <config>.r<n + k x repetitions> with repetition "
                "n + k x repetitions; its datetimes move by k x time_shift_s, its "
                "schedule_position and Slurm array task by k x runs, its process_id by "
                "k x process_id_shift; copies k >= 1 draw new seeds, distinct across the "
                f"package (numpy default_rng([seed, {S_COPIES}, k])), and record the "
                "initial_weights_sha256 placeholder of the new seed; every other cell is the "
                "drawn run's"),
            "time_shift_s": self.shift_us / 1e6,
            "time_shift": ("the drawn campaign's span, first start to last end "
                           f"({self.span_us / 1e6} s), plus the median gap between consecutive "
                           f"runs ({self.gap_us / 1e6} s)"),
            "process_id_shift": self.pid_offset,
        }

    # --- the rows --------------------------------------------------------------------------

    def order(self) -> list[tuple[str, int, int]]:
        """(new run id, drawn run, copy) of every run of the package, in run-id order."""
        return sorted((self.run_id(i, k), i, k) for k in range(self.copies) for i in range(self.n))

    def _runs_line(self, i: int, k: int, run_id: str) -> str:
        from deepgreen_audit.synth.model import initial_weights_sha256

        row = self.runs[i].row
        if k == 0:
            return _line(row)
        col, cells = self.col, list(row)
        seed = self.seeds[k][i]
        cells[col["run_id"]] = run_id
        cells[col["repetition"]] = str(int(row[col["repetition"]]) + k * self.repetitions)
        cells[col["seed"]] = str(seed)
        cells[col["schedule_position"]] = str(int(row[col["schedule_position"]]) + k * self.n)
        cells[col["process_id"]] = str(int(row[col["process_id"]]) + k * self.pid_offset)
        times = _us([row[col["started_at_utc"]], row[col["ended_at_utc"]]]) + k * self.shift_us
        cells[col["started_at_utc"]], cells[col["ended_at_utc"]] = format_us(times)
        weights = row[col["initial_weights_sha256"]]
        if weights:
            cells[col["initial_weights_sha256"]] = initial_weights_sha256(
                row[col["architecture"]], int(self.classes[row[col["dataset"]]]), seed)
        job, _, task = row[col["slurm_job_id"]].partition("_")
        if task:
            cells[col["slurm_job_id"]] = f"{job}_{int(task) + k * self.n}"
        return _line(cells)

    def chunks(self) -> Iterator[tuple[str, bytes]]:
        """(table, lines) of every run of the package, in the tables' primary-key order."""
        for run_id, i, k in self.order():
            run, rid = self.runs[i], run_id.encode("utf-8")
            yield "runs", self._runs_line(i, k, run_id).encode("utf-8")
            yield "environment", rid + b"," + run.environment
            starts = run.block_start_text if k == 0 else format_us(
                run.block_start_us + k * self.shift_us)
            yield "blocks", b"".join(rid + b"," + head + b"," + start.encode() + b"," + tail
                                     for head, start, tail in zip(run.block_heads, starts,
                                                                  run.block_tails))
            if run.samples:
                yield "samples", (rid + b"," + run.samples[:-1].replace(b"\n", b"\n" + rid + b",")
                                  + b"\n")

