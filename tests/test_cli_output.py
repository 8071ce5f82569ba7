"""Text output a reader takes in at a glance (issue 24): wrapped to the terminal with a hanging
indent, a very long message cut with a pointer to the output that holds it whole."""

from __future__ import annotations

from deepgreen_audit.report import MAX_LINES, Finding, Report


def test_findings_wrap_to_the_width_with_a_hanging_indent():
    long = " ".join(f"stack{i}/resnet18/cifar100 ran vgg16" for i in range(60))
    report = Report("pkg", "audit", findings=[
        Finding(id="S1.architecture-identity", status="fail", message=long, resource="blocks"),
        Finding(id="S1.short", status="pass", message="fine " * 20)])
    lines = report.format_text(width=80).splitlines()
    assert all(len(line) <= 80 for line in lines)
    first = lines.index(next(t for t in lines if "S1.architecture-identity" in t))
    own = [first] + [i for i in range(first + 1, len(lines)) if lines[i].startswith("      ")
                     and i < lines.index(next(t for t in lines if "S1.short" in t))]
    assert len(own) == MAX_LINES
    assert "--json or --html shows it whole" in lines[own[-1]]
    assert lines[first + 1].startswith(" " * len("  FAIL  S1.architecture-identity  "))
    assert lines[-1] == "FAILED: pkg: 1 failure(s)"


def test_other_reports_point_to_json_only():
    report = Report("plan", "preflight", findings=[
        Finding(id="stack.ready", status="fail", message="x " * 2000)])
    text = report.format_text(width=60)
    assert "--json shows it whole" in text and "--html" not in text
