"""Exit codes that mean what CI expects (issue 24): one test per code and checking verb, the
README's table against errors.EXIT_CODES, and the report files' overwrite rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.errors import BUG_EXIT, EXIT_CODES
from deepgreen_audit.report import NOT_APPLICABLE, NOT_VERIFIED, Finding, Report

ROOT = Path(__file__).resolve().parents[1]


def test_readme_table_is_the_help_table(capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", readme.split("## Exit codes", 1)[1], re.M)
    assert [(int(code), meaning) for code, meaning in rows] == list(EXIT_CODES)
    with pytest.raises(SystemExit):
        main(["--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert all(" ".join(meaning.split()) in helped for _, meaning in EXIT_CODES)


def test_exit_status_of_a_report():
    report = Report("x", "audit", findings=[Finding(id="S1.a", status="pass", message="ok")])
    assert report.exit_status() == report.exit_status(strict=True) == 0
    report.findings.append(Finding(id="S1.b", status="warn", message="w", severity="warning"))
    assert (report.exit_status(), report.exit_status(strict=True)) == (0, 1)
    assert report.strict_verdict() == ("FAILED under --strict: 1 warning(s), 0 check(s) that "
                                       "could not run")
    report.findings[-1] = Finding(id="S1.b", status="skip", message="s", basis=NOT_VERIFIED)
    assert (report.exit_status(), report.exit_status(strict=True)) == (0, 1)
    assert not report.finished
    # a check that does not apply to the package leaves the audit finished, even strict
    report.findings[-1] = Finding(id="S1.b", status="skip", message="one architecture",
                                  basis=NOT_APPLICABLE)
    assert (report.exit_status(), report.exit_status(strict=True)) == (0, 0)
    assert report.finished and report.strict_verdict() is None
    assert [f.id for f in report.not_applicable] == ["S1.b"]
    text = report.format_text(width=100)
    assert "did NOT finish" not in text and "1 check(s) do not apply" in text
    assert "(1 not applicable)" in text
    report.findings.append(Finding(id="S1.c", status="fail", message="f"))
    assert report.exit_status() == 1 and report.strict_verdict() is None


# ------------------------------------------------------------------ validate


def test_validate_exits_0_1_2(tiny_package, copy_of, tmp_path):
    assert main(["validate", str(tiny_package), "--strict"]) == 0
    broken = copy_of(tiny_package, tmp_path / "broken")
    (broken / "blocks.csv").write_text("nonsense\n")
    assert main(["validate", str(broken)]) == 1
    assert main(["validate", str(tmp_path / "nowhere")]) == 1  # no package: a failed check
    with pytest.raises(SystemExit) as usage:  # argparse's own usage errors exit 2 as well
        main(["validate", "--no-such-option"])
    assert usage.value.code == 2


# ------------------------------------------------------------------ audit


def test_audit_exits_1_on_a_failed_check_without_strict(tiny_package, capsys):
    assert main(["audit", str(tiny_package)]) == 1  # the tiny package breaks S6
    assert "FAILED:" in capsys.readouterr().out


def test_audit_exits_0_when_the_selected_checks_pass_and_strict_fails_a_skip(tiny_package):
    assert main(["audit", str(tiny_package), "--select", "integrity"]) == 0
    assert main(["audit", str(tiny_package), "--select", "integrity", "--select", "S5.tracking",
                 "--strict"]) in (0, 1)


def test_select_matching_no_check_is_a_usage_error(tiny_package, capsys):
    assert main(["audit", str(tiny_package), "--select", "S9", "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--select S9 matches no check" in err
    assert "S1, S2, S3, S4, S5, S6" in err and "Traceback" not in err


def test_codecarbon_audit_follows_the_same_rule(tmp_path, capsys):
    from test_codecarbon_logs import clean, write_log

    write_log(tmp_path / "logs" / "emissions.csv", "3.x", clean("3.x", cpu_w=360.0))
    pkg = tmp_path / "pkg"
    assert main(["import", "codecarbon", str(tmp_path / "logs"), "--out", str(pkg)]) == 0
    assert main(["audit", str(pkg), "--select", "S9"]) == 2
    assert main(["audit", str(pkg), "--select", "integrity"]) == 0
    assert main(["audit", str(pkg)]) == 1  # a modelled CPU power fails a check


def test_a_bug_exits_70(tiny_package, monkeypatch, capsys):
    from deepgreen_audit.audit import driver

    monkeypatch.setattr(driver, "audit_with_context", lambda *a, **k: 1 / 0)
    assert main(["audit", str(tiny_package)]) == BUG_EXIT
    assert "this is a bug in deepgreen" in capsys.readouterr().err


# ------------------------------------------------------------------ report files


def test_report_files_refuse_an_existing_file_and_the_package_own(tiny_package, tmp_path, capsys):
    junit, html = tmp_path / "r.xml", tmp_path / "r.html"
    assert main(["audit", str(tiny_package), "--junit", str(junit), "--html", str(html)]) == 1
    err = capsys.readouterr().err
    assert f"wrote {junit}" in err and f"wrote {html}" in err
    cases = re.findall(r'time="([0-9.]+)"', junit.read_text())
    assert cases and any(float(t) > 0 for t in cases)
    junit.write_text("mine")
    assert main(["audit", str(tiny_package), "--junit", str(junit)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overwrite" in err and junit.read_text() == "mine"
    assert main(["audit", str(tiny_package), "--junit", str(junit), "--overwrite"]) == 1
    assert junit.read_text().startswith("<?xml")
    descriptor = tiny_package / "datapackage.json"
    before = descriptor.read_bytes()
    assert main(["audit", str(tiny_package), "--html", str(descriptor), "--overwrite"]) == 2
    assert descriptor.read_bytes() == before
    assert main(["audit", str(tiny_package), "--html", str(html), "--junit", str(html),
                 "--overwrite"]) == 2
    assert "same file" in capsys.readouterr().err


def test_json_report_keeps_the_seconds_of_each_check(tiny_package, capsys):
    main(["audit", str(tiny_package), "--json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert all(isinstance(f["seconds"], float) for f in findings)


# ------------------------------------------------------------------ api-audit, parity, preflight


def test_api_audit_exits_0_1_2(tmp_path, tiny_package, capsys):
    from test_greenlight_import import record

    src = tmp_path / "records" / "dataset" / "proj"
    src.mkdir(parents=True)
    ns = 1_700_000_000_000_000_000  # 2023, a plausible date
    (src / "experiment-1.json").write_text(json.dumps([record(
        times__start_time_execution=ns, times__end_time_execution=ns + 1_000_000_000)]))
    pkg = tmp_path / "api"
    assert main(["import", "greenlight", str(tmp_path / "records"), "--out", str(pkg)]) == 0
    assert main(["api-audit", str(pkg)]) == 0
    (pkg / "api_calls.csv").write_text("nonsense\n")
    assert main(["api-audit", str(pkg)]) == 1
    assert main(["api-audit", str(tiny_package)]) == 2  # a replication package: not its kind


@pytest.mark.parametrize("statuses, strict, expected", [
    (("pass",), False, 0), (("pass", "skip"), False, 0), (("pass", "skip"), True, 1),
    (("fail",), False, 1)])
def test_parity_exit_follows_its_reports(monkeypatch, statuses, strict, expected, capsys):
    from deepgreen_audit.collect import parity

    def fake(arch, *a, **k):
        return Report(arch, "parity", findings=[Finding(id=f"S1.c{i}", status=s, message=s)
                                                for i, s in enumerate(statuses)])

    monkeypatch.setattr(parity, "run_parity", fake)
    monkeypatch.setattr(parity, "default_executables", dict)
    assert main(["parity", "--architecture", "resnet18", *(["--strict"] if strict else [])]) \
        == expected


def test_preflight_exits_1_when_a_job_cannot_run_and_2_on_a_bad_plan(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('campaign = "t"\nmaster_seed = 1\n[scope]\necosystems = ["python-jax"]\n'
                    'architectures = ["resnet18"]\ndatasets = ["digits"]\nrepetitions = 1\n')
    assert main(["preflight", "--plan", str(plan), "--allow-missing-counters"]) == 1
    assert main(["preflight", "--plan", str(tmp_path / "none.toml")]) == 2
