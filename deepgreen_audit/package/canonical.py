"""The canonical text form of a cell (docs/design.md, "Canonical cells").

Canonical CSV is UTF-8, LF, a header row in the schema's column order,
floats in Python's shortest round-trip form (`repr`, zero unsigned), integers
in plain decimal, booleans as `true`/`false`, datetimes as ISO 8601 UTC with a `Z`
and an empty cell for missing.  Because every value has exactly one text,
a package can be parsed, re-written and compared byte for byte; this is
what makes flatten and restore exact.
"""

from __future__ import annotations

import datetime as _dt
import math
import re

NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[-+][0-9]+)?")
INTEGER_RE = re.compile(r"0|-?[1-9][0-9]*")
#: Any spelling of a number or an integer (a sign, leading zeros, `1e3`, `1.50`): a valid
#: value, though only its canonical text may stand in a package.
_NUMBER_SPELLING = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_INTEGER_SPELLING = re.compile(r"[-+]?[0-9]+")
_BOOLEAN_SPELLINGS = {"True": "true", "TRUE": "true", "1": "true",
                      "False": "false", "FALSE": "false", "0": "false"}
DATETIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{0,5}[1-9])?Z")
BOOLEANS = ("true", "false")


def format_value(value, type_: str) -> str:
    """The canonical text of a Python value of a field of `type_`."""
    if value is None:
        return ""
    if type_ == "number":
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number; write missing as None")
        return canonical_number(value)
    if type_ == "integer":
        if isinstance(value, bool) or int(value) != value:
            raise ValueError(f"{value!r} is not an integer")
        return str(int(value))
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ == "datetime":
        if isinstance(value, _dt.datetime):
            value = value.astimezone(_dt.UTC)
            text = value.strftime("%Y-%m-%dT%H:%M:%S")
            if value.microsecond:
                text += f".{value.microsecond:06d}".rstrip("0")
            return text + "Z"
        return str(value)
    text = str(value)
    return text


def canonical_number(value: float) -> str:
    """Python's repr, with -0.0 written 0.0: they are one value, so they have one text."""
    return repr(value + 0.0)


def canonical_spelling(text: str, type_: str) -> str | None:
    """The canonical text of a cell that spells a value of `type_` another way (`+1`, `01`,
    `-0`, `1e3`, `1.50`; Table Schema's other booleans `True`, `1`; an ISO 8601 time with
    an offset or trailing zeros); None when `text` spells no value of `type_`, or one
    that is not exact (an infinite number, a time without a zone or finer than 1 us)."""
    if type_ == "integer" and _INTEGER_SPELLING.fullmatch(text):
        digits = text.lstrip("+-").lstrip("0") or "0"   # no int(): it refuses 4,300 digits
        return ("-" if text.startswith("-") and digits != "0" else "") + digits
    if type_ == "number" and _NUMBER_SPELLING.fullmatch(text):
        value = float(text)
        return canonical_number(value) if math.isfinite(value) else None
    if type_ == "boolean":
        return _BOOLEAN_SPELLINGS.get(text)
    if type_ == "datetime" and re.search(r"\.[0-9]{7}", text) is None:
        try:
            moment = _dt.datetime.fromisoformat(text)
        except ValueError:
            return None
        return format_value(moment, "datetime") if moment.tzinfo is not None else None
    return None


def parse_value(text: str, type_: str):
    """The Python value of a canonical cell (None for an empty cell)."""
    if text == "":
        return None
    if type_ == "number":
        return float(text)
    if type_ == "integer":
        return int(text)
    if type_ == "boolean":
        return text == "true"
    return text


def is_canonical(text: str, type_: str) -> bool:
    """Whether a non-empty cell is a valid value in its one canonical form."""
    if type_ == "number":
        return NUMBER_RE.fullmatch(text) is not None and canonical_number(float(text)) == text
    if type_ == "integer":
        return INTEGER_RE.fullmatch(text) is not None
    if type_ == "boolean":
        return text in BOOLEANS
    if type_ == "datetime":
        if DATETIME_RE.fullmatch(text) is None:
            return False
        try:
            _dt.datetime.fromisoformat(text[:-1])
        except ValueError:
            return False
        return True
    return True
