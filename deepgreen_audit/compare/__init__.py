"""Two packages compared against a control group: `deepgreen compare A B`.

`compare_packages(a, b, control=None)` validates both packages, says what differs between
them (specification, environment, scope), computes per configuration (stack, architecture,
dataset, phase) the ratios B/A of median phase energy and duration with seeded bootstrap
intervals, and judges each stack against the drift of a control group (the stacks named
unchanged, or by default those whose recorded precision policy and versions did not change).
`output` writes it as text, JSON or a figure; `paper` makes it a section of the manuscript.
See docs/compare.md for the definitions and the drift rule.
"""

from deepgreen_audit.compare.core import Comparison, compare_packages

__all__ = ["Comparison", "compare_packages"]
