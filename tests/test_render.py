"""The renderer: strict templates, numbers.tex, and refusals that name the missing value."""

from __future__ import annotations

import csv
import io
import json
import re

import jinja2
import pytest

from deepgreen_audit.analysis import Design, MissingValue, Number, Text
from deepgreen_audit.cli import main
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.render import render
from deepgreen_audit.render.build import paper_dir
from deepgreen_audit.render.environment import finalize, format_number, make_environment
from deepgreen_audit.synth import generate

ECOSYSTEMS = ["python-pytorch", "cpp-libtorch", "java-dl4j"]
NARROW = dict(ecosystems=ECOSYSTEMS, architectures=["resnet18"], datasets=["cifar100"])
DESIGN = Design.from_spec(**NARROW)


@pytest.fixture(scope="module")
def small():
    return generate(seed=99, repetitions=3, epochs=2, **NARROW)


def _write(result, out, drop=None):
    write_package(result.tables if drop is None else drop(result.tables), out, result.meta)
    return out


def test_render_writes_numbers_tables_and_figures(small, tmp_path):
    pkg = _write(small, tmp_path / "pkg")
    report = render(pkg, tmp_path / "gen", design=DESIGN)
    names = {p.name for p in (tmp_path / "gen").iterdir()}
    assert {"numbers.tex", "table-energy.tex", "table-cells.tex", "table-utilisation.tex",
            "table-defects.tex", "fig-energy-cells.pdf",
            "fig-energy-time.pdf", "fig-instruments.pdf", "fig-utilisation.pdf"} <= names
    assert set(report.seconds) == {"read", "analysis", "audit", "numbers", "pilot", "calibration",
                                   "trial", "tables", "figures"}
    assert "No measured pilot package" in (tmp_path / "gen" / "pilot.tex").read_text()
    assert "No between-window calibration was collected" in \
        (tmp_path / "gen" / "calibration.tex").read_text()
    assert "No initialiser-trial package was given" in (tmp_path / "gen" / "trial.tex").read_text()
    assert "No contrast package accompanies" in (tmp_path / "gen" / "contrast.tex").read_text()
    numbers = (tmp_path / "gen" / "numbers.tex").read_text()
    macros = re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$", numbers, re.M)
    assert len(macros) == len({m for m, _ in macros}) > 60
    sited = [name for name, body in macros if body.startswith((r"\num{", r"\qty{"))]
    assert len(sited) > 60
    for name, body in macros:
        assert not re.fullmatch(r"-?[\d.,]+", body), f"{name} is a bare number: {body}"
    # the header records each table's hash and the provenance
    descriptor = json.loads((pkg / "datapackage.json").read_text())
    for res in descriptor["resources"]:
        assert f"%% sha256 {res['hash']} {res['bytes']} bytes {res['path']}" in numbers
    assert '"seed": 99' in numbers and r"\SyntheticDatatrue" in numbers
    assert r"\newcommand{\RunsTotal}{\num{9}~runs}" in numbers
    assert (tmp_path / "gen" / "fig-utilisation.pdf").read_bytes().startswith(b"%PDF")


def test_render_is_deterministic(small, tmp_path):
    pkg = _write(small, tmp_path / "pkg")
    render(pkg, tmp_path / "a", design=DESIGN)
    render(pkg, tmp_path / "b", design=DESIGN)
    for name in ("numbers.tex", "table-energy.tex", "table-cells.tex", "fig-energy-time.pdf"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_removed_column_stops_render_naming_it(small, tmp_path, capsys):
    pkg = _write(small, tmp_path / "pkg")
    path = pkg / "blocks.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    i = rows[0].index("codecarbon_duration_s")
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([r[:i] + r[i + 1:] for r in rows])
    path.write_text(buffer.getvalue())
    with pytest.raises(MissingValue, match="codecarbon_duration_s") as err:
        render(pkg, tmp_path / "gen", design=DESIGN)
    assert err.value.field == "codecarbon_duration_s" and "blocks" in str(err.value)
    assert not (tmp_path / "gen").exists()
    assert main(["render", str(pkg), "--out", str(tmp_path / "gen")]) == 2
    assert "codecarbon_duration_s" in capsys.readouterr().err


def test_a_removed_configuration_stops_render_naming_it(small, tmp_path):
    gone = "java-dl4j.resnet18.cifar100."

    def drop(tables):
        out = {}
        for name in TABLES:
            t = tables[name]
            keep = [r for r in t.rows if not r[0].startswith(gone)]
            out[name] = TextTable(t.header, keep)
        return out

    good = _write(small, tmp_path / "good")
    render(good, tmp_path / "gen", design=DESIGN)
    before = (tmp_path / "gen" / "numbers.tex").read_bytes()
    pkg = _write(small, tmp_path / "pkg", drop)
    with pytest.raises(MissingValue, match="ecosystem=java-dl4j, architecture=resnet18, "
                                           "dataset=cifar100"):
        render(pkg, tmp_path / "gen", design=DESIGN)
    # the previous generated files are untouched
    assert (tmp_path / "gen" / "numbers.tex").read_bytes() == before


def test_a_table_that_does_not_match_its_hash_is_refused(small, tmp_path):
    pkg = _write(small, tmp_path / "pkg")
    path = pkg / "runs.csv"
    path.write_text(path.read_text().replace("completed", "completed", 1) + "")
    text = path.read_text()
    path.write_text(text.replace(",adam,", ",adam ,", 1))
    with pytest.raises(UserError, match="hash") as err:
        render(pkg, tmp_path / "gen", design=DESIGN)
    assert err.value.code == "hash-mismatch"


def test_render_refuses_to_replace_a_foreign_folder(small, tmp_path):
    pkg = _write(small, tmp_path / "pkg")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="not a folder that 'deepgreen render' wrote"):
        render(pkg, tmp_path / "mine", design=DESIGN)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


def test_environment_is_strict_and_has_no_default_filter(tmp_path):
    (tmp_path / "t.j2").write_text(r"\x{((( value )))}")
    (tmp_path / "d.j2").write_text(r"((( value | default('0') )))")
    env = make_environment(tmp_path)
    assert "default" not in env.filters and "d" not in env.filters
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("t.j2").render()
    with pytest.raises(jinja2.TemplateAssertionError, match="default"):
        env.get_template("d.j2")
    assert env.get_template("t.j2").render(value=Number(2.5, 1, "x", r"\joule")) == \
        r"\x{\qty{2.5}{\joule}}"
    with pytest.raises(MissingValue, match="None"):
        env.get_template("t.j2").render(value=None)
    with pytest.raises(MissingValue, match="NaN"):
        env.get_template("t.j2").render(value=float("nan"))
    with pytest.raises(MissingValue, match="median energy of rust-tch"):
        env.get_template("t.j2").render(value=Number(float("nan"), 1, "median energy of rust-tch"))


def test_no_template_uses_a_default_filter():
    for path in (paper_dir() / "templates").glob("*.j2"):
        assert not re.search(r"\|\s*(default|d)\b", path.read_text()), path


def test_number_and_label_formatting():
    assert format_number(Number(-0.001, 1, "x")) == r"\num{0.0}"
    assert format_number(Number(42.3919, 1, "x", r"\mega\joule")) == r"\qty{42.4}{\mega\joule}"
    assert format_number(Number(210, 0, "x")) == r"\num{210}"
    assert finalize(Text("cpp-libtorch", "x", "label")) == "C++/LibTorch"
    assert finalize(Text("2026-03-02", "x")) == "2026-03-02"
    assert finalize(Text("a_b&c", "x")) == r"a\_b\&c"
    with pytest.raises(MissingValue, match="display name"):
        finalize(Text("cobol-torch", "x", "label"))


def test_every_schema_label_has_a_display_name():
    from deepgreen_audit.analysis.labels import DISPLAY

    for table, column in (("runs", "ecosystem"), ("runs", "architecture"), ("runs", "dataset"),
                          ("blocks", "phase")):
        assert set(load_schema(table).field(column).enum) <= set(DISPLAY)


def test_a_campaign_of_one_ecosystem_renders_with_no_comparison(tmp_path, capsys):
    """A re-collection of one stack has no pair to compare: the family of comparisons is empty
    and the paper says so (PairsCompared false), where render used to stop on a KeyError."""
    package = tmp_path / "one"
    assert main(["synth", "--out", str(package), "--ecosystems", "python-pytorch",
                 "--device", "cpu"]) == 0
    render(package, tmp_path / "generated")
    numbers = (tmp_path / "generated" / "numbers.tex").read_text(encoding="utf-8")
    assert "\\PairsComparedfalse" in numbers and "ComparisonsTotal" not in numbers
