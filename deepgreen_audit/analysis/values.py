"""The values the paper quotes, as types that carry how they are to be read.

A number reaches the text with its unit and precision (`Number`), a count with its noun
(`Count`: "one convolutional network", "8 runs"), a range that may collapse to one value
(`Range`: "2.19", not "2.19 to 2.19"), a label (`Text`), or the statement that the package
did not measure it and why (`NotMeasured`).  The renderer (deepgreen_audit/render/environment.py)
formats each; nothing here formats LaTeX.

The scale of an energy, a duration or an energy in watt-hours follows the value (a smoke
campaign of minutes is quoted in joules and seconds, the study's in megajoules and hours), to
three significant figures (`scaled`), so no small value prints as 0.0 and no large one as a
row of digits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Significant figures of a quantity whose unit `scaled` chooses.
SIGNIFICANT_FIGURES = 3

#: siunitx units of each scaled kind, smallest first, with the factor from the base unit.
SCALES: dict[str, tuple[tuple[str, float], ...]] = {
    "energy_j": ((r"\joule", 1.0), (r"\kilo\joule", 1e3), (r"\mega\joule", 1e6),
                 (r"\giga\joule", 1e9)),
    "energy_wh": ((r"\milli\watt\hour", 1e-3), (r"\watt\hour", 1.0), (r"\kilo\watt\hour", 1e3),
                  (r"\mega\watt\hour", 1e6)),
    "duration_s": ((r"\second", 1.0), (r"\minute", 60.0), (r"\hour", 3600.0)),
}


@dataclass(frozen=True)
class Number:
    """A number the paper quotes: its value, siunitx unit (None: a bare number), decimals."""

    value: float
    decimals: int
    description: str
    unit: str | None = None


@dataclass(frozen=True)
class Text:
    """A label the paper quotes (an ecosystem, a date)."""

    value: str
    description: str
    #: "label": a normalised label of the tables, shown by its display name; "labels": several,
    #: joined by ";", shown as a list of display names; "cells": several "architecture/dataset"
    #: cells, joined by ";", shown as "VGG-16 on CIFAR-100 and ..."; "plain": as is.
    kind: str = "plain"


@dataclass(frozen=True)
class Count:
    """A count with its noun, singular or plural as the count asks; in words up to ten when
    `words` (a title's "four deep-learning stacks"), else as a number."""

    value: int
    singular: str
    plural: str
    description: str
    words: bool = False

    @property
    def noun(self) -> str:
        return self.singular if self.value == 1 else self.plural


@dataclass(frozen=True)
class Range:
    """From `low` to `high`, in one unit; quoted as one value when the two print alike."""

    low: Number
    high: Number
    description: str


@dataclass(frozen=True)
class NotMeasured:
    """A quantity the package did not measure: the text says so where the number would stand,
    and `reason` says why (the first page lists every reason)."""

    reason: str
    description: str


def decimals_for(value: float, figures: int = SIGNIFICANT_FIGURES) -> int:
    """The decimals that show `value` to `figures` significant figures (none for large ones)."""
    if value == 0 or not math.isfinite(value):
        return 0
    return max(0, figures - 1 - math.floor(math.log10(abs(value))))


def exact_decimals(value: float) -> int:
    """The decimals a value of the specification is written with (0.0001: 4), so that it is
    quoted as written, not rounded or padded."""
    text = f"{value:.12f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def scaled(kind: str, base_value: float, description: str) -> Number:
    """`base_value` (joules, watt-hours or seconds: `kind` in SCALES) in the largest unit that
    keeps it at 1 or more, to SIGNIFICANT_FIGURES significant figures."""
    units = SCALES[kind]
    unit, factor = units[0]
    for candidate, candidate_factor in units:
        if abs(base_value) >= candidate_factor:
            unit, factor = candidate, candidate_factor
    value = base_value / factor
    return Number(value, decimals_for(value), description, unit)
