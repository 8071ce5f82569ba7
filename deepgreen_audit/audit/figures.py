"""The campaign audit's figures, each declared by the checks whose evidence it shows
(`check(..., figure=...)`): the values the check tested, the flagged ones marked, the limit
drawn.  Drawn only when the page is written; matplotlib is imported then."""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit.derived import config_profiles, power_bounds
from deepgreen_audit.columnar.frame import isin, seconds
from deepgreen_audit.page.figures import FINE, FLAGGED, figure_png, new_figure
from deepgreen_audit.report import Report
from deepgreen_audit.suite.registry import Figure


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
    windows at a glance; the runs S6.schedule-gaps, S6.contemporaneous and
    S6.calibration-window flag in red."""
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
               | _flagged_of(report, "S6.calibration-window", "run_id")
               | {r for r, eco in zip(run_ids, ecosystem) if eco in contemporaneous})
    ecosystems = sorted(set(ecosystem))
    fig, axes = new_figure(width=10, height=0.4 * len(ecosystems) + 1.4)
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
    title = "Runs by ecosystem" + (" (red: runs flagged by S6.schedule-gaps, "
                                   "S6.contemporaneous or S6.calibration-window)" if flagged else "")
    ax.set_title(title)
    fig.autofmt_xdate()
    return figure_png(fig), title


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
    fig, axes = new_figure(width=8, height=3.6)
    ax = axes[0][0]
    flagged = isin(b["run_id"], _flagged_of(report, "S5.modelled-cpu-power", "run_id"))
    _strip(ax, b["ecosystem"], power, sorted(set(b["ecosystem"])), flagged)
    ax.set_ylabel("CPU power (W)")
    title = "CodeCarbon's reported CPU power per block (red: runs with a modelled power)"
    ax.set_title(title)
    return figure_png(fig), title


def power_plausible(ctx, report) -> tuple[str, str] | None:
    """Every device power S5.power-plausible tests that broke its range somewhere, derived and
    reported alike (one panel each, the same device's other source beside it): the blocks out
    of range in red, the range's bounds as lines."""
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
    fig, axes = new_figure(width=11, height=3.4 * nrows, ncols=ncols, nrows=nrows)
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
    return figure_png(fig), f"{title}: " + "; ".join(captions)


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
    fig, axes = new_figure(width=7, height=4.6)
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
    tol = float(ctx.tolerances.power_duration_relative_tolerance)
    for factor in (1 - tol, 1 + tol):
        ax.plot([lo, hi], [lo * factor, hi * factor], "k--", lw=0.6)
    ax.set_xlabel("constant power x duration (J)")
    ax.set_ylabel("energy CodeCarbon reported (J)")
    title = (f"Readings that break energy = power x duration (line: equality; dashed: the "
             f"tolerance, ±{tol:.0%})")
    ax.set_title(title)
    if by_ecosystem:
        ax.legend(fontsize=8, markerscale=2)
    return figure_png(fig), title


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
    prof = config_profiles(ctx)
    prof = prof.take(~np.isnan(prof["time"]))
    if prof.empty:
        return None
    ecosystem, architecture, dataset = prof["ecosystem"], prof["architecture"], prof["dataset"]
    time = prof["time"]
    label = np.array([f"{e} / {d}" for e, d in zip(ecosystem, dataset)], dtype=object)
    labels = sorted(set(label))
    flagged = _flagged_of(report, "S1.architecture-identity", "configuration")
    fig, axes = new_figure(width=max(9.0, 0.32 * len(labels)), height=4.6)
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
    return figure_png(fig), title


def instruments(ctx, report) -> tuple[str, str] | None:
    """CodeCarbon's energy against the counters' for every block that has both, on the
    identity line."""
    b = ctx.blocks
    both = ~np.isnan(b["energy_j"]) & ~np.isnan(b["codecarbon_energy_j"])
    if not both.any():
        return None
    counters, codecarbon = b["energy_j"][both], b["codecarbon_energy_j"][both]
    fig, axes = new_figure(width=5, height=4)
    ax = axes[0][0]
    ax.loglog(counters, codecarbon, ".", ms=2, alpha=0.4)
    lo, hi = counters.min(), counters.max()
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set_xlabel("counters (J)")
    ax.set_ylabel("CodeCarbon (J)")
    ax.set_title("CodeCarbon against the counters")
    return figure_png(fig), "CodeCarbon's energy against the counters' per block (line: equality)"


#: Each figure: its key (the page's anchor), its caption, what draws it.
TIMELINE = Figure("timeline", "the runs' timeline", timeline)
CODECARBON_POWER = Figure("codecarbon-power", "CodeCarbon's CPU power", codecarbon_power)
POWER_PLAUSIBLE = Figure("power-plausible", "the device powers against their ranges", power_plausible)
POWER_DURATION = Figure("power-duration", "energy against power x duration", power_duration)
TIME_PER_SAMPLE = Figure("time-per-sample", "time per sample by configuration", time_per_sample)
INSTRUMENTS = Figure("instruments", "CodeCarbon against the counters", instruments)
