"""Issue 27: importers and internal errors, each class closed at its root.

An input error is exit 2 (or 1 for a package that does not validate) with one line naming the
file, row or record, and column; exit 70, "this is a bug", never happens for any input; Ctrl-C
exits 130 without a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psutil
import pytest

from conftest import TINY_META, shared_data
from deepgreen_audit.cli import main
from deepgreen_audit.package.kinds import API_PROFILES, CODECARBON_LOG, REPLICATION
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable
from deepgreen_audit.package.writer import write_package
from package_edits import rehash
from test_greenlight_import import NS_2023, record

ROOT = Path(__file__).resolve().parents[1]


def _clean(capsys) -> str:
    """stderr of the verbs just run, asserted free of tracebacks and internal errors."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "internal error" not in captured.err and "crashed" not in captured.out
    return captured.err


# ---------------------------------------------------------------- import legacy

LEGACY_FILE = "results/data/pytorch_combined_data.csv"


def _legacy_with(tmp_path: Path, column: str, value: str, line: int = 3) -> Path:
    """A copy of the first campaign whose `column` reads `value` on `line` of LEGACY_FILE."""
    root = tmp_path / "legacy"
    shutil.copytree(shared_data("legacy-campaign"), root)
    path = root / LEGACY_FILE
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    rows[line - 1][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return root


@pytest.mark.parametrize("column, value, column_named, says", [
    ("duration", "twelve", "duration", "'twelve' is not a number"),
    ("cpu_energy", "1.2.3", "cpu_energy", "is not a number"),
    ("energy_consumed", "nan", "energy_consumed", "is not a finite number"),
    ("gpu_power", "inf", "gpu_power", "is not a finite number"),
    ("duration", "1e300", "duration", "within years 1 to 9999"),
    ("timestamp", "2128-01-01T00:00:00", "timestamp", "not a plausible date"),
    ("gpu_power", "-5", "gpu_power", "minimum 0"),
    ("epoca", "9" * 30, "epoca", "64-bit integer range"),
])
def test_a_bad_legacy_value_names_the_source_file_line_and_column(column, value, column_named,
                                                                   says, tmp_path, capsys):
    """Unparseable, non-finite and out-of-range values, and what only the schema refuses, are
    reported where they are written in the source, never by the package's row."""
    root = _legacy_with(tmp_path, column, value)
    assert main(["import", "legacy", str(root), "--out", str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)
    assert err.count("\n") == 1
    assert f"{LEGACY_FILE}, row 3, column {column_named!r}" in err and says in err, err
    assert not (tmp_path / "pkg").exists()


# ---------------------------------------------------------------- import greenlight

def _records(tmp_path: Path, folder: str, content: str) -> Path:
    root = tmp_path / "records"
    (root / "dataset" / folder).mkdir(parents=True)
    (root / "dataset" / folder / "experiment-1.json").write_text(content, encoding="utf-8")
    return root


def _big_signature() -> str:
    body = record()["tensorflow.add(a, b)"]
    return json.dumps([{"tensorflow.add(" + "a" * 50_000_000 + ")": body}])


GREENLIGHT_CASES = {
    "folder name with a space": ("my project", lambda: json.dumps([record()])),
    "50 MB call signature": ("proj", _big_signature),
    "call dated 2128": ("proj", lambda: json.dumps([record(
        times__start_time_execution=5_000_000_000 * 10**9,
        times__end_time_execution=5_000_000_001 * 10**9)])),
    "time beyond 9999": ("proj", lambda: json.dumps([record(
        times__start_time_execution=10**30, times__end_time_execution=10**30 + 1)])),
    "integer of 5000 digits": ("proj", lambda: json.dumps([record()]).replace(
        str(NS_2023), "1" + "0" * 5000, 1)),
    "setting beyond a double": ("proj", lambda: json.dumps([record(settings__tolerance=10**400)])),
}


@pytest.mark.parametrize("case", list(GREENLIGHT_CASES))
def test_import_greenlight_never_writes_what_validate_refuses(case, tmp_path, capsys):
    """Either the import refuses in one line naming the record file, and writes nothing, or
    what it wrote validates."""
    folder, content = GREENLIGHT_CASES[case]
    root = _records(tmp_path, folder, content())
    out = tmp_path / "pkg"
    status = main(["import", "greenlight", str(root), "--out", str(out)])
    err = _clean(capsys)
    assert status in (0, 2), err
    if status == 0:
        assert main(["validate", str(out)]) == 0
    else:
        assert err.count("\n") == 1 and "experiment-1.json: " in err and not out.exists()


def test_a_greenlight_refusal_names_the_record_and_its_field(tmp_path, capsys):
    root = _records(tmp_path, "proj", GREENLIGHT_CASES["call dated 2128"][1]())
    assert main(["import", "greenlight", str(root), "--out", str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)
    assert ("experiment-1.json: record 1 (call 'tensorflow.add(a, b)'), "
            "times.start_time_execution: '2128-") in err and "plausible date" in err


def test_a_bad_record_of_a_50_mb_signature_is_one_short_line(tmp_path, capsys):
    body = record(times__start_time_perf="soon")["tensorflow.add(a, b)"]
    root = _records(tmp_path, "proj", json.dumps([{"f(" + "a" * 50_000_000 + ")": body}]))
    assert main(["import", "greenlight", str(root), "--out", str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)
    assert len(err) < 500 and "record 1 (call 'f(aaaa" in err and "times.start_time_perf" in err


# ---------------------------------------------------------------- odd but legal descriptors

def _descriptor_edit(edit):
    def damage(pkg: Path) -> None:
        path = pkg / "datapackage.json"
        path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return damage


def _kind(value):
    def edit(text: str) -> str:
        desc = json.loads(text)
        desc["deepgreen:package"] = value
        return json.dumps(desc)
    return _descriptor_edit(edit)


DESCRIPTOR_CASES = {
    "deepgreen:package a list": _kind(["replication"]),
    "deepgreen:package an object": _kind({"kind": "replication"}),
    "number beyond the digit limit": _descriptor_edit(
        lambda text: text.replace("{", '{"x": 1' + "0" * 5000 + ",", 1)),
    "resource size beyond the digit limit": _descriptor_edit(
        lambda text: text.replace('"bytes": ', '"bytes": ' + "9" * 5000 + ", \"b\": ", 1)),
}


@pytest.mark.parametrize("case", list(DESCRIPTOR_CASES))
def test_an_odd_descriptor_is_an_input_error_for_every_verb(case, tiny_package, tmp_path, capsys):
    DESCRIPTOR_CASES[case](tiny_package)
    for argv in (["validate"], ["audit"], ["api-audit"], ["restore", "--out", tmp_path / "r"],
                 ["export", "--parquet", "--out", tmp_path / "pq"],
                 ["render", "--out", tmp_path / "render"]):
        status = main([argv[0], str(tiny_package), *map(str, argv[1:])])
        assert status in (1, 2), (argv, status)
    err = _clean(capsys)
    assert "datapackage.json" in err


# ---------------------------------------------------------------- no runs

@pytest.mark.parametrize("kind", [REPLICATION, API_PROFILES, CODECARBON_LOG], ids=lambda k: k.name)
def test_every_check_passes_skips_or_fails_cleanly_on_header_only_tables(kind, tmp_path, capsys):
    pkg = tmp_path / "pkg"
    write_package({name: TextTable(load_schema(name).field_names, []) for name in kind.tables},
                  pkg, TINY_META, kind=kind)
    assert main(["validate", str(pkg)]) == 0
    verb = "api-audit" if kind is API_PROFILES else "audit"
    assert main([verb, str(pkg)]) in (0, 1)
    _clean(capsys)


# ---------------------------------------------------------------- render

@pytest.fixture(scope="module")
def renderable(tmp_path_factory) -> Path:
    from deepgreen_audit.synth import generate

    result = generate(seed=99, repetitions=3, epochs=2, ecosystems=["python-pytorch", "cpp-libtorch",
                      "java-dl4j"], architectures=["resnet18"], datasets=["cifar100"])
    out = tmp_path_factory.mktemp("render") / "pkg"
    write_package(result.tables, out, result.meta)
    return out


def _damaged(renderable: Path, tmp_path: Path, table: str, edit) -> Path:
    pkg = tmp_path / "pkg"
    shutil.copytree(renderable, pkg)
    path = pkg / f"{table}.csv"
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    rehash(pkg)
    return pkg


def _first_cell(column: str, value: str):
    """An edit of a table's first data row: `column` reads `value`."""
    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        header = lines[0].rstrip("\n").split(",")
        cells = lines[1].rstrip("\n").split(",")
        cells[header.index(column)] = value
        lines[1] = ",".join(cells) + "\n"
        return "".join(lines)
    return edit


@pytest.mark.parametrize("value", ["2026-02-30T08:00:00Z", "2026-03-02T25:00:00Z"])
def test_render_names_an_impossible_datetime(value, renderable, tmp_path, capsys):
    pkg = _damaged(renderable, tmp_path, "runs", _first_cell("started_at_utc", value))
    assert main(["render", str(pkg), "--out", str(tmp_path / "out")]) == 2
    err = _clean(capsys)
    assert f"runs.csv, row 2, column 'started_at_utc': {value!r} is not a valid datetime" in err


def _every_row(column: str, value: str):
    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        j = lines[0].rstrip("\n").split(",").index(column)
        out = [lines[0]]
        for line in lines[1:]:
            cells = line.rstrip("\n").split(",")
            cells[j] = value
            out.append(",".join(cells) + "\n")
        return "".join(out)
    return edit


@pytest.mark.parametrize("column", ["codecarbon_energy_j", "energy_j"])
def test_render_overflow_is_one_line_without_a_numpy_warning(column, renderable, tmp_path, capsys):
    pkg = _damaged(renderable, tmp_path, "blocks", _every_row(column, "1e308"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["render", str(pkg), "--out", str(tmp_path / "out")]) == 2
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert _clean(capsys).count("\n") == 1


# ---------------------------------------------------------------- Ctrl-C

@pytest.mark.parametrize("entry", ["deepgreen_audit", "deepgreen_audit.cli"])
@pytest.mark.parametrize("verb, delay", [("validate", 0.12), ("audit", 0.12), ("audit", 0.25),
                                         ("audit", 0.4)])
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(entry, verb, delay):
    """SIGINT while the program imports its modules, validates, proves the round trip in its
    child or runs the checks, on the shipped package (`validate` takes a quarter of a second,
    the audit half a second).  Before the entry module's first line (the interpreter's own
    start-up) nothing of ours runs; the delays start after it.  No process of the audit
    outlives it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", entry, verb, str(ROOT / "datapackage.json")], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode in (0, 1) and not err.strip():  # done before the signal
        pytest.skip(f"{verb} finished within {delay} s, before the signal")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.count("\n") == 1 and "interrupted" in err
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("field, constraints, said", [
    ("rain_mm", {"maximum": ""}, "constraint maximum '' is not a number value"),
    ("rain_mm", {"minimum": [1]}, "constraint minimum [1] is not a number value"),
    ("rain_mm", {"maximum": "NAN"}, "constraint maximum 'NAN' is not a number value"),
    ("station", {"pattern": "("}, "constraint pattern '(' is not a regular expression")])
def test_a_foreign_constraint_frictionless_cannot_apply_is_a_finding(field, constraints, said,
                                                                     tmp_path, capsys):
    """frictionless raises on a bound its field type cannot read, or a pattern that does not
    compile; deepgreen reports it, naming the resource and field, and reads no row."""
    pkg = tmp_path / "rain"
    pkg.mkdir()
    (pkg / "rain.csv").write_text("station,rain_mm\noslo,2.5\n", encoding="utf-8")
    fields = [{"name": "station", "type": "string"}, {"name": "rain_mm", "type": "number"}]
    next(f for f in fields if f["name"] == field)["constraints"] = constraints
    (pkg / "datapackage.json").write_text(json.dumps({"name": "rainfall", "resources": [
        {"name": "rain", "path": "rain.csv", "schema": {"fields": fields}}]}), encoding="utf-8")
    assert main(["validate", str(pkg), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    found = [f for f in report["findings"] if f["id"] == "bad-constraint"]
    assert [(f["resource"], f["field"]) for f in found] == [("rain", field)]
    assert said in found[0]["message"]


@pytest.mark.parametrize("constraints, primary_key, finding", [
    ({"minimum": 1}, False, "constraint-error"), ({"enum": [1]}, False, "constraint-error"),
    ({}, True, "frictionless-error")])
def test_a_signalling_nan_cell_in_a_foreign_table_is_a_finding(constraints, primary_key, finding,
                                                                tmp_path, capsys):
    """frictionless reads "sNaN" as a Decimal that raises when compared or hashed: compared it
    breaks the constraint; hashed for a key, the package is reported not validated."""
    pkg = tmp_path / "rain"
    pkg.mkdir()
    (pkg / "rain.csv").write_text("station,rain_mm\noslo,sNaN\n", encoding="utf-8")
    schema: dict = {"fields": [{"name": "station", "type": "string"},
                               {"name": "rain_mm", "type": "number", "constraints": constraints}]}
    if primary_key:
        schema["primaryKey"] = ["rain_mm"]
    (pkg / "datapackage.json").write_text(json.dumps({"name": "rainfall", "resources": [
        {"name": "rain", "path": "rain.csv", "schema": schema}]}), encoding="utf-8")
    assert main(["validate", str(pkg), "--json"]) == 1
    assert finding in [f["id"] for f in json.loads(capsys.readouterr().out)["findings"]]
