"""Every kind of package: the descriptor declares it, and each verb reads it or says it does not apply.

The API-level package is imported from one Greenlight project of ../shared/greenlight
(read, never copied); the foreign package is a small Frictionless data package written here.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import shared_data
from deepgreen_audit.cli import main
from deepgreen_audit.greenlight.importer import import_greenlight
from deepgreen_audit.package.dispatch import validate_package
from deepgreen_audit.package.kinds import KIND_KEY
from package_edits import rehash

PROJECT = ("greenlight", "SMART-Dal_greenlight", "dataset", "tensorflow_docs", "1_Graph_and_Session")


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kinds") / "api"
    import_greenlight(shared_data(*PROJECT), out)
    return out


@pytest.fixture
def api_package(imported, tmp_path) -> Path:
    """A copy of the imported package, free to damage."""
    return Path(shutil.copytree(imported, tmp_path / "api"))


def _descriptor(pkg: Path) -> dict:
    return json.loads((pkg / "datapackage.json").read_text())


def _set_cell(pkg: Path, table: str, row: int, field: str, text: str) -> None:
    """Write `text` into one cell (row numbered as in reports: the header is row 1)."""
    path = pkg / f"{table}.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    rows[row - 1][rows[0].index(field)] = text
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")


def _line_with(text: str, *parts: str) -> bool:
    """Some line of the printed report holds every part (ids are padded to one width)."""
    return any(all(part in line for part in parts) for line in text.splitlines())


def _where(report, code: str) -> list[tuple]:
    return [(f.resource, f.row, f.field) for f in report.findings if f.id == code]


# ---------------------------------------------------------------- the kind is declared


def test_every_writer_declares_its_kind(tiny_package, api_package):
    assert _descriptor(tiny_package)[KIND_KEY] == "replication"
    assert _descriptor(api_package)[KIND_KEY] == "api-profiles"
    shipped = json.loads((Path(__file__).resolve().parents[1] / "datapackage.json").read_text())
    assert shipped[KIND_KEY] == "replication"


def test_a_descriptor_written_before_the_kind_key_is_a_replication_package(tiny_package):
    desc = _descriptor(tiny_package)
    del desc[KIND_KEY]
    (tiny_package / "datapackage.json").write_text(json.dumps(desc))
    report = validate_package(tiny_package)
    assert report.valid, report.format_text()
    assert report.stats["kind"] == "replication"


def test_an_unknown_kind_is_named(tiny_package, tmp_path, capsys):
    desc = _descriptor(tiny_package)
    desc[KIND_KEY] = "weather-station"
    (tiny_package / "datapackage.json").write_text(json.dumps(desc))
    assert [f.id for f in validate_package(tiny_package).findings] == ["unknown-kind"]
    assert main(["validate", str(tiny_package)]) == 1
    assert main(["restore", str(tiny_package), "--out", str(tmp_path / "runs")]) == 2
    captured = capsys.readouterr()
    assert "'weather-station'" in captured.err and "Traceback" not in captured.err + captured.out


# ---------------------------------------------------------------- the API-level package


def test_validate_passes_on_an_imported_greenlight_package(api_package, capsys):
    assert main(["validate", str(api_package)]) == 0
    out = capsys.readouterr().out
    assert "VALID" in out and "api_calls: 5" in out and "api_samples: 3,490" in out
    assert "kind: api-profiles" in out
    assert main(["validate", str(api_package), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["kind"] == "api-profiles" and stats["tables"] == ["api_calls", "api_samples"]


@pytest.mark.parametrize("table, field, text, code", [
    ("api_calls", "execution_time_s", "soon", "type-error"),
    ("api_calls", "execution_time_s", "-1.0", "constraint-error"),
    ("api_samples", "series", "disk", "constraint-error"),
    ("api_samples", "sample", "1.5", "type-error"),
])
def test_a_broken_cell_with_consistent_checksums_names_resource_row_and_field(
        api_package, capsys, table, field, text, code):
    _set_cell(api_package, table, 3, field, text)
    rehash(api_package)
    report = validate_package(api_package)
    assert not report.valid
    assert (table, 3, field) in _where(report, code), report.format_text()
    assert not _where(report, "checksum-mismatch")
    assert main(["validate", str(api_package)]) == 1
    assert _line_with(capsys.readouterr().out, "FAIL", code, f"{table}, row 3, field '{field}'")


def test_a_checksum_break_names_the_resource(api_package, capsys):
    _set_cell(api_package, "api_samples", 2, "energy_j", "39.3")  # a valid value, another file
    report = validate_package(api_package)
    assert {f.id for f in report.findings} == {"checksum-mismatch", "hash-mismatch"}
    assert {f.resource for f in report.findings} == {"api_samples"}
    assert main(["validate", str(api_package)]) == 1
    assert _line_with(capsys.readouterr().out, "FAIL", "checksum-mismatch", "api_samples")


def test_verbs_that_need_runs_refuse_an_api_package_and_name_the_verb_to_use(api_package, tmp_path,
                                                                            capsys):
    assert main(["audit", str(api_package)]) == 2
    err = capsys.readouterr().err
    assert "is an API-level package" in err and "use 'deepgreen api-audit'" in err
    for argv in (["restore", str(api_package), "--out", str(tmp_path / "runs")],
                 ["render", str(api_package), "--out", str(tmp_path / "generated")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "it reads a replication package only" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "generated").exists()


def test_api_audit_refuses_a_replication_package(tiny_package, capsys):
    assert main(["api-audit", str(tiny_package)]) == 2
    assert "use 'deepgreen audit'" in capsys.readouterr().err


def test_export_writes_the_tables_of_its_kind(api_package, tmp_path):
    assert main(["export", str(api_package), "--parquet", "--out", str(tmp_path / "pq")]) == 0
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == ["api_calls.parquet",
                                                                   "api_samples.parquet"]
    assert pq.read_table(tmp_path / "pq" / "api_samples.parquet").num_rows == 3490


def test_upstream_frictionless_accepts_the_api_package(api_package):
    from frictionless import validate as fl_validate

    assert fl_validate(str(api_package / "datapackage.json")).valid


# ---------------------------------------------------------------- a foreign Frictionless package

FOREIGN_SCHEMA = {"fields": [
    {"name": "station", "type": "string", "constraints": {"required": True}},
    {"name": "day", "type": "date"},
    {"name": "rain_mm", "type": "number", "constraints": {"minimum": 0}},
], "primaryKey": ["station", "day"]}


def _foreign_package(folder: Path, rows: str, **resource) -> Path:
    folder.mkdir()
    (folder / "rain.csv").write_text("station,day,rain_mm\n" + rows, encoding="utf-8")
    descriptor = {"name": "rainfall", "resources": [
        {"name": "rain", "path": "rain.csv", "schema": FOREIGN_SCHEMA, **resource}]}
    (folder / "datapackage.json").write_text(json.dumps(descriptor), encoding="utf-8")
    return folder


def test_a_foreign_package_is_validated_by_frictionless(tmp_path, capsys):
    pkg = _foreign_package(tmp_path / "rain", "oslo,2024-01-01,2.5\noslo,2024-01-02,0\n")
    report = validate_package(pkg)
    assert report.valid, report.format_text()
    assert report.stats["kind"] == "foreign" and report.stats["rain"]["rows"] == 2
    assert main(["validate", str(pkg)]) == 0
    out = capsys.readouterr().out
    assert "rain: 2" in out and "checked by frictionless" in out


def test_a_broken_foreign_package_fails_with_row_and_field(tmp_path, capsys):
    pkg = _foreign_package(tmp_path / "rain", "oslo,2024-01-01,2.5\noslo,2024-01-02,-3\n"
                                              "oslo,yesterday,1\n")
    report = validate_package(pkg)
    assert ("rain", 3, "rain_mm") in _where(report, "constraint-error"), report.format_text()
    assert ("rain", 4, "day") in _where(report, "type-error"), report.format_text()
    assert main(["validate", str(pkg)]) == 1
    assert _line_with(capsys.readouterr().out, "FAIL", "type-error", "rain, row 4, field 'day'")


def test_a_foreign_package_stays_on_this_machine_and_in_its_folder(tmp_path):
    remote = _foreign_package(tmp_path / "remote", "", path="https://example.org/rain.csv")
    assert _where(validate_package(remote), "unsafe-path") == [("rain", None, None)]
    outside = _foreign_package(tmp_path / "outside", "", path="../rain.csv")
    assert _where(validate_package(outside), "unsafe-path") == [("rain", None, None)]
    schema = _foreign_package(tmp_path / "schema", "", schema="https://example.org/rain.json")
    assert _where(validate_package(schema), "unsafe-path") == [("rain", None, None)]


def test_a_foreign_package_without_resources_is_not_valid(tmp_path):
    (tmp_path / "datapackage.json").write_text(json.dumps({"name": "empty", "resources": []}))
    assert [f.id for f in validate_package(tmp_path).findings] == ["descriptor-error"]


def test_export_and_audit_refuse_a_foreign_package(tmp_path, capsys):
    pkg = _foreign_package(tmp_path / "rain", "oslo,2024-01-01,2.5\n")
    assert main(["export", str(pkg), "--parquet", "--out", str(tmp_path / "pq")]) == 2
    assert main(["audit", str(pkg)]) == 2
    err = capsys.readouterr().err
    assert err.count("is a Frictionless data package not written by deepgreen") == 2


def test_validating_a_package_of_ours_does_not_import_frictionless(tiny_package):
    code = ("import sys; from deepgreen_audit.package.dispatch import validate_package; "
            f"assert validate_package({str(tiny_package)!r}).valid; "
            "assert 'frictionless' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
