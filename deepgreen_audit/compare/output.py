"""A comparison as text (the default), as JSON (`Comparison.to_dict`), and as a figure."""

from __future__ import annotations

import math

import numpy as np

from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.compare.core import METRICS, Comparison
from deepgreen_audit.safe import figure_bytes, json_text

_RULES = {"named": "the stacks named with --control",
          "unchanged": "the stacks whose recorded precision policy and versions did not change"}


def _span(low: float | None, high: float | None) -> str:
    """A stack's lowest-highest ratio, or that it has none (never NaN)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "not compared"
    return f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f}-{high:.3f}"


def _configuration_ratio(row, metric: str) -> str:
    """One configuration's ratio with its interval and star, or that it has none."""
    if math.isnan(row[f"{metric}_ratio"]):
        return f"{metric} not compared"
    star = "*" if row[f"{metric}_beyond"] is True else " "
    return (f"{metric} {row[f'{metric}_ratio']:.3f} "
            f"[{row[f'{metric}_low']:.3f}, {row[f'{metric}_high']:.3f}]{star}")


def _energy_line(label: str, side) -> str:
    state = "measured" if side.energy.measured else f"not measured: {side.energy.how}"
    return f"  {label}: counter energy {state}"


def format_json(comparison: Comparison) -> str:
    """The JSON document, indented, keys in their stable order."""
    return json_text(comparison.to_dict())


def format_text(comparison: Comparison) -> str:
    """The report a reader reads: what differs, the drift band, each stack's verdict, and
    every configuration's ratios."""
    c = comparison
    level = f"{100 * c.confidence:g}%"
    lines = [(f"compare: B/A with A = {c.a.path} ({c.a.runs} runs), B = {c.b.path} "
              f"({c.b.runs} runs)"), _energy_line("A", c.a), _energy_line("B", c.b)]
    lines += [f"note: {note}" for note in c.notes]
    lines += ["", "what differs:"]
    if not c.differences:
        lines.append("  nothing recorded differs (specification, environment, scope)")
    for d in c.differences:
        who = ", ".join(d.stacks) if d.stacks else "package"
        lines.append(f"  {d.section:<13} {d.item:<22} {who}: {d.a} -> {d.b}")
    lines += ["", f"control group ({_RULES[c.control_rule]}): "
              + (", ".join(c.control) if c.control else f"none ({c.no_control()})")]
    lines.append(f"drift band: the range of the control configurations' {level} bootstrap "
                 f"intervals of B/A ({c.resamples} resamples); a configuration is beyond it "
                 "when its whole interval lies outside (a control stack is judged against "
                 "the others' band)")
    for phase in PHASES:
        for metric in METRICS:
            band = c.band(phase, metric)
            text = f"[{band.low:.3f}, {band.high:.3f}] over {band.configurations} " \
                   "configurations" if band else f"none: {c.no_band(phase, metric)}"
            lines.append(f"  {phase:<5} {metric:<8} {text}")
    lines += ["", ("per stack (B/A: lowest-highest configuration ratio; beyond: configurations "
                   "beyond the drift):"),
              (f"  {'stack':<18} {'phase':<5} {'energy B/A':<13} {'beyond':<7} "
               f"{'duration B/A':<13} {'beyond':<7} verdict ({c.primary})")]
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    for stack in c.stacks:
        for phase in PHASES:
            if (stack, phase, "energy") not in v.index:
                continue
            cells = []
            for metric in METRICS:
                row = v.loc[(stack, phase, metric)]
                beyond = (f"{row['beyond']}/{row['configurations']}"
                          if row["verdict"] != "not-compared" else "-")
                cells += [f"{_span(row['ratio_min'], row['ratio_max']):<13}", f"{beyond:<7}"]
            mark = " (control)" if stack in c.control else ""
            lines.append(f"  {stack:<18} {phase:<5} {' '.join(cells)} "
                         f"{v.loc[(stack, phase, c.primary), 'verdict']}{mark}")
    if not c.shared:
        lines.append("  (no configuration shared)")
    lines += ["", f"per configuration (runs A/B; B/A [{level} interval]; * beyond the drift):"]
    for _, row in c.configurations.iterrows():
        name = f"{row['ecosystem']}.{row['architecture']}.{row['dataset']}"
        lines.append(f"  {name:<40} {row['phase']:<5} {row['n_a']}/{row['n_b']}  "
                     + "  ".join(_configuration_ratio(row, metric) for metric in METRICS))
    if not c.shared:
        lines.append("  (no configuration shared)")
    lines += ["", _beyond_line(c)]
    return "\n".join(line.rstrip() for line in lines)


def _beyond_line(c: Comparison) -> str:
    """The summary: the stacks beyond the drift in the primary metric, named as such."""
    if not c.shared:
        return "beyond the drift: nothing compared (the packages share no configuration)"
    beyond = c.beyond_stacks(c.primary)
    other = "" if c.primary == "energy" else "; energy not compared"
    return (f"beyond the drift ({c.primary}, every configuration of a phase{other}): "
            + (", ".join(beyond) if beyond else "no stack"))


def figure_pdf(comparison: Comparison) -> bytes:
    """The primary metric's ratios B/A (energy, else duration: the axis says which) with their
    intervals, one panel per phase, one row per configuration, the control group's drift band
    shaded; a PDF without a creation date (reproducible).  Two packages that share no
    configuration get a figure that says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not comparison.shared:
        fig, ax = plt.subplots(figsize=(7.0, 1.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "the packages share no configuration: no ratio B/A to draw",
                ha="center", va="center", fontsize=8)
        return _pdf(fig)
    table = comparison.configurations
    fig, axes = plt.subplots(1, len(PHASES), figsize=(7.0, 0.5 + 0.16 * max(
        1, int((table["phase"] == PHASES[0]).sum()))), squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    colour = {s: cmap(i % 10) for i, s in enumerate(comparison.stacks)}
    metric = comparison.primary
    for ax, phase in zip(axes[0], PHASES):
        _panel(ax, comparison, table[table["phase"] == phase].reset_index(drop=True), phase,
               metric, colour)
    if any(b.metric == metric for b in comparison.drift):
        axes[0][0].legend(frameon=False, fontsize=6, loc="lower left")
    fig.tight_layout(pad=0.3)
    return _pdf(fig)


def _panel(ax, comparison: Comparison, rows, phase: str, metric: str, colour: dict) -> None:
    """One phase's ratios of `metric` with their intervals and the drift band."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    band = comparison.band(phase, metric)
    if band:
        ax.axvspan(band.low, band.high, color="0.85", lw=0, label="control drift")
    ax.axvline(1.0, color="black", lw=0.6)
    y = np.arange(len(rows))[::-1]
    for k, row in rows.iterrows():
        ratio, low, high = (row[f"{metric}_{p}"] for p in ("ratio", "low", "high"))
        if math.isnan(ratio):
            continue
        ax.errorbar([ratio], [y[k]], xerr=[[ratio - low], [high - ratio]], fmt="o", ms=3,
                    lw=1.0, color=colour[row["ecosystem"]],
                    mfc="white" if row["ecosystem"] in comparison.control else None)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['ecosystem']} {r['architecture']} {r['dataset']}"
                        for _, r in rows.iterrows()], fontsize=5)
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ticks = sorted({1.0, *(float(f"{t:.2g}") for t in np.geomspace(low, high, 5)[1:-1])})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"{phase} {metric}, B/A")
    ax.set_title(phase)


def _pdf(fig) -> bytes:
    import matplotlib.pyplot as plt

    pdf = figure_bytes(fig, format="pdf", bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return pdf
