"""The round-trip proof in bounded memory (rundirs.prove_round_trip, the audit's
integrity.round-trip) and the streaming reader under it (tables.stream_rows)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from conftest import TINY_META, tiny_tables
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.package import rundirs
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable, canonical_rows, canonical_text, parse_text, stream_rows
from deepgreen_audit.package.validate import validate
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.suite.registry import run_check

QUOTED = ["a,b", 'say "hi"', "two\nlines", "cr\r\nlf", "", "plain", "é,ü"]


def _round_trip_finding(pkg: Path):
    """The integrity.round-trip finding of the package at `pkg`, run without validating it
    first (the audit would skip the check on an invalid package)."""
    check = next(c for c in audit_checks() if c.id == "integrity.round-trip")
    return run_check(check, AuditContext(Package.open(pkg)))


def _streamed(path: Path, chunk_bytes: int) -> tuple[list[list[str]], list[int], str]:
    digest = hashlib.sha256()
    rows, lines = [], []
    for start, batch in stream_rows(path, digest, chunk_bytes=chunk_bytes):
        for i, row in enumerate(batch):
            rows.append(row)
            lines.append(start + i)
    return rows, lines, digest.hexdigest()


@pytest.mark.parametrize("chunk_bytes", [1, 3, 7, 64, 1 << 18])
def test_stream_rows_reads_what_parse_text_reads(tmp_path, chunk_bytes):
    """Rows, the lines they start on, and the file's SHA-256, whatever the pieces it is read
    in: quoted cells with commas, quotes and line breaks, CR LF, empty lines, a last line
    without a line feed, multi-byte characters cut by a piece's end."""
    rng = random.Random(chunk_bytes)
    texts = [
        "a,b\n1,2\n3,4\n",
        'h1,h2\nx,"a,b"\n"two\nlines",y\nz,"say ""hi"""\nlast,row\n',
        "h\n\n\nv\n",
        "h1,h2\n1,2\r\n3,4\n",
        'h1,h2\n"x\n\n\ny",1\n2,3',
        "h1,h2\nä,ü\n€,日本\n",
        canonical_text(["a", "b", "c"], [[rng.choice(QUOTED) for _ in range(3)] for _ in range(50)]),
    ]
    for n, text in enumerate(texts):
        path = tmp_path / f"t{n}.csv"
        path.write_bytes(text.encode())
        whole = parse_text(text, path)
        rows, lines, digest = _streamed(path, chunk_bytes)
        assert rows == [whole.header, *whole.rows], text
        assert lines == [1, *whole.lines()], text
        assert digest == hashlib.sha256(text.encode()).hexdigest()


def test_stream_rows_names_the_line_of_bad_bytes_and_bad_csv(tmp_path):
    from deepgreen_audit.errors import UserError

    bad_utf8 = tmp_path / "bad.csv"
    bad_utf8.write_bytes(b"a,b\n1,2\n3,\xff\n")
    with pytest.raises(UserError, match="UTF-8") as info:
        _streamed(bad_utf8, 1 << 18)
    assert info.value.row == 3
    unclosed = tmp_path / "unclosed.csv"
    unclosed.write_bytes(b'a,b\n1,2\n3,"open\n4,5\n')
    with pytest.raises(UserError, match="CSV"):
        _streamed(unclosed, 4)


def test_canonical_text_of_runs_concatenates_to_the_table():
    """The proof hashes a table as its header's text and then each run's rows' text: that is
    the whole table's canonical text, cells that need quoting included, however the rows are
    grouped (and a run with no rows adds nothing)."""
    rng = random.Random(7)
    header = ["run_id", "x", "y"]
    rows = [[f"r{i // 4}", rng.choice(QUOTED), rng.choice(QUOTED)] for i in range(40)]
    assert any('"' in canonical_rows([row]) for row in rows)
    whole = canonical_text(header, rows)
    for _ in range(20):
        cuts = sorted(rng.sample(range(len(rows) + 1), 5))
        groups = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)])]
        assert canonical_rows([header]) + "".join(map(canonical_rows, groups)) == whole
    one_column = [[""], ["a"], ["b,c"]]
    assert "".join(canonical_rows([r]) for r in [["h"], *one_column]) == canonical_text(["h"], one_column)


def _tiny_with(tmp_path: Path, edit) -> Path:
    tables = tiny_tables()
    edit(tables)
    out = tmp_path / "pkg"
    write_package(tables, out, TINY_META)
    return out


def test_the_proof_passes_on_quoted_cells(tmp_path):
    """Cells that CSV quotes (a comma, quotes, a line break) in the runs and environment tables
    go through the manifest's JSON and come back quoted the same."""
    def edit(tables):
        col = tables["runs"].header.index("missing_reason")
        tables["runs"].rows[0][col] = 'first line, "quoted"\nsecond line'
        col = tables["environment"].header.index("counters_missing_reason")
        tables["environment"].rows[0][col] = "RAPL, NVML: \"none\""

    pkg = _tiny_with(tmp_path, edit)
    assert validate(pkg).valid
    assert b'"first line, ""quoted""\nsecond line"' in (pkg / "runs.csv").read_bytes()
    proof = rundirs.prove_round_trip(Package.open(pkg))
    assert proof.error is None and proof.changes == [] and (proof.runs, proof.files) == (2, 11)
    finding = _round_trip_finding(pkg)
    assert finding.status == "pass", finding.message
    assert "2 run directories (11 files)" in finding.message


@pytest.mark.parametrize("table, column, spelling", [
    ("runs", "learning_rate", "0.00010"),          # JSON keeps the number, not its spelling
    ("environment", "rapl_available", "True"),     # a boolean restore reads as false
])
def test_the_proof_fails_on_a_cell_restore_does_not_keep(tmp_path, table, column, spelling):
    """One cell of one table in a spelling the run directory cannot hold: a failed finding that
    names that table alone, not an exception."""
    pkg = _tiny_with(tmp_path, lambda tables: None)
    path = pkg / f"{table}.csv"
    parsed = parse_text(path.read_text(), path)
    parsed.rows[0][parsed.header.index(column)] = spelling
    path.write_text(canonical_text(parsed.header, parsed.rows))
    finding = _round_trip_finding(pkg)
    assert finding.status == "fail", finding.message
    assert finding.message.startswith(f"restore -> flatten changes {table} (sha256 ")
    assert "," not in finding.message.removeprefix("restore -> flatten changes ")


@pytest.mark.parametrize("damage", [
    lambda text: text.replace("\n", ",extra\n", 3),          # a row with a cell too many
    lambda text: text + 'zz,"never closed\n',                 # a quote never closed
    lambda text: text.replace("run_id", "run", 1),            # a header unlike the schema's
    lambda text: text + "zz-orphan" + ",1" * (text.split("\n")[0].count(",")) + "\n",
    lambda text: "",                                          # empty
])
def test_a_broken_table_fails_the_proof_without_raising(tmp_path, damage):
    for name in TABLES:
        pkg = tmp_path / name
        shutil.copytree(_tiny_with(tmp_path / f"src-{name}", lambda tables: None), pkg)
        path = pkg / f"{name}.csv"
        path.write_text(damage(path.read_text()))
        finding = _round_trip_finding(pkg)
        assert finding.status == "fail", (name, finding.message)
        assert "crashed" not in finding.message and "restore -> flatten" in finding.message


def test_the_pipelined_proof_finds_what_the_proof_in_one_process_finds(tmp_path):
    """The audit program's proof reads the run directories back in a second child process fed
    through a pipe (`pipelined`): on a clean package, on cells restore does not keep, on each
    table broken each way (stopping the writer or the reader), it gives the same runs, files,
    changes and error as the proof in one process, and leaves no process behind."""
    def cell(table, column, spelling):
        def edit(tables):
            tables[table].rows[0][tables[table].header.index(column)] = spelling
        return edit

    packages = [_tiny_with(tmp_path / "clean", lambda tables: None),
                _tiny_with(tmp_path / "quoted", cell("runs", "missing_reason", 'a, "b"\nc'))]
    for n, damage in enumerate([lambda text: text.replace("\n", ",extra\n", 3),
                                lambda text: text + 'zz,"never closed\n',
                                lambda text: text.replace("run_id", "run", 1),
                                lambda text: text.replace("\n", "\nzz-orphan,1\n", 2),
                                lambda text: ""]):
        for name in TABLES:
            pkg = tmp_path / f"{name}-{n}"
            shutil.copytree(packages[0], pkg)
            path = pkg / f"{name}.csv"
            path.write_text(damage(path.read_text()))
            packages.append(pkg)
    respelled = tmp_path / "respelled"
    shutil.copytree(packages[0], respelled)
    runs = parse_text((respelled / "runs.csv").read_text(), respelled / "runs.csv")
    runs.rows[0][runs.header.index("learning_rate")] = "0.00010"
    (respelled / "runs.csv").write_text(canonical_text(runs.header, runs.rows))
    packages.append(respelled)
    # in a process of its own, as the program's child is: this one may hold a framework's
    # threads (JAX's, from other tests), which a fork must not copy
    done = subprocess.run([sys.executable, "-c", _BOTH_PROOFS, *map(str, packages)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    proofs, left_behind = json.loads(done.stdout)
    outcomes = set()
    for pkg, (alone, pipelined) in zip(packages, proofs, strict=True):
        assert pipelined == alone, pkg
        outcomes.add("error" if alone["error"] else "changes" if alone["changes"] else "same")
    assert outcomes == {"error", "changes", "same"}
    assert left_behind == []


_BOTH_PROOFS = """
import dataclasses, json, sys
import psutil
from deepgreen_audit.package import rundirs
from deepgreen_audit.package.descriptor import Package
proofs = [[dataclasses.asdict(rundirs.prove_round_trip(Package.open(pkg), pipelined=pipelined))
           for pipelined in (False, True)] for pkg in sys.argv[1:]]
print(json.dumps([proofs, [c.pid for c in psutil.Process().children(recursive=True)]]))
"""


def _package_of(tmp_path: Path, runs: int, samples_per_run: int) -> Path:
    """A valid package of `runs` runs built from the tiny package's first run."""
    tiny = tiny_tables()
    template = {name: [r for r in tiny[name].rows if r[0] == tiny["runs"].rows[0][0]]
                for name in TABLES}
    schemas = {name: load_schema(name) for name in TABLES}
    t_col = schemas["samples"].field_names.index("t_s")
    rows: dict[str, list] = {name: [] for name in TABLES}
    for n in range(runs):
        run_id = f"python-pytorch.resnet18.cifar100.r{n + 1:05d}"
        for name in ("runs", "environment", "blocks"):
            rows[name].extend([run_id, *r[1:]] for r in template[name])
        for t in range(samples_per_run):
            row = [run_id, *template["samples"][0][1:]]
            row[t_col] = f"{float(t)}"
            rows["samples"].append(row)
    run_col = schemas["runs"].field_names.index("repetition")
    for i, row in enumerate(rows["runs"]):
        row[run_col] = str(i + 1)
    tables = {name: TextTable(schemas[name].field_names, rows[name]) for name in TABLES}
    out = tmp_path / f"pkg{runs}"
    write_package(tables, out, TINY_META)
    return out


def _traced(work) -> tuple[int, int]:
    """(bytes still held, peak bytes) of what `work` allocates (tracemalloc)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


def test_the_proof_holds_one_run_at_a_time(tmp_path):
    """Not timing: the proof's peak memory (tracemalloc) does not grow with the number of runs,
    and is a small part of what holding the tables as text (as the proof once did) takes."""
    small, large = (Package.open(_package_of(tmp_path, runs, 100)) for runs in (250, 1000))
    proofs, peaks = [], []
    for package in (small, large):
        held, peak = _traced(lambda package=package: proofs.append(rundirs.prove_round_trip(package)))
        assert held < 200_000, held  # nothing left behind (no reference cycles piling up)
        peaks.append(peak)
    assert [(p.runs, p.error, p.changes) for p in proofs] == [(250, None, []), (1000, None, [])]
    text_size = _traced(lambda: [large.text(name) for name in TABLES])[0]
    # four times the runs: the same peak, give or take the pieces each table is read in
    assert peaks[1] < 1.3 * peaks[0], peaks
    assert peaks[1] < text_size / 10, (peaks, text_size)


def test_canonical_rows_are_what_the_csv_module_writes():
    """The one-pass join of plain rows and the csv module agree on every row, plain or not:
    cells with commas, quotes, line breaks, carriage returns, empty cells, one-cell rows."""
    import csv
    import io
    import random

    from deepgreen_audit.package.tables import canonical_rows

    rng = random.Random(7)
    pieces = ["a", "1.5", "", " ", ",", '"', "\n", "\r", "x,y", "é", "-0.0"]
    for _ in range(2000):
        rows = [[rng.choice(pieces) + rng.choice(pieces) * rng.randint(0, 1)
                 for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 4))]
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        assert canonical_rows(rows) == buffer.getvalue(), rows
