"""A large table is validated block by block (bounded memory); a small one is read whole.

Both readers must say the same of any table: every case here is validated twice, once with
blocks larger than the package (the whole-file check) and once with blocks of a few rows,
and the two reports and typed tables must be equal."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from deepgreen_audit.package import validate as validation
from tests.package_edits import rehash


@pytest.fixture(scope="module")
def small_campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("blocks") / "pkg"
    subprocess.run([sys.executable, "-m", "deepgreen_audit", "synth", "--out", str(out),
                    "--ecosystems", "python-pytorch,python-jax", "--architectures", "resnet18",
                    "--datasets", "cifar100", "--repetitions", "3", "--epochs", "3"],
                   check=True, capture_output=True)
    return out


def _replace_line(path, number: int, edit) -> None:
    lines = path.read_text().split("\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_text("\n".join(lines))


def _cell(path, number: int, column: str, value: str) -> None:
    header = path.read_text().split("\n", 1)[0].split(",")

    def edit(line):
        cells = line.split(",")
        cells[header.index(column)] = value
        return ",".join(cells)
    _replace_line(path, number, edit)


def _swap_lines(path, a: int, b: int) -> None:
    lines = path.read_text().split("\n")
    lines[a - 1], lines[b - 1] = lines[b - 1], lines[a - 1]
    path.write_text("\n".join(lines))


EDITS = {
    "valid": lambda p: None,
    "type error deep in samples": lambda p: _cell(p / "samples.csv", 200, "gpu_power_w", "fast"),
    "non-canonical numbers": lambda p: (_cell(p / "samples.csv", 5, "t_s", "4.00"),
                                       _cell(p / "samples.csv", 150, "gpu_power_w", "1e2")),
    "constraint errors": lambda p: (_cell(p / "blocks.csv", 7, "duration_s", "-1.0"),
                                    _cell(p / "blocks.csv", 9, "phase", "test")),
    "primary key repeats": lambda p: _replace_line(
        p / "samples.csv", 120, lambda line: (p / "samples.csv").read_text().split("\n")[118]),
    "rows out of order": lambda p: _swap_lines(p / "samples.csv", 100, 160),
    "run unknown to runs": lambda p: _cell(p / "samples.csv", 180, "run_id", "ghost.run.r1"),
    "unique run id repeats": lambda p: _cell(p / "runs.csv", 3, "run_id",
                                             (p / "runs.csv").read_text().split("\n")[1].split(",")[0]),
    "empty key cell": lambda p: _cell(p / "blocks.csv", 4, "epoch", ""),
    "a quoted cell (whole-file reader)": lambda p: _cell(p / "blocks.csv", 30, "codecarbon_region", '"a,b"'),
    "carriage return": lambda p: _replace_line(p / "samples.csv", 90, lambda line: line + "\r"),
    "truncated last row": lambda p: (p / "samples.csv").write_bytes((p / "samples.csv").read_bytes()[:-7]),
    "bad UTF-8": lambda p: (p / "samples.csv").write_bytes(
        (p / "samples.csv").read_bytes().replace(b"70.4", b"7\xff.4", 1)),
    "header out of order": lambda p: _replace_line(
        p / "samples.csv", 1, lambda line: ",".join(reversed(line.split(",")))),
}


def _both(pkg, monkeypatch):
    """The report and typed tables of the whole-file check, then of the check in blocks."""
    results = []
    for block_bytes in (1 << 40, 1024):
        monkeypatch.setattr(validation, "STREAM_BLOCK_BYTES", block_bytes)
        report, typed = validation.validate_tables(pkg)
        results.append((report.to_dict(), {name: _decoded(table) for name, table in typed.items()}))
    return results


def _decoded(table: pa.Table) -> pa.Table:
    return pa.table({name: column.cast(column.type.value_type) if pa.types.is_dictionary(column.type)
                     else column for name, column in zip(table.column_names, table.columns)})


@pytest.mark.parametrize("case", list(EDITS))
def test_blocks_and_whole_file_say_the_same(case, small_campaign, tmp_path, copy_of, monkeypatch):
    pkg = copy_of(small_campaign, tmp_path / "pkg")
    EDITS[case](pkg)
    rehash(pkg)
    (whole, whole_typed), (blocks, blocks_typed) = _both(pkg, monkeypatch)
    assert blocks == whole
    assert set(blocks_typed) == set(whole_typed)
    for name, table in whole_typed.items():
        assert blocks_typed[name].equals(table), name
    assert whole["valid"] == (case in ("valid", "a quoted cell (whole-file reader)"))


def test_blocks_keep_the_keys_dictionary_encoded(small_campaign, monkeypatch):
    """Read in blocks, a table's string keys are codes into one dictionary: memory for a key
    of millions of rows is four bytes a row, not its text."""
    monkeypatch.setattr(validation, "STREAM_BLOCK_BYTES", 4096)
    report, typed = validation.validate_tables(small_campaign)
    assert report.valid
    assert pa.types.is_dictionary(typed["samples"].column("run_id").type)
    assert typed["samples"].column("run_id").num_chunks > 2
