"""The audit of a `codecarbon-log` package: integrity, the suite `codecarbon`, the campaign
audit's S5 checks that are the same check (`checks.REUSED`), and the verdict of each log and
run, in one `Report` (kind ``audit``) that prints, writes JSON, JUnit and the HTML page the
same way as the campaign audit's.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from deepgreen_audit.codecarbon import checks as cc_checks
from deepgreen_audit.codecarbon.context import LogContext
from deepgreen_audit.codecarbon.verdict import log_verdicts, run_verdicts, worst_findings
from deepgreen_audit.columnar.frame import ColumnRows
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.kinds import CODECARBON_LOG
from deepgreen_audit.report import Finding, Report
from deepgreen_audit.safe import html_text, number_text, terminal_text
from deepgreen_audit.spec import load_spec
from deepgreen_audit.suite.registry import Check, select_checks
from deepgreen_audit.suite.run import INTEGRITY_ID, run_suite

#: Runs listed under each log in the text report (all of them are in --json).
RUNS_SHOWN = 12
#: Runs whose verdict the page lists (all of them are in --json): a page a browser opens.
RUNS_ON_PAGE = 2_000
#: The reused checks' evidence keys, back in a log's terms.
_RENAMED = {"ecosystem": "source_file", "epoch": "source_line", "phase": "row", "run_id": "run"}


def _in_log_terms(finding):
    """A reused campaign check's finding about the log's table, its evidence under the log's
    keys (its message already speaks of rows: `LogContext.words`)."""
    details = finding.details
    rows = (details or {}).get("evidence")
    if isinstance(rows, ColumnRows):
        details = {**details, "evidence": rows.renamed(_RENAMED, drop=["codecarbon_version"])}
    elif rows:
        details = {**details, "evidence": [{_RENAMED.get(k, k): v for k, v in row.items()
                                            if k != "codecarbon_version"} for row in rows]}
    return dataclasses.replace(finding, details=details, resource="codecarbon_log")


def _rate_unit(ctx: LogContext) -> str:
    """What a broken emissions_rate is, when the numbers say: 1000 x emissions / duration is a
    rate in g/s under CodeCarbon's kg/s label."""
    b = ctx.blocks
    # a duration of 1e-300 s overflows the rate to inf (S5.cc-magnitudes fails such a row): no
    # ratio near 1000, so nothing to say here and nothing to warn about
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = b["codecarbon_emissions_rate_kg_per_s"] / (b["codecarbon_emissions_kg"]
                                                          / b["codecarbon_duration_s"])
        thousand = np.isfinite(ratio) & (ratio > 0) & (np.abs(ratio - 1000) < 1.0)
    if thousand.any():
        logs = ", ".join(sorted(set(b["ecosystem"][thousand])))
        return (f"; in {int(thousand.sum())} row(s) ({logs}) the rate is 1000 x emissions / "
                "duration: grams per second under CodeCarbon's kg/s label")
    return ""


#: The widest a log's name is in the text report's tables (longer ones are cut in the middle;
#: each is whole in the lines that follow the tables).
LOG_NAME_COLUMN = 20
#: The widest a task's name is beside its run's id there (a run table's row fits 100 columns).
TASK_NAME_COLUMN = 8


def corpus_tables(logs: list[dict[str, Any]], runs: list[dict[str, Any]], all_runs: int) -> list[str]:
    """The text report's corpus view: a table of the logs, then one of the runs listed (the
    first RUNS_SHOWN of each log), each row its verdict, the share of its energy modelled and
    its worst finding; a line each, so that a reviewer reads a paper's hundred logs at a
    glance (every run is in --json, --html and --evidence DIR)."""
    if not logs:
        return []
    lines = [f"each log ({len(logs)}): its verdict, the share of its energy modelled, its worst finding"]
    lines += _table(["log", "runs", "verdict", "modelled", "worst finding"],
                    [[_cut(log["source_file"]), f"{log['runs']:,}", log["verdict"],
                      _share_cell(log["modelled_share"]), log.get("worst_finding") or "-"]
                     for log in logs],
                    right={1, 3})
    if runs:
        listed = "" if len(runs) == all_runs else (
            f"; the first {RUNS_SHOWN} of each log, {len(runs):,} of {all_runs:,}")
        lines.append(f"each run{listed}:")
        lines += _table(["log", "line", "run", "verdict", "modelled", "worst finding"],
                        [[_cut(run["source_file"]), str(run["source_line"]), _run_id(run["run_key"]),
                          run["verdict"], _share_cell(run["modelled_share"]),
                          run.get("worst_finding") or "-"] for run in runs], right={1, 4})
    return lines


def _table(headings: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned text columns, two spaces apart; the columns in `right` aligned right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headings, *rows)]

    def line(cells) -> str:
        return "  ".join(str(c).rjust(w) if k in right else str(c).ljust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return ["  " + line(headings)] + ["  " + line(row) for row in rows]


def _share_cell(share) -> str:
    """A modelled share in a table: a percentage, or '-' where there is none (no energy, or a
    1.x log that does not say)."""
    return _share(share) if isinstance(share, (int, float)) and math.isfinite(share) else "-"


def _cut(name: str, width: int = LOG_NAME_COLUMN) -> str:
    """A name as the terminal shows it (its control characters written out: they would
    otherwise count in the widths and be cut apart), within `width` characters, cut in the
    middle."""
    name = terminal_text(str(name))
    if len(name) <= width:
        return name
    half = (width - 3) // 2
    return name[:half] + "..." + name[-(width - 3 - half):]


def _run_id(run_key: str) -> str:
    """A run's id, its first 8 characters, and its task ('8e811eec/train', cut as a name)."""
    run, _, task = str(run_key).partition("/")
    return _cut(run[:8]) + (f"/{_cut(task, TASK_NAME_COLUMN)}" if task else "")


def measurement(run_key: str) -> str:
    """'run 8e811eec-91ab' or 'task train of run 8e811eec-91ab', for one line of the notes."""
    run, _, task = run_key.partition("/")
    return f"task {task} of run {run[:13]}" if task else f"run {run[:13]}"


def audit_log(location, *, spec: dict[str, Any] | None = None,
              select: list[str] | None = None) -> tuple[Report, LogContext | None]:
    """Audit the CodeCarbon-log package at `location`; never raises for bad data."""
    spec = spec or load_spec()
    own = cc_checks.codecarbon_checks()
    # the integrity checks and S5.cc-rows, then the reused identities, then the rest
    order = select_checks(own[:4] + list(cc_checks.REUSED) + own[4:], select, keep=(INTEGRITY_ID,))

    def in_log_terms(c: Check[LogContext], finding: Finding, log: LogContext) -> Finding:
        if c.suite != "audit":
            return finding
        finding = _in_log_terms(finding)
        if c.id == "S5.emissions-rate" and finding.status == "fail":
            finding = dataclasses.replace(finding, message=finding.message + _rate_unit(log))
        return finding

    def context_of(report: Report, integrity: Report, typed: dict[str, Any]) -> LogContext:
        return LogContext(Package.open(location), spec, integrity, typed)

    report, ctx = run_suite(location, order, context_of, tables=CODECARBON_LOG.tables,
                            adjust=in_log_terms)
    if ctx is None:
        return report, None
    runs = run_verdicts(ctx)
    logs = log_verdicts(ctx, runs)
    worst_of_log, worst_of_run = worst_findings(report.findings, ctx)
    for log in logs:
        log["worst_finding"] = worst_of_log.get(log["source_file"])
    runs = runs.drop(columns=["energy_kwh"], errors="ignore")
    runs["worst_finding"] = pd.Series([worst_of_run.get(key) for key in
                                       zip(runs["source_file"], runs["run_key"])], dtype=object)
    # rows made when read: a long log has a run per row
    report.stats["verdicts"] = {"logs": logs, "runs": ColumnRows(
        {name: runs[name].to_numpy() for name in runs.columns}, len(runs), plain=False)}
    positions_of = runs.groupby("source_file", sort=False).indices
    shown = [k for log in logs for k in positions_of.get(log["source_file"], [])[:RUNS_SHOWN]]
    report.notes += corpus_tables(logs, [{name: runs[name].iat[k] for name in runs.columns}
                                         for k in shown], len(runs))
    for log in logs:
        worst = f" [worst finding: {log['worst_finding']}]" if log["worst_finding"] else ""
        report.notes.append(f"{log['source_file']}: {log['words']}{worst}")
        part = positions_of.get(log["source_file"], [])
        for k in part[:RUNS_SHOWN]:
            report.notes.append(f"  line {runs['source_line'].iat[k]} "
                                f"({measurement(runs['run_key'].iat[k])}): {runs['words'].iat[k]}")
        if len(part) > RUNS_SHOWN:
            report.notes.append(f"  ... {len(part) - RUNS_SHOWN} more run(s) in --json and --html")
    return report, ctx


# ---------------------------------------------------------------- the page's verdict

def verdict_html(report: Report, ctx: LogContext | None) -> tuple[str, str]:
    """The page's own parts: each log's verdict, which opens the page's verdict (the findings
    follow it there), and, before the checks, a figure of each run's energy by component,
    coloured measured / modelled, and every run's verdict (folded: one row per run)."""
    from deepgreen_audit.page.html import csv_data_uri, sortable_table

    verdicts = report.stats.get("verdicts")
    if not verdicts:
        return "", ""
    colours = {"measured": "#1b7f3b", "partly modelled": "#a15c00", "modelled": "#b3261e",
               "not known": "#5f6368"}
    lines = "".join(
        f'<li title="{html_text(log["words"])}"><strong>{html_text(log["source_file"])}</strong>: '
        '<span style="color:'
        f'{colours.get(log["verdict"], "#202124")};font-weight:600">{html_text(log["words"])}</span>'
        f'{_worst_link(log.get("worst_finding"))}</li>'
        for log in verdicts["logs"])
    top = [f'<h2>Verdict: was this energy measured?</h2><ul class="logs">{lines}</ul>']
    parts = ["<h2>Each log's and each run's energy</h2>"]
    figure = _energy_figure(ctx)
    if figure:
        parts.append(f'<img class="figure" alt="energy of each run by component, measured or '
                     f'modelled" src="{figure}">')
    logs = verdicts["logs"]
    log_rows = [f"<tr><td>{html_text(str(log['source_file']))}</td><td>{log['runs']:,}</td>"
                f"<td style=\"color:{colours.get(log['verdict'], '#202124')}\">"
                f"{html_text(log['verdict'])}</td><td>{_share_cell(log['modelled_share'])}</td>"
                f"<td>{_worst_link(log.get('worst_finding'))}</td></tr>" for log in logs]
    log_table = [{k: log.get(k) for k in LOG_VERDICT_COLUMNS} for log in logs]
    parts.append(f'<details open><summary>the verdict of each of the {len(logs):,} log(s)</summary>'
                 '<p class="more"><a class="csv" download="log-verdicts.csv" '
                 f'href="{csv_data_uri(log_table)}">log-verdicts.csv</a> has these rows</p>'
                 + sortable_table("logs", ["log", "runs", "verdict", "modelled", "worst finding"],
                                  log_rows, _orders(logs, by_runs=True)) + "</details>")
    listed = list(verdicts["runs"][:RUNS_ON_PAGE])
    rows = [f"<tr><td>{html_text(str(r['source_file']))}</td><td>{r['source_line']}</td>"
            f"<td>{html_text(str(r['run_key']))}</td><td>{_share_cell(r['modelled_share'])}</td>"
            f"<td style=\"color:{colours.get(r['verdict'], '#202124')}\">{html_text(r['words'])}</td>"
            f"<td>{_worst_link(r.get('worst_finding'))}</td></tr>" for r in listed]
    total = len(verdicts["runs"])
    first = "" if total == len(listed) else (
        f", the first {len(listed):,} here (all in the JSON report, stats.verdicts.runs, and in "
        "--evidence DIR's run-verdicts.csv)")
    orders = _orders(listed)
    # the CSV in the table's first order (a spreadsheet sorts it any other way)
    table = [listed[i] for i in orders[0][1]]
    parts.append(f'<details><summary>the verdict of each of the {total:,} run(s){first}</summary>'
                 '<p class="more"><a class="csv" download="run-verdicts.csv" '
                 f'href="{csv_data_uri(table)}">run-verdicts.csv</a> has these rows</p>'
                 + sortable_table("runs", ["log", "line", "run", "modelled", "verdict",
                                           "worst finding"], rows, orders)
                 + "</details>")
    return "".join(top), "".join(parts)


#: The columns of a log's verdict in the CSVs (the page's and --evidence DIR's; a run's are its
#: row of stats.verdicts.runs).
LOG_VERDICT_COLUMNS = ("source_file", "runs", "verdict", "modelled_share", "worst_finding", "words")


def verdict_csvs(report: Report) -> dict[str, str]:
    """`audit --evidence DIR`'s verdict files: every log's and every run's verdict as CSV
    (log-verdicts.csv, run-verdicts.csv), in the logs' and the rows' order; none for a report
    without verdicts (a package that did not validate)."""
    from deepgreen_audit.columnar.evidence import evidence_csv_text

    verdicts = report.stats.get("verdicts")
    if not verdicts:
        return {}
    return {"log-verdicts.csv": evidence_csv_text([{k: log.get(k) for k in LOG_VERDICT_COLUMNS}
                                                   for log in verdicts["logs"]]),
            "run-verdicts.csv": evidence_csv_text(verdicts["runs"])}


#: The verdicts from the most to the least modelled, the order a table sorts them in.
_VERDICT_ORDER = {"modelled": 0, "partly modelled": 1, "not known": 2, "measured": 3}


def _orders(rows: list[dict[str, Any]], by_runs: bool = False) -> list[tuple[str, list[int]]]:
    """The orders a verdict table offers, each as its rows' positions: the most modelled first
    (shown first), by log (and line), by verdict, by worst finding, and, for logs, the most
    runs first."""
    def positions(key) -> list[int]:
        return sorted(range(len(rows)), key=lambda k: key(rows[k]))

    def place(row) -> tuple[str, int]:
        return str(row["source_file"]), int(row.get("source_line") or 0)
    orders = [("most modelled", positions(lambda r: (_most_modelled_first(r), place(r)))),
              ("log", positions(place)),
              ("verdict", positions(lambda r: (_VERDICT_ORDER.get(r["verdict"], 4),
                                               _most_modelled_first(r), place(r)))),
              ("worst finding", positions(lambda r: (r.get("worst_finding") is None,
                                                     str(r.get("worst_finding")), place(r))))]
    if by_runs:
        orders.append(("most runs", positions(lambda r: (-int(r["runs"]), place(r)))))
    return orders


def _most_modelled_first(row: dict[str, Any]) -> tuple[bool, float]:
    share = row.get("modelled_share")
    known = isinstance(share, (int, float)) and math.isfinite(share)
    return not known, -float(share) if known and share is not None else 0.0


def _share(share) -> str:
    if not isinstance(share, (int, float)):
        return "not known"
    return number_text(share, ".0%", "no energy to share")


def _worst_link(check_id: str | None) -> str:
    """' (worst: <the check, linked to its section>)' or nothing."""
    if not check_id:
        return ""
    return f' (worst: <a href="#{html_text(check_id)}">{html_text(check_id)}</a>)'


def _energy_figure(ctx: LogContext | None) -> str | None:
    if ctx is None:
        return None
    from deepgreen_audit.page.figures import figure_png, new_figure

    c = ctx.components
    c = c[c["final_row"] & c["energy_kwh"].notna() & (c["energy_kwh"] > 0)]
    if c.empty:
        return None
    runs = list(dict.fromkeys(zip(c["source_file"], c["source_line"])))[:60]
    fig, axes = new_figure(width=9, height=0.22 * len(runs) + 1.4)
    ax = axes[0][0]
    colours = {"measured": "#1b7f3b", "modelled": "#b3261e", "measured or modelled": "#e8a33d",
               "not tracked": "#5f6368"}
    hatch = {"cpu": "", "gpu": "//", "ram": ".."}
    seen = set()
    for y, (source_file, line) in enumerate(runs):
        part = c[(c["source_file"] == source_file) & (c["source_line"] == line)]
        total = part["energy_kwh"].sum()
        left = 0.0
        for _, comp in part.iterrows():
            width = comp["energy_kwh"] / total
            label = f"{comp['component'].upper()} {comp['status']}"
            ax.barh(y, width, left=left, color=colours.get(comp["status"], "#999"),
                    hatch=hatch[comp["component"]], edgecolor="white",
                    label=None if label in seen else label)
            seen.add(label)
            left += width
    ax.set_yticks(range(len(runs)), [f"{f} line {n}" for f, n in runs])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the run's energy")
    ax.set_title("Each run's energy by component: measured (green) or modelled (red)")
    ax.legend(loc="lower right", framealpha=0.9)
    return figure_png(fig)


def render_log_page(report: Report, ctx: LogContext | None) -> str:
    """The campaign audit's page, opened by the verdict."""
    from deepgreen_audit.page.html import render_page

    verdict, before_checks = verdict_html(report, ctx)
    return render_page(report, ctx, suite=cc_checks.SUITE, verdict=verdict,
                       before_checks=before_checks)
