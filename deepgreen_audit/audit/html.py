"""The audit as one self-contained HTML page a reviewer reads, and as JUnit XML for CI.

The page needs nothing at view time: inline CSS, figures as inline PNG and the evidence as
CSV (data: URIs), no script, no font, no link to anywhere (a Content-Security-Policy forbids
every fetch, so a page that tried would fail loudly in the browser's console).

It opens with the verdict: each failing or warning check on one line, linked to its section,
split by `Finding.basis` into what the data contradicts and what it does not record (so
cannot be verified); then the package's identity and the counts; then every check, grouped
the same way (contradicted, not recorded, skipped, passed), with its description from the
registry.  A finding's evidence folds away (`<details>`) when long; the page shows its first
rows and embeds all of them as a CSV download, as the JSON report carries all of them.

A figure is drawn only where it shows what convicted the rows (`FIGURE_OF_CHECK`): the values
the check tested, the flagged ones marked, the limit drawn.  Each figure is drawn once, under
the first check (in page order) that it shows; the other checks it shows link to it.  A
finding that is only not recorded has no values, so no figure.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import numpy as np

from deepgreen_audit.columnar.frame import isin, seconds
from deepgreen_audit.report import CODES, NOT_APPLICABLE, Finding, Report

#: Evidence rows shown under a finding; all of them are in its CSV and in the JSON report.
SHOWN_EVIDENCE_ROWS = 20
#: Evidence of at most this many rows shows unfolded (for a contradicted finding).
OPEN_EVIDENCE_ROWS = 5
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STATUS_COLOURS = {"pass": "#1b7f3b", "fail": "#b3261e", "warn": "#a15c00", "skip": "#5f6368"}
FLAGGED, FINE = "#b3261e", "#9aa0a6"
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


# ---------------------------------------------------------------- figures

def _png(fig) -> str:
    """A matplotlib figure as a data: URI (PNG keeps dense scatters small), at the screen's
    96 dpi so that its 9-10 pt labels read at 100 % zoom."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width=8.0, height=3.2, ncols=1, nrows=1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
                         "legend.fontsize": 9, "axes.titlesize": 10})
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)


def _flagged_of(report: Report, check_id: str, column: str) -> set:
    """The values of `column` in the evidence of a failing or warning `check_id`."""
    try:
        f = report.finding(check_id)
    except KeyError:
        return set()
    if f.status not in ("fail", "warn"):
        return set()
    return {row.get(column) for row in (f.details or {}).get("evidence") or []}


def timeline(ctx, report) -> tuple[str, str] | None:
    """Every run as a bar from start to end, one row per ecosystem: interleaving, gaps and
    windows at a glance; the runs S6.schedule-gaps and S6.contemporaneous flag in red."""
    runs = ctx.runs
    if runs.empty:
        return None
    # by start (a required cell); of runs that start together, quicksort's order (pandas' too)
    # decides which bar is drawn over the other, as it always did
    runs = runs.take(np.argsort(runs["started_at_utc"].view(np.int64), kind="quicksort"))
    run_ids, ecosystem = runs["run_id"], runs["ecosystem"]
    started, ended = runs["started_at_utc"], runs["ended_at_utc"]
    contemporaneous = _flagged_of(report, "S6.contemporaneous", "ecosystem")
    flagged = (_flagged_of(report, "S6.schedule-gaps", "run_id")
               | {r for r, eco in zip(run_ids, ecosystem) if eco in contemporaneous})
    ecosystems = sorted(set(ecosystem))
    fig, axes = _figure(width=10, height=0.4 * len(ecosystems) + 1.4)
    ax = axes[0][0]
    # a campaign of weeks would draw hour-long runs as nothing: each bar is at least 0.2 % of it
    span_days = float(seconds(ended.max() - started.min())) / 86400
    widths = np.maximum(seconds(ended - started) / 86400, 0.004 * span_days)
    for y, eco in enumerate(ecosystems):
        mine = ecosystem == eco
        colours = [FLAGGED if r in flagged else "#1a73e8" for r in run_ids[mine]]
        ax.barh([y] * int(mine.sum()), widths[mine], left=started[mine], height=0.6, color=colours)
    ax.set_yticks(range(len(ecosystems)), ecosystems)
    ax.set_xlabel("time (UTC, as recorded)")
    title = "Runs by ecosystem" + (" (red: runs flagged by S6.schedule-gaps or "
                                   "S6.contemporaneous)" if flagged else "")
    ax.set_title(title)
    fig.autofmt_xdate()
    return _png(fig), title


def _strip(ax, ecosystem: np.ndarray, values: np.ndarray, ecosystems: list[str],
           flagged: np.ndarray | None = None) -> None:
    """One jittered column of points per ecosystem (`ecosystem`: each value's); `flagged`
    points in red, drawn last."""
    flagged = np.zeros(len(values), dtype=bool) if flagged is None else flagged
    for x, eco in enumerate(ecosystems):
        mine = ecosystem == eco
        for mask, colour, size in ((~flagged, FINE, 2), (flagged, FLAGGED, 3)):
            points = values[mine & mask]
            points = points[~np.isnan(points)]
            jitter = np.random.default_rng(x).uniform(-0.25, 0.25, len(points))
            ax.plot(x + jitter, points, ".", ms=size, alpha=0.6, color=colour)
    ax.set_xticks(range(len(ecosystems)), ecosystems, rotation=35, ha="right")


def codecarbon_power(ctx, report) -> tuple[str, str] | None:
    """CodeCarbon's reported CPU power per block, by ecosystem, the runs S5.modelled-cpu-power
    flags in red: a modelled constant is a flat line of one value."""
    b = ctx.block_runs
    power = b["codecarbon_cpu_power_w"]
    if np.isnan(power).all():
        return None
    fig, axes = _figure(width=8, height=3.6)
    ax = axes[0][0]
    flagged = isin(b["run_id"], _flagged_of(report, "S5.modelled-cpu-power", "run_id"))
    _strip(ax, b["ecosystem"], power, sorted(set(b["ecosystem"])), flagged)
    ax.set_ylabel("CPU power (W)")
    title = "CodeCarbon's reported CPU power per block (red: runs with a modelled power)"
    ax.set_title(title)
    return _png(fig), title


def power_plausible(ctx, report) -> tuple[str, str] | None:
    """Every device power S5.power-plausible tests that broke its range somewhere, derived and
    reported alike (one panel each, the same device's other source beside it): the blocks out
    of range in red, the range's bounds as lines."""
    from deepgreen_audit.audit.checks.measurement import power_bounds

    bounds = power_bounds(ctx)
    failed = {name.split()[0] for name, (_, _, _, low, high) in bounds.items() if (low | high).any()}
    shown = [name for name, (power, *_rest) in bounds.items()
             if name.split()[0] in failed and not np.isnan(power).all()]
    if not shown:
        return None
    b = ctx.block_runs
    ecosystem = b["ecosystem"]
    ecosystems = sorted(set(ecosystem))
    ncols = min(2, len(shown))
    nrows = -(-len(shown) // ncols)
    fig, axes = _figure(width=11, height=3.4 * nrows, ncols=ncols, nrows=nrows)
    flat = [ax for row in axes for ax in row]
    captions = []
    for ax, name in zip(flat, shown):
        power, lo, hi, low, high = bounds[name]
        out = power[low | high]
        captions.append(f"{name}: {len(out):,} out of range" + (
            f" ({out.min():.3g}-{out.max():.3g} W)" if len(out) else ""))
        positive = power[np.isfinite(power) & (power > 0)]
        log = len(positive) and positive.max() / max(min(positive.min(), lo or positive.min()), 1e-9) > 50
        # a log scale cannot show 0 W, the commonest broken reading: it sits on the panel's floor
        floor = min(positive.min(), lo or positive.min()) / 3 if log else np.nan
        _strip(ax, ecosystem, np.where(power > 0, power, floor) if log else power, ecosystems,
               low | high)
        ax.axhline(lo, color=FLAGGED, lw=1, ls="--")
        limits = np.atleast_1d(hi)  # one bound, or each block's (its board's limit)
        for limit in np.unique(limits[~np.isnan(limits)]):
            ax.axhline(limit, color=FLAGGED, lw=1)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel("W")
        n = int((low | high).sum())
        zeros = int((power <= 0).sum()) if log else 0
        ax.set_title((f"{name}: {n:,} block(s) out of range" if n else f"{name}: all in range")
                     + (f"\n({zeros:,} at 0 W or less, drawn at {floor:.2g} W)" if zeros else ""))
    for ax in flat[len(shown):]:
        ax.set_visible(False)
    title = ("Device power per block against its plausible range (dashed: the lower bound, "
             "solid: the upper; red: out of range)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig), f"{title}: " + "; ".join(captions)


def power_duration(ctx, report) -> tuple[str, str] | None:
    """The energy CodeCarbon reported against constant power x duration for every reading
    S5.power-duration flags, on the identity line and between the tolerance's."""
    rows = _evidence_rows(report, "S5.power-duration")
    if not rows or not {"found", "expected"} <= {k for row in rows for k in row}:
        return None
    found, expected = (np.array([row.get(k) for row in rows], dtype=float) for k in ("found", "expected"))
    kept = (found > 0) & (expected > 0)
    if not kept.any():
        return None
    found, expected = found[kept], expected[kept]
    by_ecosystem = any("ecosystem" in row for row in rows)
    fig, axes = _figure(width=7, height=4.6)
    ax = axes[0][0]
    if by_ecosystem:
        ecosystem = np.array([row.get("ecosystem") for row in rows], dtype=object)[kept]
        for eco in sorted({e for e in ecosystem if e is not None}):
            mine = ecosystem == eco
            ax.loglog(expected[mine], found[mine], ".", ms=4, alpha=0.7, label=eco or None)
    else:
        ax.loglog(expected, found, ".", ms=4, alpha=0.7, label=None)
    lo, hi = min(found.min(), expected.min()), max(found.max(), expected.max())
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    tol = float(ctx.tolerances["power_duration_relative_tolerance"])
    for factor in (1 - tol, 1 + tol):
        ax.plot([lo, hi], [lo * factor, hi * factor], "k--", lw=0.6)
    ax.set_xlabel("constant power x duration (J)")
    ax.set_ylabel("energy CodeCarbon reported (J)")
    title = (f"Readings that break energy = power x duration (line: equality; dashed: the "
             f"tolerance, ±{tol:.0%})")
    ax.set_title(title)
    if by_ecosystem:
        ax.legend(fontsize=8, markerscale=2)
    return _png(fig), title


def _evidence_rows(report: Report, check_id: str) -> list[dict]:
    """The evidence rows of `check_id`'s finding (none when the report lacks it)."""
    try:
        return (report.finding(check_id).details or {}).get("evidence") or []
    except KeyError:
        return []


def time_per_sample(ctx, report) -> tuple[str, str] | None:
    """Median train time per sample of each configuration, by ecosystem and dataset, one
    marker per architecture: a mislabelled configuration sits in the other architecture's
    place (the ones S1.architecture-identity flags ringed in red)."""
    from deepgreen_audit.audit.checks.model import config_profiles

    prof = config_profiles(ctx)
    prof = prof.take(~np.isnan(prof["time"]))
    if prof.empty:
        return None
    ecosystem, architecture, dataset = prof["ecosystem"], prof["architecture"], prof["dataset"]
    time = prof["time"]
    label = np.array([f"{e} / {d}" for e, d in zip(ecosystem, dataset)], dtype=object)
    labels = sorted(set(label))
    flagged = _flagged_of(report, "S1.architecture-identity", "configuration")
    fig, axes = _figure(width=max(9.0, 0.32 * len(labels)), height=4.6)
    ax = axes[0][0]
    for marker, arch in zip("os^D", sorted({a for a in architecture if a is not None})):
        mine = architecture == arch
        xs = [labels.index(x) for x in label[mine]]
        ax.plot(xs, np.exp(time[mine]) * 1e3, marker, label=arch, ms=6, alpha=0.8)
    ringed = isin(np.array([f"{e}/{a}/{d}" for e, a, d in zip(ecosystem, architecture, dataset)],
                             dtype=object), flagged)
    if ringed.any():
        ax.plot([labels.index(x) for x in label[ringed]], np.exp(time[ringed]) * 1e3,
                "o", ms=14, mfc="none", mec=FLAGGED, mew=2, label="flagged label")
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right")
    ax.set_ylabel("train ms per sample")
    ax.legend()
    title = "Time per sample by configuration and architecture" + (
        f" (ringed: {', '.join(sorted(flagged))}, flagged by S1.architecture-identity)" if ringed.any() else "")
    ax.set_title("Time per sample by configuration and architecture")
    return _png(fig), title


def instruments(ctx, report) -> tuple[str, str] | None:
    """CodeCarbon's energy against the counters' for every block that has both, on the
    identity line."""
    b = ctx.blocks
    both = ~np.isnan(b["energy_j"]) & ~np.isnan(b["codecarbon_energy_j"])
    if not both.any():
        return None
    counters, codecarbon = b["energy_j"][both], b["codecarbon_energy_j"][both]
    fig, axes = _figure(width=5, height=4)
    ax = axes[0][0]
    ax.loglog(counters, codecarbon, ".", ms=2, alpha=0.4)
    lo, hi = counters.min(), counters.max()
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set_xlabel("counters (J)")
    ax.set_ylabel("CodeCarbon (J)")
    ax.set_title("CodeCarbon against the counters")
    return _png(fig), "CodeCarbon's energy against the counters' per block (line: equality)"


#: The figures a page can carry, by kind: fn(ctx, report) -> (data: URI, what it shows) or None.
FIGURES = {"timeline": timeline, "codecarbon-power": codecarbon_power,
           "power-plausible": power_plausible, "power-duration": power_duration,
           "time-per-sample": time_per_sample, "instruments": instruments}
#: Each figure's caption, which the checks that link to it name.
FIGURE_TITLES = {"timeline": "the runs' timeline", "codecarbon-power": "CodeCarbon's CPU power",
                 "power-plausible": "the device powers against their ranges",
                 "power-duration": "energy against power x duration",
                 "time-per-sample": "time per sample by configuration",
                 "instruments": "CodeCarbon against the counters"}

#: The figure that shows each check's evidence; a check not listed has none (its table is
#: the evidence: a count per ecosystem would add nothing).
FIGURE_OF_CHECK = {
    "S6.interleaving": "timeline", "S6.contemporaneous": "timeline", "S6.schedule-gaps": "timeline",
    "S6.no-overlap": "timeline",
    "S5.modelled-cpu-power": "codecarbon-power", "S5.power-duration": "power-duration",
    "S5.power-plausible": "power-plausible",
    "S1.architecture-identity": "time-per-sample",
    "S5.codecarbon-agreement": "instruments", "S5.codecarbon-duration": "instruments",
    "S5.counter-recompute": "instruments",
}


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
.verdict ul.logs{font-size:14px;columns:2}
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
summary{cursor:pointer;color:#1a73e8;font-size:13px}
img{max-width:100%;height:auto;display:block;margin:6px 0}
.more{color:#5f6368;font-size:12px}
"""


def _esc(value) -> str:
    return html.escape("" if value is None else str(value))


def _csv_uri(rows: list[dict]) -> str:
    """All the evidence rows as a CSV data: URI (a download that needs no fetch)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    cells = [_csv_column([row.get(c) for row in rows]) for c in columns]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(zip(*cells))
    return "data:text/csv;charset=utf-8;base64," + base64.b64encode(buffer.getvalue().encode("utf-8")).decode("ascii")


def _csv_column(values: list) -> list[str]:
    """One evidence column's CSV cells, typed as a table's column (so the file is the one pandas
    wrote before): numbers with an empty cell or a fraction among them are floats (3 as 3.0),
    anything else is text, an empty cell is empty."""
    present = [v for v in values if v is not None]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    floats = numbers and bool(present) and (len(present) < len(values)
                                      or any(isinstance(v, float) for v in present))
    return ["" if v is None else repr(float(v)) if floats else str(v) for v in values]


def _evidence_table(finding: Finding) -> str:
    """The first rows of the finding's evidence, folded when long or only unrecorded, with
    every row a click away as CSV (the link stays in sight when the rows are folded)."""
    rows = (finding.details or {}).get("evidence") or []
    if not rows:
        return ""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    shown = rows[:SHOWN_EVIDENCE_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{_esc(row.get(c))}</td>" for c in columns) + "</tr>"
                   for row in shown)
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    total = len(rows)
    name = f"{finding.id}-evidence.csv"
    more = (f'<p class="more">{total - len(shown):,} more row(s) than the table\'s {len(shown)}: '
            f'<a class="csv" download="{_esc(name)}" href="{_csv_uri(rows)}">{_esc(name)}</a> '
            f'has all {total:,} (embedded in this page; so does the JSON report, --out)</p>'
            if total > len(shown) else "")
    opened = " open" if group_of(finding) == "contradicted" and total <= OPEN_EVIDENCE_ROWS else ""
    return (f'<details class="evidence"{opened}><summary>evidence: {total:,} row(s)'
            f'{f", the first {len(shown)} here" if total > len(shown) else ""}</summary>'
            f'<div class="scroll"><table class="evidence"><tr>{head}</tr>{body}</table></div>'
            f'</details>{more}')


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
    return ('<div class="scroll"><table>' + "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>"
                                                   for k, v in rows) + "</table></div>")


def descriptions(suite: str = "audit") -> dict[str, str]:
    """What each check of `suite` checks (its docstring in the registry), the audit's checks
    it reuses, and what each validation code means."""
    from deepgreen_audit.suite.registry import REGISTRY, registered_checks

    docs = {c.id: c.doc for c in registered_checks("audit")} if suite == "audit" else {
        c.id: c.doc for c in REGISTRY["audit"].values()}
    if suite != "audit":
        docs.update({c.id: c.doc for c in registered_checks(suite)})
    return {**CODES, **docs}


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
    docs = descriptions(suite)
    groups: dict[str, list[Finding]] = {key: [] for key, _ in GROUPS}
    for f in report.findings:
        groups[group_of(f)].append(f)
    drawn: dict[str, str] = {}

    def figure_of(finding: Finding) -> str:
        """The figure's <img> under the first check it shows, a link to it under the others."""
        kind = FIGURE_OF_CHECK.get(finding.id)
        if kind is None or ctx is None or group_of(finding) != "contradicted":
            return ""
        if kind in drawn:
            return (f'<p class="meta">Figure: {FIGURE_TITLES[kind]}, under '
                    f'<a href="#figure-{kind}">{_esc(drawn[kind])}</a>.</p>') if drawn[kind] else ""
        drawing = FIGURES[kind](ctx, report)
        drawn[kind] = finding.id if drawing else ""
        if not drawing:
            return ""
        image, caption = drawing
        return (f'<img class="figure" id="figure-{kind}" data-figure="{kind}" '
                f'alt="{_esc(caption)}" title="{_esc(caption)}" src="{image}">')

    sections = []
    for key, heading in GROUPS:
        if not groups[key]:
            continue
        sections.append(f"<h2>{heading} ({len(groups[key])})</h2>")
        for f in groups[key]:
            colour = STATUS_COLOURS[f.status]
            body = f"<p>{_esc(f.message)}</p>"
            if docs.get(f.id):
                body += f'<p class="doc">Checks: {_esc(docs[f.id])}</p>'
            if f.status in ("fail", "warn"):
                rows = f" &middot; {f.rows_affected:,} {_esc(f.resource or 'row')} row(s) affected" \
                    if f.rows_affected is not None else ""
                body += f'<p class="meta">{_esc(f.section)} &middot; severity {_esc(f.severity)}{rows}</p>'
                body += figure_of(f) + _evidence_table(f) + _explained(f)
            elif (f.details or {}).get("explained"):
                body += _explained(f)
            sections.append(
                f'<section class="check {f.status}" id="{_esc(f.id)}" data-check="{_esc(f.id)}" '
                f'style="border-left-color:{colour}"><h3><span class="status" style="color:{colour}">'
                f'{f.status}</span>{_esc(f.id)}</h3>{body}</section>')
    counts = report.counts
    package = ctx.package if ctx is not None else None
    banner = ('<div class="synthetic">SYNTHETIC DATA: this package is synthetic; '
              'its numbers are not measurements.</div><div class="watermark">SYNTHETIC DATA</div>'
              if report.synthetic else "")
    finished = ("" if report.finished else
                f'<p><strong>The audit did NOT finish:</strong> {len(report.not_verified)} check(s) '
                "could not run, so what they check was not verified.</p>")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    words = "PASSED" if report.valid else "FAILED"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{'SYNTHETIC: ' if report.synthetic else ''}Audit of {_esc(report.subject)}</title>
<style>{STYLE}</style></head>
<body>{banner}<header><h1>{'SYNTHETIC DATA: ' if report.synthetic else ''}DeepGreen audit
<span style="color:{STATUS_COLOURS['pass' if report.valid else 'fail']}">{words}</span></h1>
{_verdict(report, groups, verdict)}
<p class="summary"><span style="color:{STATUS_COLOURS['pass']}">{counts['pass']} pass</span>
<span style="color:{STATUS_COLOURS['fail']}">{counts['fail']} fail</span>
<span style="color:{STATUS_COLOURS['warn']}">{counts['warn']} warn</span>
<span style="color:{STATUS_COLOURS['skip']}">{counts['skip']} skip{
    f" ({len(report.not_applicable)} not applicable)" if report.not_applicable else ""}</span></p>{finished}
{_identity(report, package)}
<p class="meta">Generated {generated} by deepgreen audit.  "Not recorded": every row the check
failed lacks the value it checks (an empty cell, a missing reading), so nothing contradicts the
specification but nothing shows it was met; "contradicted": a recorded value breaks it.</p></header>
<main>{before_checks}
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
                          timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    for f in report.findings:
        case = ET.SubElement(suite, "testcase", classname=f"deepgreen.audit.{f.section}", name=f.id,
                             time=f"{f.seconds or 0:.3f}")
        if f.status == "fail":
            ET.SubElement(case, "failure", message=f.message[:500], type=f.severity).text = f.message
        elif f.status == "skip":
            said = f"not applicable: {f.message}" if f.basis == NOT_APPLICABLE else f.message
            ET.SubElement(case, "skipped", message=said[:500])
        elif f.status == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {f.message}"
    if report.synthetic:
        ET.SubElement(suite, "system-out").text = report.notice or "SYNTHETIC DATA"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
