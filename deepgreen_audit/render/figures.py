"""The paper's figures (matplotlib, PDF), drawn from the analysis frames.

PDFs are written without a creation date, so the same package gives the
same bytes.  Colours follow the ecosystems' order in the specification.  A figure of a
quantity the package did not measure is not drawn (its function returns None, and
paper.tex tests the conditional of that quantity before it includes the file).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from deepgreen_audit.analysis import Design, Results  # noqa: E402
from deepgreen_audit.analysis.data import PHASES  # noqa: E402
from deepgreen_audit.analysis.labels import DISPLAY  # noqa: E402
from deepgreen_audit.analysis.values import SCALES, scaled  # noqa: E402
from deepgreen_audit.safe import figure_bytes  # noqa: E402

#: The axis words of each column the first figure may draw, and the unit names of SCALES.
AXIS_WORDS = {"energy_j": "energy", "duration_s": "duration"}
UNIT_NAMES = {r"\joule": "J", r"\kilo\joule": "kJ", r"\mega\joule": "MJ", r"\giga\joule": "GJ",
              r"\second": "s", r"\minute": "min", r"\hour": "h"}

plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "legend.fontsize": 7,
                     "axes.spines.top": False, "axes.spines.right": False})


def _colours(design: Design) -> dict:
    cmap = plt.get_cmap("tab10")
    return {eco: cmap(i % 10) for i, eco in enumerate(design.ecosystems)}


def _pdf(fig) -> bytes:
    pdf = figure_bytes(fig, format="pdf", bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return pdf


def _axis_unit(column: str, values: np.ndarray) -> tuple[str, float]:
    """(unit name, factor from the base unit) in which the smallest value is 1 or more."""
    positive = values[values > 0]
    unit = scaled(column, float(positive.min()) if positive.size else 1.0, "").unit or ""
    return UNIT_NAMES[unit], dict(SCALES[column])[unit]


def energy_per_cell(results: Results, design: Design) -> bytes:
    """Each run's phase energy (its phase duration where the package measured no energy) per
    ecosystem, one panel per cell, medians marked."""
    column = results.column
    cells = design.cells
    fig, axes = plt.subplots(len(PHASES), len(cells), figsize=(min(7.0, 2.0 + 2.5 * len(cells)), 3.6),
                             squeeze=False)
    colours = _colours(design)
    totals = results.totals.dropna(subset=[column])
    unit, factor = _axis_unit(column, totals[column].to_numpy(dtype=float))
    for i, phase in enumerate(PHASES):
        for j, (arch, ds) in enumerate(cells):
            ax = axes[i][j]
            cell = totals[(totals["architecture"] == arch) & (totals["dataset"] == ds)
                          & (totals["phase"] == phase)]
            for k, eco in enumerate(design.ecosystems):
                y = cell.loc[cell["ecosystem"] == eco, column].to_numpy() / factor
                ax.scatter(np.full(y.size, k), y, s=6, color=colours[eco], alpha=0.7, lw=0)
                ax.hlines(np.median(y), k - 0.35, k + 0.35, color=colours[eco], lw=1.2)
            ax.set_xticks(range(len(design.ecosystems)))
            ax.set_xticklabels([DISPLAY[e] for e in design.ecosystems], rotation=90, fontsize=5)
            if i == 0:
                ax.set_title(f"{DISPLAY[arch]}\n{DISPLAY[ds]}")
            if j == 0:
                ax.set_ylabel(f"{DISPLAY[phase]} {AXIS_WORDS[column]} ({unit})")
            if i < len(PHASES) - 1:
                ax.set_xticklabels([])
    fig.tight_layout(pad=0.3, w_pad=0.4, h_pad=0.4)
    return _pdf(fig)


def energy_against_time(results: Results, design: Design) -> bytes | None:
    """Phase energy against counter-bracketed phase duration, every run, log-log (None: no
    energy was measured)."""
    if results.column != "energy_j":
        return None
    fig, axes = plt.subplots(1, len(PHASES), figsize=(7.0, 2.6))
    colours = _colours(design)
    totals = results.totals.dropna(subset=["energy_j"])
    for ax, phase in zip(axes, PHASES):
        rows = totals[totals["phase"] == phase]
        for eco in design.ecosystems:
            r = rows[rows["ecosystem"] == eco]
            ax.scatter(r["duration_s"], r["energy_j"] / 1e3, s=6, color=colours[eco],
                       label=DISPLAY[eco], lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{DISPLAY[phase]} duration, counter window (s)")
        ax.set_ylabel(f"{DISPLAY[phase]} energy (kJ)")
    axes[-1].legend(loc="upper left", frameon=False, markerscale=2)
    fig.tight_layout(pad=0.3)
    return _pdf(fig)


def instrument_agreement(results: Results, design: Design) -> bytes | None:
    """CodeCarbon against the counters per block, and the relative difference against duration
    (None: no block carries both readings)."""
    blocks = results.paired_blocks
    if blocks is None:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.0, 2.6))
    for phase, marker in zip(PHASES, ("o", "^")):
        b = blocks[blocks["phase"] == phase]
        left.scatter(b["energy_j"] / 1e3, b["codecarbon_energy_j"] / 1e3, s=3, marker=marker,
                     alpha=0.4, lw=0, label=DISPLAY[phase])
        right.scatter(b["duration_s"], 100 * b["relative_difference"], s=3, marker=marker,
                      alpha=0.4, lw=0, label=DISPLAY[phase])
    lo = min(blocks["energy_j"].min(), blocks["codecarbon_energy_j"].min()) / 1e3
    hi = max(blocks["energy_j"].max(), blocks["codecarbon_energy_j"].max()) / 1e3
    left.plot([lo, hi], [lo, hi], color="black", lw=0.6)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("block energy, counters (kJ)")
    left.set_ylabel("block energy, CodeCarbon (kJ)")
    right.axhline(0, color="black", lw=0.6)
    right.set_xscale("log")
    right.set_xlabel("block duration, counter window (s)")
    right.set_ylabel("CodeCarbon minus counters (%)")
    right.legend(frameon=False, markerscale=3)
    fig.tight_layout(pad=0.3)
    return _pdf(fig)


def utilisation(results: Results, design: Design) -> bytes:
    """Median utilisation per ecosystem inside training and evaluation blocks, one panel per
    device the package measured (the GPU's only on a GPU campaign)."""
    u = results.utilisation.set_index(["ecosystem", "phase"])
    panels = [(column, what) for column, what in (("gpu_utilization_pct", "GPU"),
                                                  ("cpu_utilization_pct", "CPU"))
              if column in u.columns]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.5 * len(panels), 2.4), squeeze=False)
    x = np.arange(len(design.ecosystems))
    for ax, (column, what) in zip(axes[0], panels):
        for offset, phase in zip((-0.2, 0.2), PHASES):
            values = [u.loc[(e, phase), column] if (e, phase) in u.index else np.nan
                      for e in design.ecosystems]
            ax.bar(x + offset, values, width=0.4, label=DISPLAY[phase])
        ax.set_xticks(x)
        ax.set_xticklabels([DISPLAY[e] for e in design.ecosystems], rotation=30, ha="right",
                           fontsize=6)
        ax.set_ylabel(f"median {what} utilisation (%)")
    axes[0][0].legend(frameon=False, ncol=2, loc="lower left", bbox_to_anchor=(0.0, 1.0))
    fig.tight_layout(pad=0.3)
    return _pdf(fig)


#: Generated figure files and the functions that draw them.
FIGURES = {"fig-energy-cells.pdf": energy_per_cell, "fig-energy-time.pdf": energy_against_time,
           "fig-instruments.pdf": instrument_agreement, "fig-utilisation.pdf": utilisation}
