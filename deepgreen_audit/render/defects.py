"""The defect-class table: the audit's check registry as a catalogue, with this package's verdict.

Each *defect class* is a section of the audit suite (`deepgreen_audit.suite.registry.SUITES`):
package integrity, the six sections S1-S6 of the experiment specification, S7 (the contrast
cell, a part of S3), and the
sources and manuscript.  For each, the table lists the registered checks that find its
defects and whether the audit of the rendered package found any (a check that failed or
warned), skipped any, or found none.  The audit runs inside `render`, on the very package
the numbers come from, so the table can never describe another package or a stale run.
"""

from __future__ import annotations

from typing import Any

from deepgreen_audit.analysis import Number, Results
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.report import Report
from deepgreen_audit.spec import short_section
from deepgreen_audit.suite.registry import SUITES

#: Titles of the audit sections that are not sections of the specification.
SECTION_TITLES = {"integrity": "Package integrity", "source": "Sources and manuscript"}
#: Titles of the audit sections that are parts of a specification section (S7: the contrast
#: cell, S3_data.contrast_cell), labelled like a section.
PART_TITLES = {"S7": "Contrast cell"}
#: The check whose verdict the paper quotes beside Slurm's campaign-level energy.
SLURM_CHECK = "S5.slurm-energy"
#: How the text reads a finding's status.
VERDICTS = {"pass": "passes", "warn": "warns", "fail": "fails", "skip": "is skipped"}


def section_title(section: str, spec: dict) -> str:
    """'S5' -> 'Measurement' (the specification's title), 'integrity' -> 'Package integrity'."""
    for key, value in spec.items():
        if short_section(key) == section and isinstance(value, dict):
            return str(value.get("title", section))
    return SECTION_TITLES.get(section, PART_TITLES.get(section, section))


def section_label(section: str) -> str:
    """The label the table prints before a section's title: 'S5'; none for the others."""
    return section if section not in SECTION_TITLES else ""


def defect_classes(report: Report, spec: dict) -> list[dict[str, Any]]:
    """One row per section of the audit suite: its checks, and what the audit found."""
    status = {f.id: f.status for f in report.findings}
    rows = []
    for section in SUITES["audit"]:
        checks = [c for c in audit_checks() if c.section == section]
        found = [c.id for c in checks if status.get(c.id) in ("fail", "warn")]
        skipped = [c.id for c in checks if status.get(c.id) in ("skip", None)]
        rows.append({
            "section": section_label(section), "title": section_title(section, spec),
            "checks": [c.id.removeprefix(section + ".") for c in checks],
            "count": Number(len(checks), 0, f"checks of audit section {section}"),
            "found": Number(len(found), 0, f"checks of audit section {section} that found a defect"),
            "skipped": Number(len(skipped), 0, f"checks of audit section {section} skipped"),
            "found_ids": [c.removeprefix(section + ".") for c in found],
        })
    return rows


def add_audit_numbers(results: Results, report: Report, classes: list[dict[str, Any]]) -> None:
    """The audit's totals and the Slurm check's verdict, as macros of numbers.tex."""
    results.number("AuditChecksCount", sum(c["count"].value for c in classes), 0,
                   "checks of the audit suite run on the package")
    results.number("AuditChecksFound", sum(c["found"].value for c in classes), 0,
                   "audit checks that found a defect (fail or warn) in the package")
    results.number("DefectClassesCount", len(classes), 0,
                   "defect classes (sections of the audit suite)")
    results.number("DefectClassesFound", sum(1 for c in classes if c["found"].value), 0,
                   "defect classes with at least one defect found in the package")
    if results.flags.get("SlurmEnergy"):
        finding = next((f for f in report.findings if f.id == SLURM_CHECK), None)
        verdict = VERDICTS[finding.status] if finding is not None else VERDICTS["skip"]
        results.text("SlurmCheckVerdict", verdict, f"verdict of the audit's {SLURM_CHECK}")
