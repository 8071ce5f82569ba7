"""The audit as one self-contained HTML page a reviewer reads, and as JUnit XML for CI.

The page needs nothing at view time: inline CSS, figures as inline PNG and the evidence as
CSV (data: URIs), no script, no font, no link to anywhere (a Content-Security-Policy forbids
every fetch, so a page that tried would fail loudly in the browser's console).

It opens with the verdict: each failing or warning check on one line, linked to its section,
split by `Finding.basis` into what the data contradicts and what it does not record (so
cannot be verified); then the package's identity and the counts; then every check, grouped
the same way (contradicted, not recorded, skipped, passed), with its description from the
registry.  A finding's evidence folds away (`<details>`) when long; the page shows its first
rows and embeds up to EMBEDDED_EVIDENCE_ROWS of them as a CSV download; `--evidence DIR`
writes all of them as CSV files (the JSON report names each, `details.evidence_csv`).

A figure is drawn only where it shows what convicted the rows (the `Figure` a check declares
beside itself, e.g. deepgreen_audit/audit/figures.py): the values
the check tested, the flagged ones marked, the limit drawn.  Each figure is drawn once, under
the first check (in page order) that it shows; the other checks it shows link to it.  A
finding that is only not recorded has no values, so no figure.
"""

from __future__ import annotations

import base64
import math
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from deepgreen_audit.columnar.evidence import evidence_csv_text, evidence_keys
from deepgreen_audit.errors import path_text
from deepgreen_audit.report import CODES, NOT_APPLICABLE, Finding, Report
from deepgreen_audit.safe import html_text, number_text, xml_document
from deepgreen_audit.suite.registry import Check

#: Evidence rows shown under a finding; all of them are in its CSV and in the JSON report.
SHOWN_EVIDENCE_ROWS = 20
#: Evidence of at most this many rows shows unfolded (for a contradicted finding).
OPEN_EVIDENCE_ROWS = 5
#: Evidence rows a finding embeds as CSV in the page: beyond them (a log of 100,000 rows) the page
#: says how many more there are and where they all are (the JSON report), so that it stays a
#: page a browser opens (under 10 MB).
EMBEDDED_EVIDENCE_ROWS = 2_000
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STATUS_COLOURS = {"pass": "#1b7f3b", "fail": "#b3261e", "warn": "#a15c00", "skip": "#5f6368"}
#: The page's groups of findings, in page order: (key, heading).
GROUPS = (("contradicted", "Contradicted by the data"),
          ("not recorded", "Not recorded, so not verifiable"),
          ("skip", "Skipped: could not run, so not verified"), ("pass", "Passed"),
          ("not applicable", "Not applicable to this package"))


def group_of(finding: Finding) -> str:
    """The page's group of a finding: a fail or warn by its basis (a crash, which has none, is
    contradicted: nothing shows it conforms), else its status."""
    if finding.status in ("fail", "warn"):
        return "not recorded" if finding.basis == "not recorded" else "contradicted"
    if finding.status == "skip" and finding.basis == NOT_APPLICABLE:
        return "not applicable"
    return finding.status


# ---------------------------------------------------------------- the page

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#202124;background:#fff}
main{max-width:1150px;margin:0 auto;padding:0 24px 48px}
header{max-width:1150px;margin:0 auto;padding:8px 24px 4px}
h1{font-size:20px;margin:4px 0} h2{font-size:17px;margin:24px 0 8px}
h3{font-size:15px;margin:0}
.verdict h2{margin:6px 0 2px;font-size:15px}
.verdict ul{list-style:none;margin:0 0 4px;padding:0;font-size:13px;line-height:1.4}
.verdict li{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.verdict ul.logs{font-size:14px}
.verdict ul.logs li{white-space:normal;overflow:visible}
.verdict li .status{display:inline-block;width:3.2em}
.verdict a{font-weight:600}
.verdict li a{margin-right:6px}
.synthetic{background:#b3261e;color:#fff;font-weight:700;font-size:20px;text-align:center;
 padding:14px;letter-spacing:.04em}
.watermark{position:fixed;top:40%;left:0;width:100%;text-align:center;font-size:120px;font-weight:800;
 color:rgba(179,38,30,.09);transform:rotate(-28deg);pointer-events:none;z-index:0;white-space:nowrap}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #dadce0;padding:2px 6px;text-align:left;vertical-align:top}
td{max-width:36em;min-width:5em;overflow-wrap:anywhere}
th{background:#f1f3f4}
.summary span{display:inline-block;margin-right:14px;font-weight:600}
section.check{border:1px solid #dadce0;border-left:6px solid #5f6368;border-radius:4px;
 padding:6px 12px;margin:8px 0;position:relative;z-index:1;background:rgba(255,255,255,.92);
 scroll-margin-top:8px}
section.pass,section.skip{padding:3px 12px;margin:4px 0}
section.pass p,section.skip p{margin:2px 0}
.status{font-weight:700;text-transform:uppercase;margin-right:8px}
.meta,.doc{color:#5f6368;font-size:12px}
.fix{background:#e8f0fe;border-radius:4px;padding:4px 8px}
summary{cursor:pointer;color:#1a73e8;font-size:13px}
img{max-width:100%;height:auto;display:block;margin:6px 0}
.more{color:#5f6368;font-size:12px}
.sortable .sort-by{color:#5f6368;font-size:12px;margin-right:4px}
.sortable input{position:absolute;opacity:0;width:1px;height:1px}
.sortable label{display:inline-block;font-size:12px;padding:1px 8px;margin:0 4px 2px 0;cursor:pointer;
 border:1px solid #dadce0;border-radius:10px;color:#1a73e8}
.sortable input:checked+label{background:#1a73e8;color:#fff;border-color:#1a73e8}
.sortable input:focus-visible+label{outline:2px solid #202124}
.sortable .ordered{display:none}
""" + "".join(f".sortable input.order-{k}:checked~.order-{k}{{display:block}}\n"
              for k in range(8))


_esc = html_text  # every text from the data on the page (a log's cells and name) goes through it


def _cell(value) -> str:
    """An evidence cell on the page: a number that is not finite says "not defined" and why
    (the JSON report holds it as null with the same reason), never nan or inf."""
    if isinstance(value, float) and not math.isfinite(value):
        return _esc(number_text(value, "g"))
    return _esc(value)


def sortable_table(name: str, headings: list[str], rows: list[str],
                   orders: list[tuple[str, list[int]]]) -> str:
    """A table the reader sorts without a script (the page runs none): a radio button per
    order, each showing the rows (`rows`, each a `<tr>` already escaped) in that order, CSS
    showing the checked one; `orders` are (label, the rows' positions in that order), the
    first shown at first.  The rows are written once per order: a page lists at most a few
    thousand."""
    if len(orders) > 8:
        raise ValueError("a sortable table offers at most 8 orders (STYLE's rules)")
    head = "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in headings) + "</tr>"
    parts = ['<div class="sortable"><span class="sort-by">sort by:</span>']
    for k, (label, _) in enumerate(orders):
        parts.append(f'<input type="radio" name="{_esc(name)}-order" id="{_esc(name)}-order-{k}" '
                     f'class="order-{k}"{" checked" if k == 0 else ""}>'
                     f'<label for="{_esc(name)}-order-{k}">{_esc(label)}</label>')
    for k, (_, positions) in enumerate(orders):
        parts.append(f'<div class="scroll ordered order-{k}"><table>{head}'
                     + "".join(rows[i] for i in positions) + "</table></div>")
    return "".join(parts) + "</div>"


def csv_data_uri(rows: list[dict]) -> str:
    """All the evidence rows as a CSV data: URI (a download that needs no fetch)."""
    return ("data:text/csv;charset=utf-8;base64,"
            + base64.b64encode(evidence_csv_text(rows).encode("utf-8")).decode("ascii"))


def _evidence_table(finding: Finding) -> str:
    """The first rows of the finding's evidence, folded when long or only unrecorded, with
    every row a click away as CSV (the link stays in sight when the rows are folded)."""
    rows = (finding.details or {}).get("evidence") or []
    if not rows:
        return ""
    columns = evidence_keys(rows)
    shown = rows[:SHOWN_EVIDENCE_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>"
                   for row in shown)
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    total = len(rows)
    name = f"{finding.id}-evidence.csv"
    embedded = rows[:EMBEDDED_EVIDENCE_ROWS]
    holds = (f"has all {total:,} (embedded in this page; so does the CSV of --evidence DIR)"
             if total == len(embedded) else
             f"has the first {len(embedded):,}; all {total:,} are in the CSV of --evidence DIR "
             f"(named in the JSON report: details.evidence_csv)")
    more = (f'<p class="more">{total - len(shown):,} more row(s) than the table\'s {len(shown)}: '
            f'<a class="csv" download="{_esc(name)}" href="{csv_data_uri(embedded)}">{_esc(name)}</a> '
            f'{holds}</p>' if total > len(shown) else "")
    opened = " open" if group_of(finding) == "contradicted" and total <= OPEN_EVIDENCE_ROWS else ""
    return (f'<details class="evidence"{opened}><summary>evidence: {total:,} row(s)'
            f'{f", the first {len(shown)} here" if total > len(shown) else ""}</summary>'
            f'<div class="scroll"><table class="evidence"><tr>{head}</tr>{body}</table></div>'
            f'</details>{more}')


def _remedy(finding: Finding) -> str:
    """What to change in the set-up, under a finding that states it."""
    return f'<p class="fix"><strong>Fix:</strong> {_esc(finding.remedy)}</p>' if finding.remedy else ""


def _explained(finding: Finding) -> str:
    explained = (finding.details or {}).get("explained") or []
    if not explained:
        return ""
    items = "".join(f"<li>{_esc(e.get('why'))}</li>" for e in explained)
    return f"<p class=\"meta\">Not flagged, with the explanation the evidence favours:</p><ul>{items}</ul>"


def _identity(report: Report, package) -> str:
    rows = []
    if package is not None:
        d = package.descriptor
        rows.append(("title", d.get("title", d.get("name", ""))))
        rows.append(("descriptor", path_text(package.descriptor_path)))
        for res in d.get("resources", []):
            if isinstance(res, dict):
                rows.append((f"{res.get('name')} table", f"{res.get('hash', '')} ({res.get('bytes', '?'):,} bytes)"
                             if isinstance(res.get("bytes"), int) else res.get("hash", "")))
        measured = d.get("measured")
        if isinstance(measured, dict):
            rows.append(("measured", f"on {', '.join(measured.get('gpus') or [])} "
                                     f"({measured.get('host', '')}), boundary: {measured.get('boundary', '')}"))
    else:
        rows.append(("package", report.subject))
    rows.append(("kind", "SYNTHETIC: generated, not measured" if report.synthetic else "measured or imported"))
    scope = report.stats.get("scope")
    if scope:
        rows.append(("audited against its declared scope",
                     ", ".join(f"{k} {v}" for k, v in scope.items())))
    integrity = next((f for f in report.findings if f.id == "integrity.validate"), None)
    if integrity is not None:
        rows.append(("integrity", integrity.message))
    return ('<div class="scroll"><table>' + "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>"
                                                   for k, v in rows) + "</table></div>")


def checks_of_page(suite: str = "audit") -> dict[str, Check]:
    """The checks whose findings a page of `suite` shows, by id: the suite's, and the campaign
    audit's checks it reuses (each with its docstring and the figure it declares)."""
    from deepgreen_audit.suite.registry import REGISTRY

    return {**REGISTRY["audit"], **REGISTRY[suite]}


def descriptions(suite: str = "audit") -> dict[str, str]:
    """What each check a page of `suite` shows checks (its docstring in the registry), and what
    each validation code means."""
    return {**CODES, **{i: c.doc for i, c in checks_of_page(suite).items()}}


def _verdict(report: Report, groups: dict[str, list[Finding]], opening: str = "") -> str:
    """What failed and what warned, one linked line each, contradicted apart from unrecorded,
    after the `opening` (HTML) a kind of package has of its own."""
    parts = [opening] if opening else []
    for key, heading in GROUPS[:2]:
        found = groups[key]
        if not found:
            continue
        items = "".join(
            f'<li title="{_esc(f.message)}">'
            f'<span class="status" style="color:{STATUS_COLOURS[f.status]}">{f.status}</span>'
            f'<a href="#{_esc(f.id)}">{_esc(f.id)}</a>{_esc(f.message)}</li>' for f in found)
        parts.append(f"<h2>{heading} ({len(found)})</h2><ul>{items}</ul>")
    if groups["skip"]:
        links = ", ".join(f'<a href="#{_esc(f.id)}">{_esc(f.id)}</a>' for f in groups["skip"])
        parts.append(f'<p class="meta">Could not run, so not verified ({len(groups["skip"])}): '
                     f'{links}</p>')
    if groups["not applicable"]:
        links = ", ".join(f'<a href="#{_esc(f.id)}">{_esc(f.id)}</a>'
                          for f in groups["not applicable"])
        parts.append(f'<p class="meta">Not applicable to this package '
                     f'({len(groups["not applicable"])}): {links}</p>')
    if not any(groups[key] for key in ("contradicted", "not recorded", "skip")):
        applying = " that apply" if groups["not applicable"] else ""
        parts.append(f"<h2>Every one of the {len(groups['pass'])} checks{applying} passed</h2>")
    return '<nav class="verdict">' + "".join(parts) + "</nav>"


def render_page(report: Report, ctx=None, *, suite: str = "audit", verdict: str = "",
                before_checks: str = "") -> str:
    """The page for `report`; `ctx` (the context the audit ran on) draws the figures, `suite`
    names the registry whose descriptions the checks show; `verdict` (HTML) opens the verdict
    and `before_checks` (HTML) precedes the checks (the CodeCarbon-log page's own)."""
    checks = checks_of_page(suite)
    groups = _findings_by_group(report.findings)
    sections = _check_sections(groups, checks, _Figures(checks, ctx, report))
    package = ctx.package if ctx is not None else None
    return _shell(report, _header(report, groups, verdict, package), before_checks + "\n" + sections)


def _findings_by_group(findings: list[Finding]) -> dict[str, list[Finding]]:
    """The findings by the page's group (`GROUPS`, every group present), in report order."""
    groups: dict[str, list[Finding]] = {key: [] for key, _ in GROUPS}
    for f in findings:
        groups[group_of(f)].append(f)
    return groups


def _check_sections(groups: dict[str, list[Finding]], checks: dict[str, Check],
                    figures: _Figures) -> str:
    """Every check's section, group by group under the group's heading; an empty group has none."""
    docs = {**CODES, **{i: c.doc for i, c in checks.items()}}
    sections = []
    for key, heading in GROUPS:
        if groups[key]:
            sections.append(f"<h2>{heading} ({len(groups[key])})</h2>")
            sections += [_check_section(f, docs.get(f.id), figures) for f in groups[key]]
    return "".join(sections)


def _header(report: Report, groups: dict[str, list[Finding]], verdict: str, package) -> str:
    """What a reader sees first: the outcome, the verdict, the counts, whether the audit
    finished, the package's identity, and what "not recorded" and "contradicted" mean."""
    finished = ("" if report.finished else
                f'<p><strong>The audit did NOT finish:</strong> {len(report.not_verified)} check(s) '
                "could not run, so what they check was not verified.</p>")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    words = "PASSED" if report.valid else "FAILED"
    return f"""<header><h1>{'SYNTHETIC DATA: ' if report.synthetic else ''}DeepGreen audit
<span style="color:{STATUS_COLOURS['pass' if report.valid else 'fail']}">{words}</span></h1>
{_verdict(report, groups, verdict)}
{_summary(report)}{finished}
{_identity(report, package)}
<p class="meta">Generated {generated} by deepgreen audit.  "Not recorded": every row the check
failed lacks the value it checks (an empty cell, a missing reading), so nothing contradicts the
specification but nothing shows it was met; "contradicted": a recorded value breaks it.</p></header>"""


def _shell(report: Report, header: str, checks_html: str) -> str:
    """The self-contained document around the header and the checks: its policy forbidding
    every fetch, its style, and a synthetic package's banner at both ends."""
    banner = ('<div class="synthetic">SYNTHETIC DATA: this package is synthetic; '
              'its numbers are not measurements.</div><div class="watermark">SYNTHETIC DATA</div>'
              if report.synthetic else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{'SYNTHETIC: ' if report.synthetic else ''}Audit of {_esc(report.subject)}</title>
<style>{STYLE}</style></head>
<body>{banner}{header}
<main>{checks_html}
</main>{banner}</body></html>
"""


class _Figures:
    """The page's figures: each drawn once, under the first contradicted check that declares
    it, and linked from the others."""

    def __init__(self, checks: dict[str, Check], ctx, report: Report):
        self.checks, self.ctx, self.report = checks, ctx, report
        self.drawn: dict[str, str] = {}  # figure key -> the check it is drawn under ("" if empty)

    def under(self, finding: Finding) -> str:
        """The figure's <img> under the first check it shows, a link to it under the others."""
        check = self.checks.get(finding.id)
        figure = check.figure if check is not None else None
        if figure is None or self.ctx is None or group_of(finding) != "contradicted":
            return ""
        kind = figure.key
        if kind in self.drawn:
            return (f'<p class="meta">Figure: {figure.title}, under '
                    f'<a href="#figure-{kind}">{_esc(self.drawn[kind])}</a>.</p>'
                    ) if self.drawn[kind] else ""
        drawing = figure.draw(self.ctx, self.report)
        self.drawn[kind] = finding.id if drawing else ""
        if not drawing:
            return ""
        image, caption = drawing
        return (f'<img class="figure" id="figure-{kind}" data-figure="{kind}" '
                f'alt="{_esc(caption)}" title="{_esc(caption)}" src="{image}">')


def _check_section(f: Finding, doc: str | None, figures: _Figures) -> str:
    """One check's section: its message and description; for a fail or warn, where and how
    severe, the fix, the figure, the evidence and what was explained away."""
    colour = STATUS_COLOURS[f.status]
    body = f"<p>{_esc(f.message)}</p>"
    if doc:
        body += f'<p class="doc">Checks: {_esc(doc)}</p>'
    if f.status in ("fail", "warn"):
        rows = f" &middot; {f.rows_affected:,} {_esc(f.resource or 'row')} row(s) affected" \
            if f.rows_affected is not None else ""
        body += f'<p class="meta">{_esc(f.section)} &middot; severity {_esc(f.severity)}{rows}</p>'
        body += _remedy(f) + figures.under(f) + _evidence_table(f) + _explained(f)
    elif (f.details or {}).get("explained"):
        body += _explained(f)
    return (f'<section class="check {f.status}" id="{_esc(f.id)}" data-check="{_esc(f.id)}" '
            f'style="border-left-color:{colour}"><h3><span class="status" style="color:{colour}">'
            f'{f.status}</span>{_esc(f.id)}</h3>{body}</section>')


def _summary(report: Report) -> str:
    """The counts of each status, the skips that do not apply said apart."""
    counts = report.counts
    applicable = (f" ({len(report.not_applicable)} not applicable)" if report.not_applicable
                  else "")
    return (f'<p class="summary"><span style="color:{STATUS_COLOURS["pass"]}">{counts["pass"]} pass</span>\n'
            f'<span style="color:{STATUS_COLOURS["fail"]}">{counts["fail"]} fail</span>\n'
            f'<span style="color:{STATUS_COLOURS["warn"]}">{counts["warn"]} warn</span>\n'
            f'<span style="color:{STATUS_COLOURS["skip"]}">{counts["skip"]} skip{applicable}</span></p>')


# ---------------------------------------------------------------- JUnit

def render_junit(report: Report) -> str:
    """One testcase per check: a fail is a failure, a skip is skipped, a warning passes with
    its message in system-out (JUnit has no warning)."""
    counts = report.counts
    suites = ET.Element("testsuites", name="deepgreen audit", tests=str(len(report.findings)),
                        failures=str(counts["fail"]), errors="0", skipped=str(counts["skip"]))
    suite = ET.SubElement(suites, "testsuite", name=str(report.subject),
                          tests=str(len(report.findings)), failures=str(counts["fail"]),
                          errors="0", skipped=str(counts["skip"]),
                          timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    for f in report.findings:
        case = ET.SubElement(suite, "testcase", classname=f"deepgreen.audit.{f.section}", name=f.id,
                             time=f"{f.seconds or 0:.3f}")
        if f.status == "fail":
            ET.SubElement(case, "failure", message=f.message[:500], type=f.severity).text = (
                f.message + (f"\nfix: {f.remedy}" if f.remedy else ""))
        elif f.status == "skip":
            said = f"not applicable: {f.message}" if f.basis == NOT_APPLICABLE else f.message
            ET.SubElement(case, "skipped", message=said[:500])
        elif f.status == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {f.message}" + (
                f"\nfix: {f.remedy}" if f.remedy else "")
    if report.synthetic:
        ET.SubElement(suite, "system-out").text = report.notice or "SYNTHETIC DATA"
    return xml_document(suites)
