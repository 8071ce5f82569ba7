"""API-level audit checks on small hand-made rows: each fires where it should, only there."""

from __future__ import annotations

from deepgreen_audit.greenlight.checks import api_checks, run_checks
from deepgreen_audit.package.schema import load_schema


def row(position, start_s, end_s, **values):
    r = {f.name: None for f in load_schema("api_calls").fields}
    r.update({"call_id": f"c{position}", "source": "fecom", "experiment_kind": "method-level",
              "project": "p", "experiment": 1, "position": position, "api_call": f"f{position}()",
              "start_time_execution_ns": int(start_s * 1e9), "end_time_execution_ns": int(end_s * 1e9),
              "execution_time_s": end_s - start_s, "measurement_interval_s": 0.5,
              "wait_per_stable_check_loop_s": 20, "cpu_std_to_mean": 0.03, "ram_std_to_mean": 0.03,
              "gpu_std_to_mean": 0.01, "sys_start_time_perf_ns": 0, "end_time_perf_s": end_s})
    for d in ("cpu", "ram", "gpu"):
        r.update({f"{d}_baseline_samples": 40, f"{d}_baseline_std_to_mean": 0.001,
                  f"{d}_total_j": 10.0, f"{d}_total_normalised_j": 1.0, f"{d}_lag_time_s": 0.0})
    r.update(values)
    return r


def ids(report, check):
    details = report.finding(check).details or {}
    return [e["call_id"] for e in details.get("evidence", [])]


def test_clean_rows_give_no_findings():
    report = run_checks([row(0, 0, 2), row(1, 40, 42)], "pkg")
    assert [f.id for f in report.findings] == [c.id for c in api_checks()]
    assert {f.status for f in report.findings} == {"pass"} and report.valid


def test_each_check_fires_on_its_defect():
    calls = [row(0, 0, 2, cpu_lag_time_s=50.0),                # lag runs into c1 (starts at 40)
             row(1, 40, 40.1, energy_missing_reason="no sample"),  # shorter than 0.5 s
             row(2, 60, 70, gpu_baseline_std_to_mean=0.2, ram_baseline_samples=12),
             row(3, 80, 90, ram_total_normalised_j=-0.5),
             row(4, 85, 86)]                                   # inside c3's window
    report = run_checks(calls, "pkg")
    assert ids(report, "S5.api-lag-overlaps-next-call") == ["c0"]
    assert ids(report, "S5.api-call-shorter-than-interval") == ["c1"]
    assert ids(report, "S5.api-baseline-unstable") == ["c2", "c2"]
    assert ids(report, "S5.api-negative-normalised-energy") == ["c3"]
    assert ids(report, "S5.api-calls-overlap") == ["c4"]
    assert {f.status for f in report.findings} == {"warn"} and report.valid
    assert report.finding("S5.api-baseline-unstable").rows_affected == 1
    assert "WARN  S5.api-lag-overlaps-next-call" in report.format_text()


def test_checks_are_documented():
    for check in api_checks():
        assert check.doc and check.section == "S5" and check.severity == "warning"


def test_api_audit_json_caps_evidence_and_evidence_dir_holds_every_row(tmp_path, capsys):
    """FECoM's shared records: a finding with more rows than the JSON carries names the CSV
    --evidence wrote, which holds them all (issue 40)."""
    import csv
    import json

    from conftest import shared_data
    from deepgreen_audit.cli import main
    from deepgreen_audit.report import JSON_EVIDENCE_ROWS

    assert main(["import", "greenlight", str(shared_data("greenlight")), "--out", str(tmp_path / "api")]) == 0
    capsys.readouterr()
    assert main(["api-audit", str(tmp_path / "api"), "--json", "--evidence", str(tmp_path / "ev")]) == 0
    findings = [f for f in json.loads(capsys.readouterr().out)["findings"] if (f["details"] or {}).get("evidence")]
    capped = [f for f in findings if f["details"]["evidence_total"] > JSON_EVIDENCE_ROWS]
    assert capped, [f["details"]["evidence_total"] for f in findings]
    for f in findings:
        assert len(f["details"]["evidence"]) == min(f["details"]["evidence_total"], JSON_EVIDENCE_ROWS)
        with open(f["details"]["evidence_csv"], encoding="utf-8", newline="") as handle:
            assert len(list(csv.DictReader(handle))) == f["details"]["evidence_total"], f["id"]
    assert main(["api-audit", str(tmp_path / "api"), "--evidence", str(tmp_path / "ev")]) == 2
    assert "holds files already" in capsys.readouterr().err
