"""Issue 16: no traceback for any user input, and what validate passes every verb can read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.errors import BUG_EXIT
from deepgreen_audit.package.validate import validate
from deepgreen_audit.suite.registry import Check, run_check
from package_edits import rehash

RUN1 = "python-pytorch.resnet18.cifar100.r1"
RUN2 = "r-torch.vgg16.cifar100.r1"


def _edit(pkg: Path, table: str, edit) -> None:
    path = pkg / f"{table}.csv"
    path.write_bytes(edit(path.read_bytes()))
    rehash(pkg)


def _drop_rows(table: str, run_id: str):
    def edit(pkg):
        _edit(pkg, table, lambda data: b"".join(
            line for line in data.splitlines(keepends=True) if not line.startswith(run_id.encode())))
    return edit


def _symlinked_tables_folder(pkg: Path) -> None:
    """The descriptor's tables lie in a folder that is a symbolic link to elsewhere."""
    outside = pkg.parent / "elsewhere"
    outside.mkdir()
    for name in ("runs", "blocks", "samples", "environment"):
        os.rename(pkg / f"{name}.csv", outside / f"{name}.csv")
    os.symlink(outside, pkg / "tables")
    desc = json.loads((pkg / "datapackage.json").read_text())
    for res in desc["resources"]:
        res["path"] = "tables/" + res["path"]
    (pkg / "datapackage.json").write_text(json.dumps(desc))


CASES = {
    "zero-byte table": (lambda p: _edit(p, "samples", lambda d: b""), "empty-table"),
    "byte-order mark (quoted table)": (lambda p: _edit(p, "runs", lambda d: b"\xef\xbb\xbf" + d),
                                       "byte-order-mark"),
    "byte-order mark (plain table)": (lambda p: _edit(p, "blocks", lambda d: b"\xef\xbb\xbf" + d),
                                      "byte-order-mark"),
    "integer beyond int64": (lambda p: _edit(p, "runs", lambda d: d.replace(
        b",4242,", b",99999999999999999999,")), "type-error"),
    "non-UTF-8 SHA256SUMS": (lambda p: (p / "SHA256SUMS").write_bytes(b"\xff\xfe not text\n"),
                             "checksum-format"),
    "run without its environment row": (_drop_rows("environment", RUN2), "incomplete-run"),
    "run without its blocks": (_drop_rows("blocks", RUN2), "incomplete-run"),
    "block without its run": (lambda p: (_drop_rows("runs", RUN2)(p),
                                         _drop_rows("environment", RUN2)(p),
                                         _drop_rows("samples", RUN2)(p)), "foreign-key-error"),
    "trailing newline through a pattern": (lambda p: _edit(p, "runs", lambda d: d.replace(
        b"ab" * 32 + b",,", b'"' + b"ab" * 32 + b'\n",,', 1)), "constraint-error"),
    "implausible date": (lambda p: _edit(p, "runs", lambda d: d.replace(
        b"2026-03-02T08:00:00Z", b"0001-03-02T08:00:00Z", 1)), "constraint-error"),
    "symlinked tables folder": (_symlinked_tables_folder, "unsafe-path"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damage_is_reported_by_validate_and_refused_by_every_verb(case, tiny_package, tmp_path, capsys):
    damage, code = CASES[case]
    damage(tiny_package)
    report = validate(tiny_package)
    assert code in [f.id for f in report.findings], report.format_text()
    assert main(["validate", str(tiny_package)]) == 1
    for argv, status in ((["audit", str(tiny_package), "--strict"], 1),
                         (["restore", str(tiny_package), "--out", str(tmp_path / "runs")], 2),
                         (["export", str(tiny_package), "--parquet", "--out", str(tmp_path / "pq")], 2)):
        assert main(argv) == status, argv
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "runs").exists() and not (tmp_path / "pq").exists()


def test_an_implausible_date_names_its_row_and_field(tiny_package):
    CASES["implausible date"][0](tiny_package)
    finding = next(f for f in validate(tiny_package).findings if f.id == "constraint-error")
    assert (finding.resource, finding.row, finding.field) == ("runs", 2, "started_at_utc")
    assert "not a plausible date" in finding.message


def test_a_crashing_check_fails_the_audit_never_passes_or_skips():
    def broken(ctx):
        """A check with a bug."""
        return {}["missing"]

    for severity in ("error", "warning"):
        finding = run_check(Check("S6.broken", "audit", "S6", severity, None, broken), ctx=None)
        assert finding.status == "fail", severity
        assert "KeyError" in finding.message and "report this as a bug" in finding.message


def test_an_internal_error_is_one_line_with_its_own_exit_status(tiny_package, monkeypatch, capsys):
    from deepgreen_audit.package import validate as validate_module

    def bug(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(validate_module, "validate", bug)
    monkeypatch.delenv("DEEPGREEN_TRACEBACK", raising=False)
    assert main(["validate", str(tiny_package)]) == BUG_EXIT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "internal error: ZeroDivisionError" in err and "this is a bug in deepgreen" in err


# ---------------------------------------------------------------- found by fuzzing and probing


def test_a_descriptor_with_a_lone_surrogate_escape_is_a_descriptor_error(tiny_package, tmp_path):
    desc = json.loads((tiny_package / "datapackage.json").read_text())
    desc["title"] = "\udcff"
    (tiny_package / "datapackage.json").write_text(json.dumps(desc))  # ASCII: "\udcff" escaped
    assert [f.id for f in validate(tiny_package).findings] == ["descriptor-error"]
    assert main(["restore", str(tiny_package), "--out", str(tmp_path / "runs")]) == 2


@pytest.mark.parametrize("content", ['["not", "an", "object"]', '"\\udcff"'])
def test_package_metadata_of_a_run_tree_must_be_a_json_object_of_text(content, tiny_package, tmp_path,
                                                                     capsys):
    tree = tmp_path / "tree"
    assert main(["restore", str(tiny_package), "--out", str(tree)]) == 0
    (tree / "package.json").write_text(content)
    assert main(["flatten", str(tree), "--out", str(tmp_path / "pkg")]) == 2
    assert "package.json" in capsys.readouterr().err


def test_a_plan_that_is_not_utf8_is_a_user_error(tmp_path, capsys):
    (tmp_path / "plan.toml").write_bytes(b"\xff\xfe")
    assert main(["plan", "--plan", str(tmp_path / "plan.toml")]) == 2
    assert "is not UTF-8" in capsys.readouterr().err


def test_a_legacy_log_without_its_label_columns_is_a_user_error(tmp_path):
    from deepgreen_audit.errors import UserError
    from deepgreen_audit.importers.legacy import R32, read_rows

    (tmp_path / "log.csv").write_text(",".join(R32) + ",language\n" + ",".join("1" * len(R32)) + ",Python\n")
    with pytest.raises(UserError, match="lacks the label column"):
        read_rows(tmp_path, "log.csv")
