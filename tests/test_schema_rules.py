"""Every rule of the package format enforced: the Table Schema's constraint keywords,
canonical cells (keys included), a strict SHA256SUMS, one resource per name, and row
numbers that stay the CSV's own line numbers after a row with the wrong cell count.

Each case plants one fault in a copy of the shipped package (`replication/` and the
root `datapackage.json`), rehashes it so that only the fault is left to find, and asserts
exit status 1 from `deepgreen validate` and the finding's code, row and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.package.schema import Field, schema_dir
from deepgreen_audit.package.validate import ENFORCED_CONSTRAINTS, _constraint_failures
from package_edits import rehash

ROOT = Path(__file__).resolve().parents[1]
SUMS_HEX = "ab" * 32


def test_the_validator_enforces_every_constraint_keyword_the_schemas_use():
    """A schema that gains a keyword the validator does not check fails here, not silently."""
    used = {keyword for path in schema_dir().glob("*.json")
            for field in json.loads(path.read_text(encoding="utf-8"))["fields"]
            for keyword in field.get("constraints", {})}
    assert used, "no constraints found: the scan is broken"
    assert used <= ENFORCED_CONSTRAINTS, f"not enforced: {sorted(used - ENFORCED_CONSTRAINTS)}"


def _shipped_copy(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "replication", pkg / "replication")
    shutil.copy(ROOT / "datapackage.json", pkg / "datapackage.json")
    return pkg


def _lines(pkg: Path, table: str) -> list[str]:
    return (pkg / "replication" / f"{table}.csv").read_text(encoding="utf-8").split("\n")


def _write_lines(pkg: Path, table: str, lines: list[str]) -> None:
    (pkg / "replication" / f"{table}.csv").write_text("\n".join(lines), encoding="utf-8")


def _set_cell(pkg: Path, table: str, line: int, column: str, value: str) -> None:
    """Put `value` in `column` of the CSV's physical line `line` (the header is line 1)."""
    lines = _lines(pkg, table)
    cells = lines[line - 1].split(",")
    cells[lines[0].split(",").index(column)] = value
    lines[line - 1] = ",".join(cells)
    _write_lines(pkg, table, lines)


def _findings(pkg: Path, capsys) -> list[dict]:
    """The findings of `deepgreen validate --json PKG`, which must exit 1."""
    capsys.readouterr()
    assert main(["validate", "--json", str(pkg)]) == 1
    return json.loads(capsys.readouterr().out)["findings"]


def _assert_found(findings, code, resource=None, row=None, field=None) -> None:
    hits = [f for f in findings if f["id"] == code and f["resource"] == resource
            and f["row"] == row and f["field"] == field]
    assert hits, f"no {code} at {resource} row {row} field {field}: {findings}"


# -- constraint keywords --------------------------------------------------------------

def test_a_negative_ram_total_breaks_exclusive_minimum(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "environment", 2, "ram_total_gb", "-512.0")
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "constraint-error", "environment", 2, "ram_total_gb")


def test_a_zero_ram_total_breaks_exclusive_minimum(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "environment", 3, "ram_total_gb", "0.0")
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "constraint-error", "environment", 3, "ram_total_gb")


def test_a_utilization_above_its_maximum_is_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "samples", 4, "gpu_utilization_pct", "100.5")
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "constraint-error", "samples", 4, "gpu_utilization_pct")


def test_a_run_id_breaking_its_pattern_is_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "runs", 2, "campaign", "bad campaign")
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "constraint-error", "runs", 2, "campaign")


def test_length_constraints_are_enforced():
    """No shipped schema uses minLength or maxLength yet; the validator checks them anyway."""
    field = Field(name="host", type="string", description="", min_length=2, max_length=3)
    column = pa.array(["a", "ab", "abcd", None])
    failures = list(_constraint_failures(field, column, np.zeros(4, dtype=bool)))
    assert [(code, index) for code, index, _ in failures] == [("constraint-error", 0),
                                                              ("constraint-error", 2)]


# -- canonical cells, keys included ---------------------------------------------------

def test_minus_zero_beside_zero_is_not_a_second_sample_key(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "samples", 2, "t_s", "0.0")        # a run's first sample, at its start
    lines = _lines(pkg, "samples")
    column = lines[0].split(",").index("t_s")
    cells = lines[1].split(",")
    cells[column] = "-0.0"
    lines.insert(2, ",".join(cells))
    _write_lines(pkg, "samples", lines)
    rehash(pkg)
    findings = _findings(pkg, capsys)
    _assert_found(findings, "non-canonical-cell", "samples", 3, "t_s")


@pytest.mark.parametrize("spelling", ["+1", "01"])
def test_a_non_canonical_integer_key_is_refused(spelling, tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "blocks", 2, "epoch", spelling)
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "non-canonical-cell", "blocks", 2, "epoch")


@pytest.mark.parametrize("spelling", ["-0", "+0"])
def test_a_signed_integer_zero_is_not_canonical(spelling, tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "blocks", 3, "samples_processed", spelling)
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "non-canonical-cell", "blocks", 3, "samples_processed")


@pytest.mark.parametrize("spelling", ["1e3", "+1000.0", "1000.00"])
def test_other_spellings_of_a_number_are_not_canonical(spelling, tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "samples", 3, "gpu_memory_used_mib", spelling)
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "non-canonical-cell", "samples", 3, "gpu_memory_used_mib")


@pytest.mark.parametrize("spelling", ["2026-03-02T17:12:28.267780Z", "2026-03-02T18:12:28.26778+01:00"])
def test_another_spelling_of_a_time_is_not_canonical(spelling, tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "blocks", 2, "started_at_utc", spelling)
    rehash(pkg)
    findings = _findings(pkg, capsys)
    _assert_found(findings, "non-canonical-cell", "blocks", 2, "started_at_utc")
    assert "'2026-03-02T17:12:28.26778Z'" in next(f["message"] for f in findings
                                                   if f["id"] == "non-canonical-cell")


@pytest.mark.parametrize("spelling", ["True", "1"])
def test_another_spelling_of_a_boolean_is_not_canonical(spelling, tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "environment", 2, "cudnn_available", spelling)
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "non-canonical-cell", "environment", 2, "cudnn_available")


# -- SHA256SUMS -----------------------------------------------------------------------

def _sums(pkg: Path) -> Path:
    return pkg / "replication" / "SHA256SUMS"


def test_a_duplicate_sums_line_is_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    text = _sums(pkg).read_text()
    _sums(pkg).write_text(text + text.splitlines(keepends=True)[1])
    _assert_found(_findings(pkg, capsys), "checksum-duplicate", "SHA256SUMS", 5)


def test_contradictory_sums_lines_are_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _sums(pkg).write_text(_sums(pkg).read_text() + f"{SUMS_HEX}  runs.csv\n")
    _assert_found(_findings(pkg, capsys), "checksum-conflict", "SHA256SUMS", 5)


def test_a_sums_line_naming_no_file_is_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _sums(pkg).write_text(f"{SUMS_HEX}  ghost.csv\n" + _sums(pkg).read_text())
    _assert_found(_findings(pkg, capsys), "checksum-extra", "SHA256SUMS", 1)


def test_a_table_missing_from_sums_is_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    lines = _sums(pkg).read_text().splitlines(keepends=True)
    _sums(pkg).write_text("".join(line for line in lines if not line.endswith(" samples.csv\n")))
    _assert_found(_findings(pkg, capsys), "checksum-missing", "samples")


def test_every_sums_line_is_checked_after_a_malformed_one(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _sums(pkg).write_text("not a line\n" + _sums(pkg).read_text() + f"{SUMS_HEX}  ghost.csv\n")
    findings = _findings(pkg, capsys)
    _assert_found(findings, "checksum-format", "SHA256SUMS", 1)
    _assert_found(findings, "checksum-extra", "SHA256SUMS", 6)


# -- resource names -------------------------------------------------------------------

def _edit_descriptor(pkg: Path, edit) -> None:
    path = pkg / "datapackage.json"
    descriptor = json.loads(path.read_text())
    edit(descriptor["resources"])
    path.write_text(json.dumps(descriptor))


def test_two_resources_named_runs_are_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _edit_descriptor(pkg, lambda resources: resources.append(dict(resources[0])))
    _assert_found(_findings(pkg, capsys), "duplicate-resource", "runs")


def test_two_resources_sharing_another_name_are_refused(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    extra = {"name": "truth", "path": "replication/synth-truth.json"}
    _edit_descriptor(pkg, lambda resources: resources.extend([extra, dict(extra)]))
    _assert_found(_findings(pkg, capsys), "duplicate-resource", "truth")


def test_two_resources_of_one_name_in_a_foreign_package_are_refused(tmp_path, capsys):
    """The second would escape every check made on the first (its path included)."""
    pkg = tmp_path / "foreign"
    pkg.mkdir()
    (pkg / "t.csv").write_text("a\n1\n")
    resource = {"name": "t", "path": "t.csv", "schema": {"fields": [{"name": "a", "type": "integer"}]}}
    (pkg / "datapackage.json").write_text(json.dumps({"name": "f", "resources": [
        resource, dict(resource, path="../outside.csv")]}))
    findings = _findings(pkg, capsys)
    assert [f["id"] for f in findings] == ["duplicate-resource"]


# -- row numbers ----------------------------------------------------------------------

def test_rows_after_a_too_long_row_keep_their_line_numbers(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "blocks", 5, "test_accuracy", "1.5")
    lines = _lines(pkg, "blocks")
    lines[2] += ",extra"
    _write_lines(pkg, "blocks", lines)
    rehash(pkg)
    findings = _findings(pkg, capsys)
    _assert_found(findings, "field-count", "blocks", 3)
    _assert_found(findings, "constraint-error", "blocks", 5, "test_accuracy")


def test_rows_after_a_too_short_row_keep_their_line_numbers(tmp_path, capsys):
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "samples", 6, "cpu_utilization_pct", "-1.0")
    lines = _lines(pkg, "samples")
    lines[1] = lines[1].rsplit(",", 1)[0]
    _write_lines(pkg, "samples", lines)
    rehash(pkg)
    findings = _findings(pkg, capsys)
    _assert_found(findings, "field-count", "samples", 2)
    _assert_found(findings, "constraint-error", "samples", 6, "cpu_utilization_pct")


def test_a_quoted_line_break_counts_as_a_line(tmp_path, capsys):
    """A row's number is the CSV line it starts on, also after a cell holding a line break."""
    pkg = _shipped_copy(tmp_path)
    _set_cell(pkg, "environment", 2, "missing_reason", '"two\nlines"')
    _set_cell(pkg, "environment", 4, "ram_total_gb", "-1.0")
    rehash(pkg)
    _assert_found(_findings(pkg, capsys), "constraint-error", "environment", 4, "ram_total_gb")


def test_the_shipped_package_and_the_first_campaign_still_validate(capsys):
    assert main(["validate", str(ROOT)]) == 0
    assert main(["validate", str(ROOT / "examples" / "first-campaign")]) == 0
