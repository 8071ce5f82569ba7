"""The Jinja environment of the paper's templates: LaTeX-safe and strict.

* Delimiters that LaTeX never writes: ``((* block *))``, ``((( value )))``,
  ``((= comment =))``, so braces and ``%`` stay LaTeX's.
* `StrictUndefined`: a name the template uses and the context lacks is an
  error, never an empty string.
* A `finalize` hook that formats every printed value (a `Number`, `Range`, `Count`,
  `Text`, or `NotMeasured`, which prints "not measured": its reason is on the first page) and
  refuses None and NaN, naming the value when it is a `Number`.
* No ``default`` filter: it is removed from the environment, so a template
  cannot paper over a missing value.
"""

from __future__ import annotations

import math
from pathlib import Path

import jinja2

from deepgreen_audit.analysis import Count, MissingValue, NotMeasured, Number, Range, Text
from deepgreen_audit.analysis.labels import display
from deepgreen_audit.safe import latex_comment, latex_text

_COUNT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")


def _digits(number: Number) -> str:
    """A `Number`'s value as its decimals print it ("-0.0" printed as "0.0")."""
    if not math.isfinite(number.value):
        raise MissingValue(f"{number.description} is {number.value} (not a finite number); "
                           "the paper cannot quote it")
    text = f"{number.value:.{number.decimals}f}"
    return text.lstrip("-") if float(text) == 0.0 else text


def format_number(number: Number) -> str:
    r"""A `Number` through siunitx: ``\num{...}`` or ``\qty{...}{unit}``."""
    text = _digits(number)
    return rf"\qty{{{text}}}{{{number.unit}}}" if number.unit else rf"\num{{{text}}}"


def format_range(value: Range) -> str:
    r"""A `Range`: one value when both ends print alike, else ``\numrange`` / ``\qtyrange``
    (siunitx's range phrase, set in paper.tex, reads "to")."""
    low, high = _digits(value.low), _digits(value.high)
    if low == high:
        return format_number(value.low)
    unit = value.low.unit
    return rf"\qtyrange{{{low}}}{{{high}}}{{{unit}}}" if unit else rf"\numrange{{{low}}}{{{high}}}"


def format_count(count: Count) -> str:
    r"""A `Count` with its noun: "one convolutional network", "no run", "\num{8}~runs"."""
    if count.words and count.value == 0:
        return f"no {latex_text(count.singular)}"
    if count.words and 0 < count.value < len(_COUNT_WORDS):
        return f"{_COUNT_WORDS[count.value]} {latex_text(count.noun)}"
    return rf"\num{{{count.value}}}~{latex_text(count.noun)}"


def format_text(value: Text) -> str:
    if value.kind in ("labels", "cells"):
        names = [" on ".join(display(part) for part in label.split("/"))
                 for label in value.value.split(";")]
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return display(value.value) if value.kind == "label" else latex_text(value.value)


def finalize(value):
    """Format what a template prints; refuse None and NaN."""
    if value is None:
        raise MissingValue("a template printed None (a missing value)")
    if isinstance(value, float) and math.isnan(value):
        raise MissingValue("a template printed NaN (a missing value)")
    if isinstance(value, Number):
        return format_number(value)
    if isinstance(value, Range):
        return format_range(value)
    if isinstance(value, Count):
        return format_count(value)
    if isinstance(value, NotMeasured):
        return r"\emph{not measured}"
    if isinstance(value, Text):
        return format_text(value)
    return value


def make_environment(template_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        block_start_string="((*", block_end_string="*))",
        variable_start_string="(((", variable_end_string=")))",
        comment_start_string="((=", comment_end_string="=))",
        line_statement_prefix=None, line_comment_prefix=None,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, finalize=finalize, autoescape=False)
    for name in ("default", "d"):
        env.filters.pop(name, None)
    env.filters["label"] = display
    env.filters["tex"] = latex_text
    env.filters["comment"] = latex_comment
    return env


def render_template(env: jinja2.Environment, name: str, context: dict) -> str:
    """Render one template; an undefined name becomes a MissingValue naming it and the template."""
    try:
        return env.get_template(name).render(**context)
    except jinja2.UndefinedError as exc:
        raise MissingValue(f"template {name}: {exc.message}") from None
