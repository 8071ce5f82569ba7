"""The audit as one self-contained HTML page a reviewer reads, and as JUnit XML for CI.

The page needs nothing at view time: inline CSS, figures as inline PNG (data: URIs), no
script, no font, no link to anywhere (a Content-Security-Policy forbids every fetch, so a
page that tried would fail loudly in the browser's console).  It opens with the package's
identity and the summary, then every check in registry order; a failing or warning finding
shows its message, its evidence table (capped, with the count of the rest) and a figure of
that evidence.  The figures are drawn from the package's tables (`FIGURES`), one per kind,
and each check names the kind that shows its evidence (`FIGURE_OF_CHECK`); a check with no
kind of its own gets the evidence's rows per ecosystem.
"""

from __future__ import annotations

import base64
import html
import io
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from deepgreen_audit.report import Finding, Report

#: Evidence rows shown under a finding; the page says how many more there were.
SHOWN_EVIDENCE_ROWS = 20
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STATUS_COLOURS = {"pass": "#1b7f3b", "fail": "#b3261e", "warn": "#a15c00", "skip": "#5f6368"}


# ---------------------------------------------------------------- figures

def _png(fig) -> str:
    """A matplotlib figure as a data: URI (PNG keeps dense scatters small)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width=8.0, height=3.2, ncols=1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width, height), squeeze=False)


def timeline(ctx) -> str | None:
    """Every run as a bar from start to end, one row per ecosystem: interleaving, gaps and
    windows at a glance."""
    runs = ctx.runs.sort_values("started_at_utc")
    if runs.empty:
        return None
    fig, axes = _figure(height=0.4 * runs["ecosystem"].nunique() + 1.2)
    ax = axes[0][0]
    ecosystems = sorted(runs["ecosystem"].unique())
    # a campaign of weeks would draw hour-long runs as nothing: each bar is at least 0.2 % of it
    span_days = (runs["ended_at_utc"].max() - runs["started_at_utc"].min()).total_seconds() / 86400
    for y, eco in enumerate(ecosystems):
        part = runs[runs["ecosystem"] == eco]
        starts = part["started_at_utc"].dt.tz_localize(None)
        widths = ((part["ended_at_utc"] - part["started_at_utc"]).dt.total_seconds() / 86400
                  ).clip(lower=0.002 * span_days)
        ax.barh([y] * len(part), widths.to_numpy(), left=starts.to_numpy(), height=0.6)
    ax.set_yticks(range(len(ecosystems)), ecosystems)
    ax.set_xlabel("time (UTC, as recorded)")
    ax.set_title("Runs by ecosystem")
    fig.autofmt_xdate()
    return _png(fig)


def _strip(ax, b: pd.DataFrame, values: pd.Series, ecosystems: list[str]) -> None:
    """One jittered column of points per ecosystem."""
    for x, eco in enumerate(ecosystems):
        points = values[b["ecosystem"] == eco].dropna().astype(float)
        jitter = np.random.default_rng(x).uniform(-0.25, 0.25, len(points))
        ax.plot(x + jitter, points, ".", ms=2, alpha=0.4)


def codecarbon_power(ctx) -> str | None:
    """CodeCarbon's reported CPU, GPU and RAM power per block, by ecosystem: a modelled
    constant is a flat line of one value."""
    b = ctx.block_runs
    columns = [c for c in ("codecarbon_cpu_power_w", "codecarbon_gpu_power_w", "codecarbon_ram_power_w")
               if b[c].notna().any()]
    if not columns:
        return None
    fig, axes = _figure(width=9, height=3.2, ncols=len(columns))
    ecosystems = sorted(b["ecosystem"].unique())
    for ax, column in zip(axes[0], columns):
        _strip(ax, b, b[column], ecosystems)
        ax.set_xticks(range(len(ecosystems)), ecosystems, rotation=60, ha="right", fontsize=7)
        ax.set_title(column.removeprefix("codecarbon_").replace("_power_w", " power (W)"), fontsize=9)
    return _png(fig)


def derived_power(ctx) -> str | None:
    """Block-mean GPU power per board from energy / duration (counters, else CodeCarbon), by
    ecosystem, against the board limits the specification lists."""
    from deepgreen_audit.audit.checks.measurement import device_powers

    b = ctx.block_runs
    powers = device_powers(ctx)
    power = powers["GPU (counter)"].fillna(powers["GPU (CodeCarbon)"])
    if power.dropna().empty:
        return None
    fig, axes = _figure()
    ax = axes[0][0]
    ecosystems = sorted(b["ecosystem"].unique())
    _strip(ax, b, power, ecosystems)
    limits = ctx.tolerances.get("gpu_board_power_limit_w", {})
    for model in sorted(set(b["gpu_model"].dropna())):
        if model in limits:
            ax.axhline(limits[model], color="#b3261e", lw=1)
            ax.annotate(f"{model} limit {limits[model]:.0f} W", (0, limits[model]), fontsize=7,
                        color="#b3261e", va="bottom")
    ax.set_xticks(range(len(ecosystems)), ecosystems, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GPU power per board (W)")
    ax.set_title("Derived GPU power against the board limit")
    return _png(fig)


def time_per_sample(ctx) -> str | None:
    """Median train time per sample of each configuration, by ecosystem and dataset, one
    marker per architecture: a mislabelled configuration sits in the other architecture's
    place."""
    from deepgreen_audit.audit.checks.model import config_profiles

    prof = config_profiles(ctx).dropna(subset=["time"]).reset_index()
    if prof.empty:
        return None
    prof["label"] = prof["ecosystem"] + "\n" + prof["dataset"]
    labels = sorted(prof["label"].unique())
    fig, axes = _figure(width=max(8.0, 0.35 * len(labels)), height=3.6)
    ax = axes[0][0]
    for marker, (arch, part) in zip("os^D", prof.groupby("architecture")):
        xs = [labels.index(label) for label in part["label"]]
        ax.plot(xs, np.exp(part["time"]) * 1e3, marker, label=arch, ms=6, alpha=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
    ax.set_ylabel("train ms per sample")
    ax.legend(fontsize=8)
    ax.set_title("Time per sample by configuration and architecture")
    return _png(fig)


def instruments(ctx) -> str | None:
    """CodeCarbon's energy against the counters' for every block that has both, on the
    identity line."""
    b = ctx.blocks
    both = b["energy_j"].notna() & b["codecarbon_energy_j"].notna()
    if not both.any():
        return None
    fig, axes = _figure(width=5, height=4)
    ax = axes[0][0]
    ax.loglog(b.loc[both, "energy_j"], b.loc[both, "codecarbon_energy_j"], ".", ms=2, alpha=0.4)
    lo, hi = b.loc[both, "energy_j"].min(), b.loc[both, "energy_j"].max()
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set_xlabel("counters (J)")
    ax.set_ylabel("CodeCarbon (J)")
    ax.set_title("CodeCarbon against the counters")
    return _png(fig)


#: The figures a page can carry, by kind.
FIGURES = {"timeline": timeline, "codecarbon-power": codecarbon_power,
           "derived-power": derived_power, "time-per-sample": time_per_sample,
           "instruments": instruments}

#: The figure that shows each check's evidence (others: the evidence's rows per ecosystem).
FIGURE_OF_CHECK = {
    "S6.interleaving": "timeline", "S6.contemporaneous": "timeline", "S6.schedule-gaps": "timeline",
    "S6.no-overlap": "timeline", "S6.completeness-runs": "timeline",
    "S6.independent-processes": "timeline",
    "S5.modelled-cpu-power": "codecarbon-power", "S5.power-duration": "codecarbon-power",
    "S5.power-plausible": "derived-power",
    "S1.architecture-identity": "time-per-sample", "S6.phase-work": "time-per-sample",
    "S6.outlier-blocks": "time-per-sample", "S6.warmup": "time-per-sample",
    "S5.short-blocks": "time-per-sample",
    "S5.codecarbon-agreement": "instruments", "S5.codecarbon-duration": "instruments",
    "S5.counter-recompute": "instruments",
}


def evidence_by_ecosystem(finding: Finding, ctx) -> str | None:
    """The evidence rows of a finding counted per ecosystem (or per value of its first
    column): where the finding lies."""
    rows = (finding.details or {}).get("evidence") or []
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    if "ecosystem" not in frame and "run_id" in frame and ctx is not None:
        frame["ecosystem"] = frame["run_id"].map(ctx.runs.set_index("run_id")["ecosystem"])
    key = "ecosystem" if "ecosystem" in frame else frame.columns[0]
    counts = frame[key].astype(str).value_counts().sort_index()
    fig, axes = _figure(width=6, height=0.3 * len(counts) + 1.2)
    ax = axes[0][0]
    ax.barh(range(len(counts)), counts.to_numpy())
    ax.set_yticks(range(len(counts)), counts.index, fontsize=8)
    shown = len(rows)
    total = (finding.details or {}).get("evidence_total", shown)
    ax.set_xlabel(f"evidence rows ({shown} shown of {total})")
    ax.set_title(f"{finding.id}: where the evidence lies", fontsize=9)
    return _png(fig)


# ---------------------------------------------------------------- the page

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#202124;background:#fff}
main{max-width:1100px;margin:0 auto;padding:0 24px 48px}
header{padding:16px 24px;border-bottom:1px solid #dadce0}
h1{font-size:22px;margin:8px 0} h2{font-size:17px;margin:28px 0 8px} h3{font-size:15px;margin:0}
.synthetic{background:#b3261e;color:#fff;font-weight:700;font-size:20px;text-align:center;
 padding:14px;letter-spacing:.04em}
.watermark{position:fixed;top:40%;left:0;width:100%;text-align:center;font-size:120px;font-weight:800;
 color:rgba(179,38,30,.09);transform:rotate(-28deg);pointer-events:none;z-index:0;white-space:nowrap}
table{border-collapse:collapse;font-size:12px;margin:6px 0;max-width:100%;display:block;overflow-x:auto}
th,td{border:1px solid #dadce0;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f1f3f4}
.summary span{display:inline-block;margin-right:14px;font-weight:600}
section.check{border:1px solid #dadce0;border-left:6px solid #5f6368;border-radius:4px;
 padding:8px 12px;margin:8px 0;position:relative;z-index:1;background:rgba(255,255,255,.92)}
.status{font-weight:700;text-transform:uppercase;margin-right:8px}
.meta{color:#5f6368;font-size:12px}
img{max-width:100%;height:auto;display:block;margin:6px 0}
.more{color:#5f6368;font-size:12px}
"""


def _esc(value) -> str:
    return html.escape("" if value is None else str(value))


def _evidence_table(finding: Finding) -> str:
    details = finding.details or {}
    rows = details.get("evidence") or []
    if not rows:
        return ""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    shown = rows[:SHOWN_EVIDENCE_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{_esc(row.get(c))}</td>" for c in columns) + "</tr>"
                   for row in shown)
    total = int(details.get("evidence_total", len(rows)))
    more = (f'<p class="more">and {total - len(shown):,} more row(s) in the JSON report'
            + (" (which keeps the first " f"{len(rows)})" if total > len(rows) else "") + "</p>"
            if total > len(shown) else "")
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    return f'<table class="evidence"><tr>{head}</tr>{body}</table>{more}'


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
        rows.append(("descriptor", str(package.descriptor_path)))
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
    return "<table>" + "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows) + "</table>"


def render_page(report: Report, ctx=None) -> str:
    """The page for `report`; `ctx` (an AuditContext of the same package) draws the figures."""
    cache: dict[str, str | None] = {}

    def figure_of(finding: Finding) -> str | None:
        kind = FIGURE_OF_CHECK.get(finding.id)
        if kind is not None and ctx is not None:
            if kind not in cache:
                cache[kind] = FIGURES[kind](ctx)
            if cache[kind]:
                return cache[kind]
        return evidence_by_ecosystem(finding, ctx)

    counts = report.counts
    sections = []
    for f in report.findings:
        colour = STATUS_COLOURS[f.status]
        body = f'<p>{_esc(f.message)}</p>'
        if f.status in ("fail", "warn"):
            rows = f" &middot; {f.rows_affected:,} {_esc(f.resource or 'row')} row(s) affected" \
                if f.rows_affected is not None else ""
            body += f'<p class="meta">{_esc(f.section)} &middot; severity {_esc(f.severity)}{rows}</p>'
            body += _evidence_table(f) + _explained(f)
            image = figure_of(f)
            if image:
                body += f'<img class="figure" alt="figure of the evidence of {_esc(f.id)}" src="{image}">'
        elif (f.details or {}).get("explained"):
            body += _explained(f)
        sections.append(
            f'<section class="check {f.status}" id="{_esc(f.id)}" data-check="{_esc(f.id)}" '
            f'style="border-left-color:{colour}"><h3><span class="status" style="color:{colour}">'
            f'{f.status}</span>{_esc(f.id)}</h3>{body}</section>')
    package = ctx.package if ctx is not None else None
    banner = ('<div class="synthetic">SYNTHETIC DATA: this package is synthetic; '
              'its numbers are not measurements.</div><div class="watermark">SYNTHETIC DATA</div>'
              if report.synthetic else "")
    finished = ("" if report.finished else
                f'<p><strong>The audit did NOT finish:</strong> {counts["skip"]} check(s) were skipped, '
                "so what they check was not verified.</p>")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{'SYNTHETIC: ' if report.synthetic else ''}Audit of {_esc(report.subject)}</title>
<style>{STYLE}</style></head>
<body>{banner}<header><h1>{'SYNTHETIC DATA: ' if report.synthetic else ''}DeepGreen audit</h1>
{_identity(report, package)}
<p class="summary"><span style="color:{STATUS_COLOURS['pass']}">{counts['pass']} pass</span>
<span style="color:{STATUS_COLOURS['fail']}">{counts['fail']} fail</span>
<span style="color:{STATUS_COLOURS['warn']}">{counts['warn']} warn</span>
<span style="color:{STATUS_COLOURS['skip']}">{counts['skip']} skip</span></p>{finished}
<p class="meta">Generated {generated} by deepgreen audit; checks in registry order (docs/audit.md
says what each means).</p></header>
<main><h2>Checks</h2>
{''.join(sections)}
</main>{banner}</body></html>
"""


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
                          timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    for f in report.findings:
        case = ET.SubElement(suite, "testcase", classname=f"deepgreen.audit.{f.section}", name=f.id,
                             time=f"{f.seconds or 0:.3f}")
        if f.status == "fail":
            ET.SubElement(case, "failure", message=f.message[:500], type=f.severity).text = f.message
        elif f.status == "skip":
            ET.SubElement(case, "skipped", message=f.message[:500])
        elif f.status == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {f.message}"
    if report.synthetic:
        ET.SubElement(suite, "system-out").text = report.notice or "SYNTHETIC DATA"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
