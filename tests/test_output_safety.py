"""Text and numbers from the data act on no reader (issue 38): one test per class of output,
each over several hostile inputs, and the rule that no writer goes around deepgreen_audit/safe.py.

The rule (docs/package-format.md, "Output safety"), checked over the package's source by
`test_no_writer_goes_around_the_safety_layer`:

* no `html.escape`, `xml.etree` serialisation (`tostring`, `ElementTree.write`), `savefig`
  or `csv.writer` outside safe.py, but for the package's own tables (package/tables.py:
  canonical data read back by deepgreen, never offered to a spreadsheet);
* no `json.dump(s)` outside safe.py, but for the machine files deepgreen writes and reads
  back itself (ALLOWED_JSON, each with its reason): a report or anything a verb prints is
  `safe.json_text`;
* no module but cli.py replaces sys.stdout or sys.stderr (cli.main writes both through
  `safe.terminal_text`; a replaced stream would bypass it).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from deepgreen_audit import safe
from deepgreen_audit.cli import main
from deepgreen_audit.page.html import csv_data_uri, render_junit, render_page
from deepgreen_audit.report import Finding, Report

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "deepgreen_audit"

FORMULAS = ["=1+1", "+1", "-1", "@SUM(A1:A2)", "\t=1", "\r=1", "\n=1", "=HYPERLINK(\"http://x\",\"y\")",
            "=cmd|' /C calc'!A0", "a,=1+1", "a;@x", "x\t-1", "\uff1d1", "ok|+2"]
TERMINAL = ["\x1b[31mred\x1b[0m", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "\x9b2J", "a\rb",
            "\x07bell", "\x7f", "\u202eevil", "x\u2066y", "\x00nul", "\x1bc", "\x85next", "\udcff"]
MARKUP = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "' onmouseover='x",
          "<!--", "]]>", "&amp;", "<![CDATA[x]]>", "<b>$x^2$ & 100%</b>"]
TEX = ["$\\frac{a$", "\\input{/etc/passwd}", "100% & #1_{x}^~", "\\\\end{document}", "$$",
       "{", "}", "a\n\nb", "\\def\\x{y}"]
XML_FORBIDDEN = ["\x00", "\x01", "\x0b", "\x0c", "\x1f", "\ufffe", "\uffff", "\ud800", "\x1b[2J"]
NON_FINITE = [math.nan, math.inf, -math.inf]
#: Every control character a terminal may obey (C0 but tab and newline, DEL, C1) and the
#: bidi controls.
LIVE_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + safe.BIDI_CONTROLS + "]")


def _report_with(text: str) -> Report:
    """An audit report whose every text field holds `text`, with evidence and a remedy."""
    report = Report(subject=f"pkg-{text}", kind="audit", notes=[f"note {text}"])
    for status in ("fail", "warn", "skip", "pass"):
        report.findings.append(Finding(
            id=f"S5.{status}", status=status, message=f"msg {text}", section="S5",
            resource=f"res{text}", field=text, rows_affected=1, remedy=f"fix {text}",
            basis="contradicted" if status in ("fail", "warn") else None,
            details={"evidence": [{"source_file": text, "value": 1.5, "ratio": math.inf}],
                     "evidence_total": 1}))
    return report


# ---------------------------------------------------------------- formulas


def _formula_cell(cell: str) -> bool:
    return cell.startswith(safe.FORMULA_STARTS) or bool(
        re.search(r"[,;\t|\r\n][=+\-@]", cell))


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_in_a_cell_is_inert_in_every_csv(text):
    """A cell starting with (or holding after a separator) a formula character reads as text."""
    assert not _formula_cell(safe.csv_cell(text))
    document = safe.csv_text(["name", text], [[text, 1.5], [None, math.nan], [f"x{text}", -2]])
    cells = [cell for row in csv.reader(io.StringIO(document, newline="")) for cell in row]
    assert not any(_formula_cell(cell) for cell in cells if cell not in ("-2",)), cells
    assert "-2" in cells   # a number stays a number
    import base64

    uri = csv_data_uri([{"source_file": text, "line": 2}, {"source_file": "a", "line": -3}])
    data = base64.b64decode(uri.split(",", 1)[1]).decode()
    rows = list(csv.reader(io.StringIO(data, newline="")))
    assert not _formula_cell(rows[1][0]) and rows[2][1] == "-3", rows


# ---------------------------------------------------------------- terminal


@pytest.mark.parametrize("text", TERMINAL + XML_FORBIDDEN)
def test_a_control_sequence_reaches_no_terminal(text, tmp_path, capsys):
    """Report text, and whatever the command line prints (here an error naming a file), shows
    a control character as its escape."""
    assert not LIVE_CONTROL.search(safe.terminal_text(text))
    assert not LIVE_CONTROL.search(_report_with(text).format_text(evidence_rows=3))
    # a file name holds no NUL, and no surrogate (a name's bytes that are not UTF-8 are the
    # input side's: issue 38's file-name class)
    name = "pkg" + re.sub("[\x00\ud800-\udfff]", "", text) + "x"
    assert main(["validate", str(tmp_path / name)]) == 1
    assert main(["audit", str(tmp_path / name), "--out", str(tmp_path / name / "r.json")]) == 2
    printed = capsys.readouterr()
    assert "missing-descriptor" in printed.out and "error" in printed.err
    assert not LIVE_CONTROL.search((printed.out + printed.err).replace("\n", "")), ascii(printed)


# ---------------------------------------------------------------- XML


@pytest.mark.parametrize("text", XML_FORBIDDEN + MARKUP + TERMINAL)
def test_the_junit_report_is_well_formed_xml_whatever_a_message_holds(text):
    document = render_junit(_report_with(text))
    root = ET.fromstring(document.encode("utf-8"))
    assert root.tag == "testsuites" and len(root.find("testsuite")) == 4
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]", document)
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.text.startswith("msg ")


# ---------------------------------------------------------------- renderers (HTML, TeX, figures)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


@pytest.mark.parametrize("text", MARKUP + TERMINAL + TEX)
def test_markup_in_the_data_is_text_on_the_page(text):
    clean, hostile = _Tags(), _Tags()
    clean.feed(render_page(_report_with("plain")))
    hostile.feed(render_page(_report_with(text)))
    assert [t for t, _ in hostile.tags] == [t for t, _ in clean.tags]   # no tag injected
    assert not any(name.startswith("on") for _, attrs in hostile.tags for name, _ in attrs)
    assert "<script" not in render_page(_report_with(text)).lower()


_TEX_COMMAND = re.compile(r"\\(text[a-z]+\{\}|[&%$#_{}])")


@pytest.mark.parametrize("text", TEX + MARKUP + XML_FORBIDDEN)
def test_tex_specials_in_the_data_print_as_text(text):
    escaped = safe.latex_text(text)
    rest = _TEX_COMMAND.sub("", escaped)
    assert not re.search(r"[\\&%$#_{}~^]", rest), (text, escaped)   # every special escaped
    assert "\n" not in escaped and not LIVE_CONTROL.search(escaped)
    comment = safe.latex_comment(text)
    assert "\n" not in comment and "\r" not in comment and not LIVE_CONTROL.search(comment)


@pytest.mark.parametrize("text", TEX[:3] + TERMINAL[:3] + ["$", "a$b$c", "^_"])
def test_a_label_from_the_data_is_drawn_as_text(text):
    """A figure whose title, tick labels and legend hold mathtext or control characters is drawn
    without an error or a warning (a missing glyph, a mathtext parse)."""
    from deepgreen_audit.page.figures import new_figure

    fig, axes = new_figure()
    ax = axes[0][0]
    ax.barh([0, 1], [1.0, 2.0], label=text)
    ax.set_yticks([0, 1], [text, f"line {text}"])
    ax.set_title(text)
    ax.legend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = safe.figure_bytes(fig, format="png")
    assert png.startswith(b"\x89PNG")


# ---------------------------------------------------------------- non-finite numbers


def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", NON_FINITE)
def test_a_number_that_is_not_finite_is_null_with_a_reason(value):
    document = safe.json_text({"share": value, "rows": [value, 1.0], "nested": {"x": value}})
    data = _strict(document)
    assert data["share"] is None and data["share_reason"].startswith("not defined: ")
    assert data["rows"] == [None, 1.0] and data["nested"]["x_reason"]
    report = _strict(_report_with("x").to_json())
    evidence = report["findings"][0]["details"]["evidence"][0]
    assert evidence["ratio"] is None and "infinite" in evidence["ratio_reason"]
    words = safe.number_text(value, ".1%")
    assert words.startswith("not defined (") and "nan" not in words and "inf%" not in words
    assert safe.number_text(0.25, ".1%") == "25.0%"
    page = render_page(_report_with("x"))
    assert ">inf<" not in page and ">not defined (" in page


def test_a_header_only_log_audits_to_strict_json_and_words(tmp_path, capsys):
    """The example of issue 38: `--json` of a log with a header only printed NaN."""
    from fuzz_readers import CODECARBON_SEED

    log = tmp_path / "emissions.csv"
    log.write_bytes(CODECARBON_SEED.split(b"\r\n")[0] + b"\n")
    assert main(["import", "codecarbon", str(log), "--out", str(tmp_path / "pkg")]) == 0
    capsys.readouterr()
    main(["audit", str(tmp_path / "pkg"), "--json"])
    out, err = capsys.readouterr()
    logs = _strict(out)["stats"]["verdicts"]["logs"]
    assert logs[0]["modelled_share"] is None and logs[0]["modelled_share_reason"]
    assert "Warning" not in err
    main(["audit", str(tmp_path / "pkg")])
    out = capsys.readouterr().out
    assert not re.search(r"\b(nan|inf)\b", out)


def _log_with(**cells) -> bytes:
    """The fuzz seed's CodeCarbon log with `cells` (column -> text) in every row."""
    from fuzz_readers import CODECARBON_SEED

    header, *rows = CODECARBON_SEED.decode().split("\r\n")
    names = header.split(",")
    out = [header]
    for row in rows:
        values = row.split(",")
        for name, text in cells.items():
            values[names.index(name)] = text
        out.append(",".join(values))
    return ("\n".join(out) + "\n").encode()


ENERGIES = ("cpu_energy", "gpu_energy", "ram_energy", "energy_consumed")


@pytest.mark.parametrize("cells", [
    {"energy_consumed": "1e308", "cpu_energy": "1e308", "duration": "1e-300"},
    {"duration": "5e-324", "cpu_power": "5e-324"},
    {"emissions": "1e308", "duration": "1e-300"},
    {**dict.fromkeys(ENERGIES, "0"), "duration": "0", "emissions": "0", "emissions_rate": "0"},
    {**dict.fromkeys(ENERGIES, ""), "duration": "", "emissions": ""},
    {"pue": "1e308", "ram_total_size": "0", "cpu_count": "0"}], ids=str)
def test_degenerate_numbers_in_a_log_warn_nowhere(cells, tmp_path):
    """Impossible magnitudes, zeros and empty cells: numpy prints no RuntimeWarning (each is a
    finding or is silenced at its computation with the reason), and no output says nan or inf."""
    from deepgreen_audit.codecarbon.audit import audit_log, render_log_page
    from deepgreen_audit.codecarbon.importer import import_logs

    log = tmp_path / "emissions.csv"
    log.write_bytes(_log_with(**cells))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import_logs([log], tmp_path / "pkg")
        report, ctx = audit_log(tmp_path / "pkg")
        text, page = report.format_text(), render_log_page(report, ctx)
    _strict(report.to_json())
    # (a remedy speaks of a log's "empty or nan cell": words about a cell, not a number)
    assert not re.search(r"\b(nan|inf)\b(?!\s+cell)", text, re.I), text
    assert not re.search(r">(nan|inf)<|\binf%", page)


# ---------------------------------------------------------------- the rule: no bypass


#: The modules that write JSON without safe.json_text, each with why it may: machine files
#: deepgreen writes and reads back itself (no report, nothing printed).
ALLOWED_JSON = {
    "package/descriptor.py": "the package's descriptor (datapackage.json), validated on read",
    "package/rundirs.py": "a run directory's JSON records, read back by flatten",
    "collect/outfolder.py": "a run's record and the plan's digest, read back by the collector",
    "collect/driver.py": "the campaign's meta record, read back by flatten",
    "collect/staging.py": "a failed run's record, read back by the collector",
    "collect/slurm.py": "submission records and the job report, read back by the collector",
    "collect/device_probe.py": "the probe's answer on a pipe to its parent",
    "collect/parity.py": "the tolerances quoted in a note (a Report, printed as terminal text)",
    "stacks/data.py": "a prepared input's manifest",
    "stacks/weights.py": "the weights' manifest and header",
    "render/build.py": "the provenance quoted in a LaTeX comment (the comment filter)",
    "importers/legacy.py": "the importer's report file inside the package",
    "codecarbon/importer.py": "the sources file inside the package",
    "synth/generate.py": "the synthetic package's truth file",
    "pins.py": "a probe program's source text",
}
ALLOWED_CSV = {"package/tables.py": "the package's canonical tables: data read back, not a "
                                    "spreadsheet download"}


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else (
                    func.value.attr if isinstance(func.value, ast.Attribute) else "")
                yield node, owner, func.attr
            elif isinstance(func, ast.Name):
                yield node, "", func.id


def _bypasses(relative: str, tree: ast.AST) -> list[str]:
    found = []
    for node, owner, name in _calls(tree):
        where = f"{relative}:{node.lineno}"
        if (owner, name) == ("html", "escape") or name in ("tostring", "savefig") or (
                owner in ("ET", "ElementTree", "etree") and name == "write"):
            found.append(f"{where}: {owner}.{name} (use deepgreen_audit.safe)")
        if owner == "csv" and name in ("writer", "DictWriter") and relative not in ALLOWED_CSV:
            found.append(f"{where}: csv.{name} (use safe.csv_text)")
        if owner == "json" and name in ("dump", "dumps") and relative not in ALLOWED_JSON:
            found.append(f"{where}: json.{name} (use safe.json_text)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and relative != "cli.py":
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr in ("stdout", "stderr") \
                        and isinstance(target.value, ast.Name) and target.value.id == "sys":
                    found.append(f"{relative}:{node.lineno}: replaces sys.{target.attr}")
    return found


def test_no_writer_goes_around_the_safety_layer():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative != "safe.py":
            found += _bypasses(relative, ast.parse(path.read_text(encoding="utf-8")))
    assert not found, "\n".join(found)
    stale = [m for m in {**ALLOWED_JSON, **ALLOWED_CSV} if not (PACKAGE / m).is_file()]
    assert not stale, stale


@pytest.mark.parametrize("source", [
    "import html\nhtml.escape(x)", "import json\njson.dumps(x)", "import csv\ncsv.writer(f)",
    "fig.savefig(b)", "import xml.etree.ElementTree as ET\nET.tostring(e)",
    "import sys\nsys.stdout = f"])
def test_the_rule_finds_a_bypass(source):
    """The lint itself fails on each kind of bypass (in a module of no allowance)."""
    assert _bypasses("verbs/example.py", ast.parse(source))
