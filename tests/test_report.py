"""One report for every verb: each kind renders through the one renderer, to text and to JSON
with the same keys; and the layers below render import nothing from it (checked on the source)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from deepgreen_audit.audit import audit
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.collect import preflight
from deepgreen_audit.collect.parity import parity_checks
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.greenlight import checks as api_checks
from deepgreen_audit.package.validate import validate
from deepgreen_audit.report import KINDS, Finding, Report
from deepgreen_audit.suite.registry import SUITES, run_check

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "deepgreen_audit"


def _parity_report() -> Report:
    """The parity suite's source check alone (the probes need the stacks' frameworks)."""
    report = Report("resnet18", "parity")
    check = next(c for c in parity_checks() if c.id == "S2.recipe-literals")
    report.findings.append(run_check(check, None, resource="all"))
    return report


def _preflight_report(tmp_path) -> Report:
    plan = load_plan(write_scoped_plan(tmp_path / "plan.toml", "pre", tmp_path / "data", {
        "ecosystems": ["r-torch"], "architectures": ["resnet18"], "datasets": ["digits"],
        "repetitions": 1}))
    return preflight.run_checks(plan, allow_missing_counters=True)


def test_every_kind_renders_to_text_and_json_with_the_same_keys(tiny_package, tmp_path):
    audited = audit(tiny_package, select=["integrity"])
    (tiny_package / "runs.csv").write_bytes((tiny_package / "runs.csv").read_bytes() + b"x\n")
    reports = {"validate": validate(tiny_package),
               "audit": audited,
               "api-audit": api_checks.run_checks([], "api-pkg"),
               "parity": _parity_report(),
               "preflight": _preflight_report(tmp_path)}
    # the codecarbon suite answers `audit` on a codecarbon-log package (a report of kind audit)
    assert set(reports) == set(KINDS) == (set(SUITES) - {"codecarbon"}) | {"validate"}
    finding_keys = {f.name for f in dataclasses.fields(Finding)}
    keys = None
    for kind, report in reports.items():
        data = json.loads(report.to_json())
        assert data["kind"] == kind and report.findings, kind
        keys = keys or set(data)
        assert set(data) == keys, kind
        assert all(set(f) == finding_keys for f in data["findings"]), kind
        assert sum(data["counts"].values()) == len(data["findings"]) + sum(data["suppressed"].values())
        text = report.format_text()
        assert text.startswith("SYNTHETIC DATA") == report.synthetic
        assert f"{kind.upper()} of {report.subject}" in text, kind
        assert all(f.id in text for f in report.findings), kind


def test_validation_errors_are_capped_per_code_resource_and_field():
    report = Report("pkg", "validate", limit_per_kind=2)
    for row in range(2, 7):
        report.add("type-error", "not a number", resource="runs", row=row, field="epochs")
    report.add("type-error", "not a number", resource="runs", row=2, field="seed")
    assert len(report.findings) == 3 and report.suppressed == {"type-error|runs|epochs": 3}
    assert report.error_count == 6 and not report.valid
    assert "3 more not shown" in report.format_text()


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's contracts (pyproject.toml [tool.importlinter]) over the package at `root`."""
    tool = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(tool) if tool.exists() else "lint-imports", "--no-cache",
                           "--config", str(ROOT / "pyproject.toml")], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)


def test_the_layers_import_downward_only_and_the_contract_would_say_so(tmp_path):
    kept = _lint_imports(ROOT)
    assert kept.returncode == 0, kept.stdout[-2000:]
    # the same package with one import up a layer: the columnar engine reaching for the renderer
    shutil.copytree(PACKAGE, tmp_path / "deepgreen_audit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    frame = tmp_path / "deepgreen_audit" / "columnar" / "frame.py"
    frame.write_text(frame.read_text(encoding="utf-8") + "\nimport deepgreen_audit.render  # noqa\n",
                     encoding="utf-8")
    broken = _lint_imports(tmp_path)
    assert broken.returncode == 1
    assert "deepgreen_audit.columnar.frame -> deepgreen_audit.render" in broken.stdout


def test_the_results_text_lint_is_the_audits_last_check():
    lint = audit_checks()[-1]
    assert lint.id == "source.results-text-numbers"
    assert lint.func.__module__ == "deepgreen_audit.audit.checks.manuscript"
