"""The package format: canonical writing, validation, and every kind of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.package.canonical import format_value, is_canonical
from deepgreen_audit.package.checksums import sha256_file
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import load_schema, pandera_schema
from deepgreen_audit.package.validate import validate


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _codes(report) -> set[str]:
    return {f.id for f in report.findings}


def test_tiny_package_is_valid_and_sums_check(tiny_package):
    report = validate(tiny_package)
    assert report.valid, report.format_text()
    assert report.stats["blocks"]["rows"] == 8
    out = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tiny_package, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    desc = json.loads((tiny_package / "datapackage.json").read_text())
    for res in desc["resources"]:
        path = tiny_package / res["path"]
        assert res["bytes"] == path.stat().st_size
        assert res["hash"] == "sha256:" + sha256_file(path)
        assert res["schema"] == load_schema(res["name"]).descriptor


def test_upstream_frictionless_agrees_on_tiny_package(tiny_package):
    from frictionless import validate as fl_validate

    assert fl_validate(str(tiny_package / "datapackage.json")).valid


def test_canonical_cells():
    assert format_value(0.1 + 0.2, "number") == "0.30000000000000004"  # 17 significant digits
    assert format_value(1e-5, "number") == "1e-05"
    assert format_value(3, "number") == "3.0"
    assert format_value(None, "number") == ""
    assert format_value(True, "boolean") == "true"
    with pytest.raises(ValueError):
        format_value(float("nan"), "number")
    assert is_canonical("0.30000000000000004", "number")
    assert not is_canonical("0.3000000000000000444", "number")
    assert not is_canonical("1E-5", "number")
    assert is_canonical("2026-03-02T08:00:00.25Z", "datetime")
    assert not is_canonical("2026-03-02T08:00:00.250Z", "datetime")
    assert not is_canonical("2026-02-30T08:00:00Z", "datetime")


def test_typed_reader_keeps_17_digit_floats_empties_and_unicode(tiny_package):
    pkg = Package.open(tiny_package)
    blocks = pkg.table("blocks")
    assert blocks.schema.field("duration_s").type == "double"
    assert blocks.column("duration_s")[0].as_py() == 12.345678901234567
    assert blocks.column("test_accuracy")[0].as_py() is None
    env = pkg.table("environment")
    assert env.column("host")[0].as_py() == "hôte-Zürich"
    assert env.column("rapl_available").to_pylist() == [True, False]
    runs = pkg.table("runs")
    assert str(runs.schema.field("started_at_utc").type) == "timestamp[us, tz=UTC]"


def test_pandera_schema_is_derived_from_table_schema():
    schema = pandera_schema(load_schema("runs"))
    assert list(schema.columns) == load_schema("runs").field_names
    assert schema.columns["run_id"].unique and not schema.columns["run_id"].nullable


# ---------------------------------------------------------------- bad input


def _damage_csv(pkg: Path, table: str, edit) -> None:
    path = pkg / f"{table}.csv"
    path.write_bytes(edit(path.read_bytes()))


def _replace_cell(data: bytes, row: int, column: str, value: str) -> bytes:
    lines = data.decode().split("\n")
    header = lines[0].split(",")
    cells = lines[row - 1].split(",")
    cells[header.index(column)] = value
    lines[row - 1] = ",".join(cells)
    return "\n".join(lines).encode()


def _resign(pkg: Path) -> None:
    """Refresh SHA256SUMS and the descriptor hashes so that only the content error remains."""
    from deepgreen_audit.package.checksums import format_sums

    desc = json.loads((pkg / "datapackage.json").read_text())
    sums = {}
    for res in desc["resources"]:
        path = pkg / res["path"]
        if path.exists():
            res["bytes"] = path.stat().st_size
            res["hash"] = "sha256:" + sha256_file(path)
            sums[path.name] = sha256_file(path)
    (pkg / "datapackage.json").write_text(json.dumps(desc, indent=2))
    (pkg / "SHA256SUMS").write_text(format_sums(sums))


CASES = {
    "one-byte-changed": (lambda p: _damage_csv(p, "blocks", lambda d: d.replace(b"12.345678901234567", b"12.345678901234568", 1)), False,
                         "checksum-mismatch", "blocks", None),
    "missing-table": (lambda p: (p / "samples.csv").unlink(), False, "missing-table", "samples", None),
    "missing-column": (lambda p: _damage_csv(p, "runs", lambda d: d.replace(b"campaign,", b"", 1)), True,
                       "missing-column", "runs", "campaign"),
    "extra-column": (lambda p: _damage_csv(p, "environment", lambda d: b"\n".join(
        line + (b",x" if line else b"") for line in d.split(b"\n"))), True, "extra-column", "environment", "x"),
    "wrong-type": (lambda p: _damage_csv(p, "blocks", lambda d: _replace_cell(d, 3, "duration_s", "fast")), True,
                   "type-error", "blocks", "duration_s"),
    "duplicate-primary-key": (lambda p: _damage_csv(p, "samples", lambda d: _replace_cell(d, 3, "t_s", "0.0")), True,
                              "primary-key-error", "samples", None),
    "dangling-foreign-key": (lambda p: _damage_csv(p, "samples", lambda d: d.replace(
        b"r-torch.vgg16.cifar100.r1,2.0", b"r-torch.vgg16.cifar100.r9,2.0")), True, "foreign-key-error", "samples", "run_id"),
    "truncated-last-line": (lambda p: _damage_csv(p, "blocks", lambda d: d[:-20]), True, "truncated-row", "blocks", None),
    "enum-violation": (lambda p: _damage_csv(p, "runs", lambda d: d.replace(b"completed", b"finished", 1)), True,
                       "constraint-error", "runs", "status"),
    "range-violation": (lambda p: _damage_csv(p, "blocks", lambda d: _replace_cell(d, 3, "test_accuracy", "1.5")), True,
                        "constraint-error", "blocks", "test_accuracy"),
    "crlf": (lambda p: _damage_csv(p, "runs", lambda d: d.replace(b"\n", b"\r\n")), True, "line-ending", "runs", None),
    "non-canonical-float": (lambda p: _damage_csv(p, "blocks", lambda d: d.replace(b",2.5,", b",2.50,", 1)), True,
                            "non-canonical-cell", "blocks", "gpu_energy_j"),
    "path-escaping-run-id": (lambda p: _damage_csv(p, "runs", lambda d: d.replace(
        b"python-pytorch.resnet18.cifar100.r1,tiny", b"../../escape,tiny")), True, "constraint-error", "runs", "run_id"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_reported_and_left_untouched(case, tiny_package, tmp_path, capsys):
    damage, resign, code, resource, field = CASES[case]
    damage(tiny_package)
    if resign:
        _resign(tiny_package)
    before = _tree_bytes(tiny_package)
    report = validate(tiny_package)
    assert not report.valid
    hits = [f for f in report.findings if f.id == code and f.resource == resource]
    assert hits, report.format_text()
    if field:
        assert any(f.field == field for f in hits), report.format_text()
    assert main(["validate", str(tiny_package)]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert f"FAIL  {code}" in out.out
    assert _tree_bytes(tiny_package) == before


def test_checksum_mismatch_names_row_free_resource_and_json_output(tiny_package, capsys):
    CASES["one-byte-changed"][0](tiny_package)
    assert main(["validate", str(tiny_package), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["kind"] == "validate"
    assert {e["id"] for e in report["findings"]} >= {"checksum-mismatch", "hash-mismatch"}


def test_symlinked_table_is_refused(tiny_package, tmp_path):
    real = tiny_package / "elsewhere.csv"
    (tiny_package / "runs.csv").rename(real)
    (tiny_package / "runs.csv").symlink_to(real)
    assert "symlink" in _codes(validate(tiny_package))
    real.rename(tmp_path / "outside.csv")  # a link out of the folder is an unsafe path
    (tiny_package / "runs.csv").unlink()
    (tiny_package / "runs.csv").symlink_to(tmp_path / "outside.csv")
    assert "unsafe-path" in _codes(validate(tiny_package))


def test_unsafe_resource_path_is_refused(tiny_package):
    desc = json.loads((tiny_package / "datapackage.json").read_text())
    desc["resources"][0]["path"] = "../runs.csv"
    (tiny_package / "datapackage.json").write_text(json.dumps(desc))
    report = validate(tiny_package)
    assert "unsafe-path" in _codes(report)


def test_missing_descriptor_is_a_clear_error(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "missing-descriptor" in out and str(tmp_path) in out


def test_row_order_is_part_of_canonical_form(tiny_package):
    path = tiny_package / "samples.csv"
    lines = path.read_text().split("\n")
    lines[1], lines[2] = lines[2], lines[1]
    path.write_text("\n".join(lines))
    _resign(tiny_package)
    assert "row-order" in _codes(validate(tiny_package))


def test_every_verb_has_help():
    from deepgreen_audit.cli import build_parser

    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    for name, sub in verbs.items():
        text = sub.format_help()
        assert len(sub.description or "") > 40, name
        assert "usage: deepgreen " + name in text


def test_cli_runs_as_a_program(tiny_package):
    out = subprocess.run([sys.executable, "-m", "deepgreen_audit.cli", "validate", str(tiny_package)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "VALID" in out.stdout and "SYNTHETIC" in out.stdout
    assert "runs: 2" in out.stdout


def _break_cells(pkg: Path, table: str, edits: dict[tuple[int, str], str]) -> None:
    """Rewrite `table` with the cells at (row index, column) replaced: types stay valid."""
    from deepgreen_audit.package.tables import canonical_text, read_text

    text = read_text(pkg / f"{table}.csv")
    for (index, column), value in edits.items():
        text.rows[index][text.header.index(column)] = value
    (pkg / f"{table}.csv").write_text(canonical_text(text.header, text.rows), encoding="utf-8")


def test_validation_and_the_pandera_schema_find_the_same_constraint_breaks(tiny_package):
    """Two engines, one source: validation's vectorised constraints and the pandera schema
    derived from the same Table Schema flag exactly the same cells."""
    import pandera.errors

    edits = {(0, "duration_s"): "-1.5", (3, "phase"): "warmup", (5, "samples_processed"): "-4"}
    _break_cells(tiny_package, "blocks", edits)
    found = {(f.row, f.field) for f in validate(tiny_package).findings if f.id == "constraint-error"}
    assert found == {(index + 2, column) for index, column in edits}
    frame = Package.open(tiny_package).table("blocks").to_pandas()
    with pytest.raises(pandera.errors.SchemaErrors) as caught:
        pandera_schema(load_schema("blocks")).validate(frame, lazy=True)
    cases = caught.value.failure_cases
    assert {(int(i) + 2, c) for i, c in zip(cases["index"], cases["column"])} == found


def test_the_analysis_refuses_a_constraint_break_naming_row_and_column(tiny_package):
    from deepgreen_audit.analysis.data import typed_columns
    from deepgreen_audit.errors import UserError

    _break_cells(tiny_package, "blocks", {(2, "duration_s"): "-2.0"})
    with pytest.raises(UserError) as caught:
        typed_columns(Package.open(tiny_package), "blocks", ("run_id", "epoch", "phase", "duration_s"))
    assert (caught.value.row, caught.value.field, caught.value.code) == (4, "duration_s", "constraint-error")
