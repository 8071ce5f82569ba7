"""Property-based fuzzing of the writers (issue 38): hostile text in a log reaches no reader live.

Random strings from a hostile alphabet (control characters with ESC/CSI/OSC sequences,
spreadsheet formula prefixes, HTML/XML markup, TeX and mathtext specials, characters XML 1.0
forbids, bidi overrides) are placed in every text field of a CodeCarbon log that reaches an
output (project_name, experiment_id, run_id, country_name, region, os, cpu_model, gpu_model,
tracking_mode, a task_name column) and in the log's file name.  The log goes through
`deepgreen import codecarbon` and `deepgreen audit --json --junit --html`, and `deepgreen audit --logs`
for the text report, all in-process through `cli.main`; each output must parse in its own format and carry
nothing live:

* what the command line prints (text report, messages): no C0/C1 control but newline and tab,
  no bidi control;
* JSON: `json.loads` with NaN/Infinity refused;
* JUnit: `xml.etree` parses it;
* HTML: `html.parser` finds only the tags the page itself writes, no event attribute;
* each CSV the page embeds: no text cell that a spreadsheet would run as a formula.

Names that are not UTF-8 are the input side's class (file names), fuzzed there.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import strategies as st

from deepgreen_audit.cli import main as cli_main
from deepgreen_audit.errors import BUG_EXIT
from deepgreen_audit.safe import BIDI_CONTROLS, FORMULA_STARTS
from fuzz_readers import CODECARBON_SEED, TARGETS as READERS, TRIED

#: Outputs checked per writer, for the fuzz script's report.
WRITTEN: Counter = Counter()

#: The pieces hostile strings are made of.
HOSTILE = [
    "\x1b[31m", "\x1b[2J", "\x1b]8;;http://x\x07", "\x1b]0;title\x07", "\x9b1m", "\x9d", "\x07",
    "\r", "\x08", "\x7f", "\x00", "\x0b", "\x0c", "\x1f", "\x85",
    "=", "+", "-", "@", "\t", "=HYPERLINK(\"http://x\";\"y\")", "=cmd|' /C calc'!A0", ";=1", ",+1",
    "<script>alert(1)</script>", "</td>", "<img src=x onerror=alert(1)>", "\"", "'", "&", "<!--",
    "]]>", "<![CDATA[", "&lt;",
    "$", "$x^2$", "$\\frac{a$", "\\", "{", "}", "%", "#", "_", "^", "~", "\\input{x}", "$$",
    "\ufffe", "\uffff", "\ud800", "\u202e", "\u202d", "\u2066", "\u2069", "\u200f", "\u2028",
    "a", "B", "1", " ", "é", "日本",
]
#: The log's text fields that reach an output (the task name is a column a task's log has).
FIELDS = ["project_name", "run_id", "experiment_id", "country_name", "region", "os", "cpu_model",
          "gpu_model", "tracking_mode", "task_name"]
LIVE_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]")
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
#: Every tag the audit's page writes itself.
PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "span",
             "nav", "ul", "li", "a", "p", "div", "table", "tr", "th", "td", "main", "section",
             "details", "summary", "strong", "img", "em", "code",
             # a sortable table's orders: radio buttons and their labels, no script
             "input", "label"}

hostile_text = st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=6).map("".join)


def _hostile_log(draw) -> bytes:
    """The seed log with hostile text in some of its text fields (a task_name column added)."""
    rows = list(csv.reader(io.StringIO(CODECARBON_SEED.decode(), newline="")))
    header = rows[0] + ["task_name"]
    body = [row + ["train"] for row in rows[1:]]
    for field in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True)):
        column = header.index(field)
        for row in body:
            if draw(st.booleans()) or row is body[0]:
                row[column] = draw(hostile_text)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *body])
    return buffer.getvalue().encode("utf-8", "surrogatepass")


def _file_name(draw) -> str:
    """A log's file name with hostile text: anything a name may hold but '/' and NUL (and, here,
    a lone surrogate: a name's bytes that are not UTF-8 are the input side's class)."""
    text = re.sub("[/\x00\ud800-\udfff]", "", draw(hostile_text))[:60]
    return f"{text}_emissions.csv"


def _run(argv: list[str]) -> tuple[int, str]:
    """A verb in-process, as the program runs it (cli.main), and all it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli_main(argv)
    printed = out.getvalue() + err.getvalue()
    assert status != BUG_EXIT, printed
    assert not LIVE_CONTROL.search(printed), ascii(printed)
    WRITTEN["printed text"] += 1
    return status, out.getvalue()


def _strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} in a JSON output")
    WRITTEN["json"] += 1
    return json.loads(text, parse_constant=refuse)


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.handlers: list[str] = []
        self.csv_uris: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "input" and dict(attrs).get("type") != "radio":  # only a table's sort order
            self.handlers.append(f"input type={dict(attrs).get('type')}")
        self.csv_uris += [value for name, value in attrs
                          if name == "href" and value and value.startswith("data:text/csv")]


def _check_page(page: str) -> None:
    parsed = _Page()
    parsed.feed(page)
    assert parsed.tags <= PAGE_TAGS and not parsed.handlers, (parsed.tags - PAGE_TAGS,
                                                              parsed.handlers)
    assert not LIVE_CONTROL.search(page.replace("\r", "")), "a control character in the page"
    WRITTEN["html"] += 1
    for uri in parsed.csv_uris:
        text = base64.b64decode(uri.split(",", 1)[1]).decode("utf-8")
        for row in csv.reader(io.StringIO(text, newline="")):
            live = [c for c in row if c.startswith(FORMULA_STARTS) and not NUMBER.fullmatch(c)]
            assert not live, live
        WRITTEN["csv"] += 1


def fuzz_outputs(draw) -> None:
    """A log with hostile text through import and audit: every output parses in its format and
    holds nothing live."""
    TRIED["hostile outputs"] += 1
    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        log = Path(scratch) / _file_name(draw)
        log.write_bytes(_hostile_log(draw))
        pkg, page, junit = (Path(scratch) / name for name in ("pkg", "a.html", "a.xml"))
        status, _ = _run(["import", "codecarbon", str(log), "--out", str(pkg)])
        if status != 0:  # refused in one line: what it printed was checked
            return
        _, out = _run(["audit", str(pkg), "--json", "--html", str(page), "--junit", str(junit)])
        _strict_json(out)
        ET.fromstring(junit.read_bytes())
        WRITTEN["junit"] += 1
        _check_page(page.read_text(encoding="utf-8"))
        _run(["audit", "--logs", str(log)])  # the text report, straight from the log


TARGETS = {**READERS, "hostile outputs": fuzz_outputs}
