r"""The one way text and numbers from the data reach an output: a function per output kind.

A CodeCarbon log may come from anyone's repository, so any cell or file name it holds may be
written to act on whoever reads an output: a formula a spreadsheet runs, an escape sequence a
terminal obeys, markup a browser or XML parser reads, a TeX or mathtext command.  Every writer
passes such text through the function of its format here (docs/package-format.md, "Output safety",
states the rules; tests/test_output_safety.py fails when a writer goes around them):

* `csv_cell`: OWASP's CSV-injection rule, a cell that a spreadsheet would read as a formula
  starts with an apostrophe (`csv_text` writes a whole file so);
* `terminal_text`: every C0 and C1 control character but newline and tab, and the bidi
  controls, written as a visible escape (``\x1b``, ``\u202e``);
* `xml_text`: only characters XML 1.0 allows (its `Char` production), the others escaped;
* `html_text`: markup escaped, quotes included (so also an attribute's value), controls visible;
* `figure_label`: controls visible (matplotlib draws it with mathtext off: page/figures.py);
* `latex_text`: TeX's specials as their text-mode commands, controls dropped (`latex_comment`:
  one line for a comment);
* `json_text` / `json_number`: a number that is not finite is JSON ``null`` with a reason,
  never ``NaN`` or ``Infinity``; `number_text` says "not defined" and why in prose.

The bottom layer: it imports nothing of the project.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from typing import Any

#: The leading characters that make a spreadsheet read a cell as a formula (OWASP, "CSV
#: Injection": =, +, -, @, tab, carriage return; a full-width or newline start behaves alike in
#: some spreadsheets).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: The separators after which a spreadsheet may start a new formula inside one cell's text when
#: it splits pasted text into columns or lines (OWASP: "also the cells after separators").
_SEPARATED_FORMULA = re.compile(r"([,;\t|\r\n])([=+\-@])")

#: Bidirectional controls: they reorder what a reader sees ("Trojan source", CVE-2021-42574).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: What a terminal may obey: C0 controls but tab and newline, DEL, C1 controls, bidi controls,
#: and the line and paragraph separators (some terminals and editors break lines on them).
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "\u2028\u2029\ud800-\udfff]")
#: What XML 1.0 forbids (its Char production: tab, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD,
#: U+10000-U+10FFFF), and the C1 controls and bidi controls that it discourages and a reader's
#: terminal or viewer would obey.
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                         + BIDI_CONTROLS + "]")
_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                "|": r"\textbar{}", "\n": " ", "\t": " ", "\r": " "}
_TEX_DROPPED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    r"""One unsafe character as text: \x1b for one below U+0100, \u202e above, and a byte of a
    file name that is not UTF-8 (Python holds it as a surrogate, U+DC80-U+DCFF) as the byte it
    stands for, \xff, as `errors.path_text` shows it."""
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def csv_cell(value: Any) -> str:
    """A CSV text cell a spreadsheet shows as text, never runs (OWASP CSV injection): a cell
    that starts with a formula character gets a leading apostrophe, and so does every
    formula character that follows a separator or line break inside it (a spreadsheet that
    splits pasted text into columns or lines would start a formula there)."""
    text = "" if value is None else str(value)
    text = _SEPARATED_FORMULA.sub(r"\1'\2", text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV file for a spreadsheet (the page's evidence downloads): each text cell through
    `csv_cell`, a number as itself (repr: exact), one that is not finite or None as empty.
    Lines end in CRLF (RFC 4180), which also makes the writer quote a cell holding a lone
    carriage return (with LF endings it would not, and a spreadsheet would break the row)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([csv_cell(name) for name in header])
    writer.writerows([_csv_value(v) for v in row] for row in rows)
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return csv_cell(value)


def terminal_text(value: Any) -> str:
    r"""Text a terminal shows and never obeys: each control character (ESC, CSI, OSC's BEL,
    a carriage return that would overwrite the line), bidi control and lone surrogate
    written as its escape (ESC as \x1b); newline and tab kept."""
    return _TERMINAL_UNSAFE.sub(_escape, str(value))


def xml_text(value: Any) -> str:
    r"""Text an XML 1.0 document may hold (text or attribute value): each character outside
    XML 1.0's Char production (C0 controls but tab, LF and CR; U+FFFE, U+FFFF; a lone
    surrogate), and each C1 or bidi control, written as its escape (\x1b).  The serialiser
    (`xml_document`) escapes markup."""
    return _XML_UNSAFE.sub(_escape, str(value))


def xml_document(root: ET.Element) -> str:
    """The XML document of `root`, every text, tail, tag and attribute passed through
    `xml_text` first: the one way an XML output is written, so no writer can forget one."""
    for element in root.iter():
        element.tag = xml_text(element.tag)
        if element.text is not None:
            element.text = xml_text(element.text)
        if element.tail is not None:
            element.tail = xml_text(element.tail)
        for key in list(element.attrib):
            element.attrib[xml_text(key)] = xml_text(element.attrib.pop(key))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def html_text(value: Any) -> str:
    """Text for an HTML page, in an element or a quoted attribute: markup and both quotes
    escaped, and the control characters a browser would drop or an XML reader refuse
    written as escapes; None is empty."""
    return html.escape(xml_text("" if value is None else value), quote=True)


def figure_label(value: Any) -> str:
    """A label for a matplotlib figure: control characters (which no font has) as escapes.
    A `$` stays a `$`: page/figures.py draws every label with mathtext off."""
    return terminal_text(value).replace("\n", " ").replace("\t", " ")


def figure_bytes(fig, **savefig_options) -> bytes:
    """A matplotlib figure saved (PNG, PDF: `savefig_options`), every text in it (titles, axis
    and tick labels, legends, annotations) passed through `figure_label` and drawn with mathtext
    off: the one way a figure is written, so no label from the data is read as mathtext."""
    import io

    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        _labels_made_safe(fig)
        fig.canvas.draw()  # makes the texts a legend or formatter writes at draw time
        _labels_made_safe(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, **savefig_options)
    return buffer.getvalue()


def _labels_made_safe(fig) -> None:
    """Every text of `fig` and every fixed tick label (set_xticklabels) through `figure_label`,
    each drawn with mathtext off."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for text in fig.findobj(Text):
        text.set_parse_math(False)
        text.set_text(figure_label(text.get_text()))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [figure_label(label) for label in formatter.seq]
                elif isinstance(formatter, FuncFormatter):  # set_ticks(ticks, labels) makes one
                    formatter.func = _labelled(formatter.func)


def _labelled(func):
    """A tick formatter's function whose labels go through `figure_label`."""
    return lambda x, pos=None: figure_label(func(x, pos))


def latex_comment(value: Any) -> str:
    """Text for a LaTeX comment line (``%% package: ...``): one line, whitespace runs as one
    space, control characters dropped, so nothing after it leaves the comment."""
    return " ".join(_TEX_DROPPED.sub("", str(value)).split())


def latex_text(value: Any) -> str:
    """Text for LaTeX's text mode: TeX's specials as the commands that print them, line
    breaks as spaces (a blank line would end the paragraph), control characters dropped."""
    text = _TEX_DROPPED.sub("", str(value))
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in text)


def _why_not_finite(value: float) -> str:
    if math.isnan(value):
        return "not a number: nothing to compute it from, e.g. 0/0 or no rows"
    return f"{'+' if value > 0 else '-'}infinite: a division by zero or beyond a float's range"


def not_defined_reason(value: float) -> str:
    """Why a computed number has no value, in words (its cause named by what the value is)."""
    return f"not defined: {_why_not_finite(value)}"


def json_number(value: Any) -> Any:
    """A number for JSON: itself when finite, else None (`json_ready` adds the reason)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_ready(obj: Any) -> Any:
    """`obj` with every float that is not finite replaced by None; in a mapping, the key
    `<key>_reason` beside it says why (unless the mapping has that key already)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            out[key] = json_ready(value)
            if isinstance(value, float) and not math.isfinite(value):
                reason_key = f"{key}_reason"
                if reason_key not in obj:
                    out[reason_key] = not_defined_reason(value)
        return out
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray)):
        return [json_ready(v) for v in obj]  # a list, a tuple, or rows made when read
    return json_number(obj)


def json_text(obj: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    r"""A JSON document of `obj` that every strict parser reads: no NaN or Infinity (they are
    null with a reason: `json_ready`; `allow_nan=False` is the guard), and no raw control
    or bidi character inside a string (each written as its \u escape), so the document is
    also safe to print to a terminal."""
    text = json.dumps(json_ready(obj), indent=indent, ensure_ascii=False, allow_nan=False,
                      sort_keys=sort_keys, default=str)
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def number_text(value: float, spec: str, cause: str | None = None) -> str:
    """`value` formatted by `spec` (e.g. ".1%") when finite, else "not defined" with the cause
    (`cause`, or what the value is), never nan or inf."""
    if math.isfinite(value):
        return format(value, spec)
    return f"not defined ({cause or _why_not_finite(value)})"


class TerminalStream:
    """A text stream that writes through `terminal_text`: what the command line prints (a
    report, a message naming a file, an importer's summary) reaches the terminal without a
    live control sequence, whichever module printed it."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_text(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
