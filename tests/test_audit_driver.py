"""The audit driver, its report and the `audit` verb."""

from __future__ import annotations

import json

from deepgreen_audit.audit import audit
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.audit.docs import doc_path, to_markdown
from deepgreen_audit.cli import main
from deepgreen_audit.suite.registry import SUITES


def test_registry_entries_have_id_section_severity_and_docstring():
    registered = audit_checks()
    assert len({c.id for c in registered}) == len(registered) >= 30
    for c in registered:
        assert c.section in SUITES["audit"] and c.id.startswith(c.section + ".")
        assert c.severity in ("error", "warning") and len(c.doc) > 40
    assert {c.section for c in registered} == set(SUITES["audit"])


def test_checks_run_in_section_order_whichever_module_was_imported_first():
    # in a fresh process this registers the S6 checks before the S1-S5 ones
    import deepgreen_audit.audit.checks.replication  # noqa: F401

    sections = [c.section for c in audit_checks()]
    assert sections == sorted(sections, key=SUITES["audit"].index)


def test_docs_audit_md_is_generated_from_the_registry():
    assert doc_path().read_text(encoding="utf-8") == to_markdown()


def test_invalid_package_skips_every_check_and_does_not_finish(tiny_package, copy_of, tmp_path):
    broken = copy_of(tiny_package, tmp_path / "broken")
    (broken / "runs.csv").write_bytes((broken / "runs.csv").read_bytes() + b"x\n")
    report = audit(broken)
    assert report.finding("integrity.validate").status == "fail"
    assert {f.status for f in report.findings if f.id != "integrity.validate"} == {"skip"}
    assert not report.finished
    text = report.format_text()
    assert "did NOT finish" in text and text.splitlines()[-1].startswith("SYNTHETIC DATA")


def test_cli_json_strict_list(tiny_package, capsys, tmp_path):
    assert main(["audit", str(tiny_package), "--json"]) == 1  # a check fails: exit 1 (issue 24)
    data = json.loads(capsys.readouterr().out)
    assert data["synthetic"] is True and "SYNTHETIC" in data["notice"]
    for f in data["findings"]:
        assert set(f) >= {"id", "section", "status", "message", "rows_affected"}
        assert f["status"] in ("pass", "fail", "warn", "skip")
    assert sum(data["counts"].values()) == len(data["findings"])
    assert any(f["status"] == "fail" for f in data["findings"])  # the tiny package breaks S6
    assert main(["audit", str(tiny_package), "--strict", "--out", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("SYNTHETIC DATA")
    assert " pass, " in out and " skip" in out
    assert json.loads((tmp_path / "r.json").read_text())["counts"] == data["counts"]
    assert main(["audit", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(c.id in listed for c in audit_checks())


def test_cli_invalid_package_exits_1(tiny_package, copy_of, tmp_path, capsys):
    broken = copy_of(tiny_package, tmp_path / "broken")
    (broken / "blocks.csv").write_text("nonsense\n")
    assert main(["audit", str(broken)]) == 1
    assert "FAIL  integrity.validate" in capsys.readouterr().out


def test_tables_folder_described_from_above_is_audited(tmp_path):
    """`deepgreen audit replication/` finds the top-level descriptor of the shipped layout."""
    from conftest import TINY_META, tiny_tables
    from deepgreen_audit.package.writer import write_package

    write_package(tiny_tables(), tmp_path / "replication", TINY_META,
                  descriptor_path=tmp_path / "datapackage.json")
    report = audit(tmp_path / "replication")
    assert report.finding("integrity.validate").status == "pass"
    assert report.subject.endswith("datapackage.json") and report.synthetic


def test_the_program_proves_the_round_trip_beside_the_checks_with_the_same_report(tiny_package):
    """`deepgreen audit` (its own process) proves the round trip in a child process beside the
    other checks; its report is the one the library's in-process audit gives, finding for finding."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "deepgreen_audit", "audit", str(tiny_package),
                           "--json"], capture_output=True, text=True, cwd=root)
    program = json.loads(proc.stdout)
    library = json.loads(audit(tiny_package).to_json())
    assert [(f["id"], f["status"], f["message"]) for f in program["findings"]] == \
        [(f["id"], f["status"], f["message"]) for f in library["findings"]]
    trip = next(f for f in program["findings"] if f["id"] == "integrity.round-trip")
    assert trip["status"] == "pass" and trip["seconds"] > 0


# ------------------------------------------------------------------ the JSON report's evidence (issue 40)

#: A model under which four checks flag most of a campaign's runs: CodeCarbon 2.x, a modelled
#: CPU power, noisy block times and powers.
FLAGGING_MODEL = ('block_time_sigma = 0.6\nblock_power_sigma = 0.6\ncodecarbon_version = "2.8.0"\n'
                  'codecarbon_cpu_method = "tdp-constant"\n')
#: The JSON report of a package ten times the first campaign's size stays under this; uncapped,
#: its evidence made it 390 KB, and it grew with the package.
TEN_TIMES_JSON_BYTES = 150_000


def test_the_json_report_of_a_ten_times_package_is_capped_and_its_csvs_hold_every_row(tmp_path, capsys):
    """504 runs (10x the first campaign's 48): each finding's JSON evidence is its first
    JSON_EVIDENCE_ROWS rows with the total, and names the CSV that --evidence wrote with all."""
    import csv

    from deepgreen_audit.report import JSON_EVIDENCE_ROWS

    model = tmp_path / "model.toml"
    model.write_text(FLAGGING_MODEL)
    pkg = tmp_path / "ten"
    assert main(["synth", "--out", str(pkg), "--repetitions", "12", "--epochs", "2", "--model", str(model)]) == 0
    capsys.readouterr()
    assert main(["audit", str(pkg), "--json", "--evidence", str(tmp_path / "evidence"),
                 "--out", str(tmp_path / "report.json")]) == 1
    printed = capsys.readouterr().out
    assert len(printed.encode("utf-8")) < TEN_TIMES_JSON_BYTES
    assert (tmp_path / "report.json").read_text(encoding="utf-8") == printed
    findings = [f for f in json.loads(printed)["findings"] if (f["details"] or {}).get("evidence")]
    capped = [f for f in findings if f["details"]["evidence_total"] > JSON_EVIDENCE_ROWS]
    assert len(capped) >= 3 and sum(f["details"]["evidence_total"] for f in capped) > 1_000
    for f in findings:
        details = f["details"]
        assert details["evidence_shown"] == len(details["evidence"]) == min(
            details["evidence_total"], JSON_EVIDENCE_ROWS), f["id"]
        assert details["evidence_csv"] == str(tmp_path / "evidence" / f"{f['id']}-evidence.csv")
        with open(details["evidence_csv"], encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == details["evidence_total"], f["id"]
        first = details["evidence"][0]
        assert {k: rows[0][k] for k in first if isinstance(first[k], str)} == \
            {k: v for k, v in first.items() if isinstance(v, str)}, f["id"]
    # without --evidence the JSON says no CSV was written; a folder that holds files is refused
    # before the audit, unless --overwrite
    assert main(["audit", str(pkg), "--json", "--select", "S5.codecarbon-version"]) == 1
    details = json.loads(capsys.readouterr().out)["findings"][-1]["details"]
    assert details["evidence_csv"] is None and details["evidence_total"] == 504
    assert main(["audit", str(pkg), "--select", "S5", "--evidence", str(tmp_path / "evidence")]) == 2
    assert "holds files already" in capsys.readouterr().err
    assert main(["audit", str(pkg), "--select", "S5", "--evidence", str(tmp_path / "evidence"),
                 "--overwrite"]) == 1
