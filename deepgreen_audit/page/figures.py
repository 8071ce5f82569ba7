"""The page's figures: matplotlib drawn off-screen (Agg) and embedded as PNG data: URIs, so the
page needs nothing at view time.  A kind's figures (deepgreen_audit/audit/figures.py) draw with
these and are declared by the checks they show."""

from __future__ import annotations

import base64

from deepgreen_audit.safe import figure_bytes

#: A flagged value and a fine one, in every figure.
FLAGGED, FINE = "#b3261e", "#9aa0a6"


def figure_png(fig) -> str:
    """A matplotlib figure as a data: URI (PNG keeps dense scatters small), at the screen's
    96 dpi so that its 9-10 pt labels read at 100 % zoom."""
    import matplotlib.pyplot as plt

    png = figure_bytes(fig, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def new_figure(width=8.0, height=3.2, ncols=1, nrows=1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # labels carry names from the data (a log's file name): a `$` there is text, not mathtext
    # (safe.figure_bytes, which writes every figure, turns it off for each text again)
    plt.rcParams.update({"font.size": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
                         "legend.fontsize": 9, "axes.titlesize": 10, "text.parse_math": False})
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
