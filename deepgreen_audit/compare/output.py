"""A comparison as text (the default), as JSON (`Comparison.to_dict`), and as a figure."""

from __future__ import annotations

import io
import json
import math

import numpy as np

from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.compare.core import METRICS, Comparison

_RULES = {"named": "the stacks named with --control",
          "unchanged": "the stacks whose recorded precision policy and versions did not change"}


def _ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def format_json(comparison: Comparison) -> str:
    """The JSON document, indented, keys in their stable order."""
    return json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False)


def format_text(comparison: Comparison) -> str:
    """The report a reader reads: what differs, the drift band, each stack's verdict, and
    every configuration's ratios."""
    c = comparison
    level = f"{100 * c.confidence:g}%"
    lines = [(f"compare: B/A with A = {c.a.path} ({c.a.runs} runs), B = {c.b.path} "
              f"({c.b.runs} runs)"), "", "what differs:"]
    if not c.differences:
        lines.append("  nothing recorded differs (specification, environment, scope)")
    for d in c.differences:
        who = ", ".join(d.stacks) if d.stacks else "package"
        lines.append(f"  {d.section:<13} {d.item:<22} {who}: {d.a} -> {d.b}")
    lines += ["", f"control group ({_RULES[c.control_rule]}): "
              + (", ".join(c.control) if c.control else "none")]
    lines.append(f"drift band: the range of the control configurations' {level} bootstrap "
                 f"intervals of B/A ({c.resamples} resamples); a configuration is beyond it "
                 "when its whole interval lies outside (a control stack is judged against "
                 "the others' band)")
    for phase in PHASES:
        for metric in METRICS:
            band = c.band(phase, metric)
            text = f"[{band.low:.3f}, {band.high:.3f}] over {band.configurations} " \
                   "configurations" if band else "none (no control stack)"
            lines.append(f"  {phase:<5} {metric:<8} {text}")
    lines += ["", ("per stack (B/A: lowest-highest configuration ratio; beyond: configurations "
                   "beyond the drift):"),
              (f"  {'stack':<18} {'phase':<5} {'energy B/A':<13} {'beyond':<7} "
               f"{'duration B/A':<13} {'beyond':<7} verdict (energy)")]
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    for stack in c.stacks:
        for phase in PHASES:
            if (stack, phase, "energy") not in v.index:
                continue
            e, d = v.loc[(stack, phase, "energy")], v.loc[(stack, phase, "duration")]
            cells = []
            for row in (e, d):
                span = f"{row['ratio_min']:.3f}-{row['ratio_max']:.3f}"
                cells += [f"{span:<13}", f"{row['beyond']}/{row['configurations']:<5}"]
            mark = " (control)" if stack in c.control else ""
            lines.append(f"  {stack:<18} {phase:<5} {cells[0]} {cells[1]} {cells[2]} "
                         f"{cells[3]} {e['verdict']}{mark}")
    lines += ["", f"per configuration (runs A/B; B/A [{level} interval]; * beyond the drift):"]
    for _, row in c.configurations.iterrows():
        parts = []
        for metric in METRICS:
            star = "*" if row[f"{metric}_beyond"] is True else " "
            parts.append(f"{metric} {_ratio(row[f'{metric}_ratio'])} "
                         f"[{_ratio(row[f'{metric}_low'])}, {_ratio(row[f'{metric}_high'])}]{star}")
        name = f"{row['ecosystem']}.{row['architecture']}.{row['dataset']}"
        lines.append(f"  {name:<40} {row['phase']:<5} {row['n_a']}/{row['n_b']}  "
                     + "  ".join(parts))
    beyond = c.beyond_stacks("energy")
    lines += ["", "beyond the drift (energy, every configuration of a phase): "
              + (", ".join(beyond) if beyond else "no stack")]
    lines += [f"note: {note}" for note in c.notes]
    return "\n".join(line.rstrip() for line in lines)


def figure_pdf(comparison: Comparison) -> bytes:
    """Energy ratios B/A with their intervals, one panel per phase, one row per configuration,
    the control group's drift band shaded; a PDF without a creation date (reproducible)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    table = comparison.configurations
    fig, axes = plt.subplots(1, len(PHASES), figsize=(7.0, 0.5 + 0.16 * max(
        1, int((table["phase"] == PHASES[0]).sum()))), squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    colour = {s: cmap(i % 10) for i, s in enumerate(comparison.stacks)}
    for ax, phase in zip(axes[0], PHASES):
        rows = table[table["phase"] == phase].reset_index(drop=True)
        band = comparison.band(phase, "energy")
        if band:
            ax.axvspan(band.low, band.high, color="0.85", lw=0, label="control drift")
        ax.axvline(1.0, color="black", lw=0.6)
        y = np.arange(len(rows))[::-1]
        for k, row in rows.iterrows():
            ratio, low, high = (row[f"energy_{p}"] for p in ("ratio", "low", "high"))
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
        ax.set_xlabel(f"{phase} energy, B/A")
        ax.set_title(phase)
    if comparison.drift:
        axes[0][0].legend(frameon=False, fontsize=6, loc="lower left")
    fig.tight_layout(pad=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="pdf", bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return buffer.getvalue()
