"""The manuscript: no typed numbers in its results text, every macro rendered, the PDF marked."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from deepgreen_audit.analysis import Design, analyse, load_tables
from deepgreen_audit.audit.checks.manuscript import find_typed_numbers, lint_paper, taken_branches
from deepgreen_audit.audit.driver import audit
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.render import build, defects
from deepgreen_audit.render.build import paper_dir, render
from deepgreen_audit.spec import load_spec
from deepgreen_audit.synth import write_synthetic

PAPER = paper_dir() / "paper.tex"
#: Macros paper.tex defines itself or takes from numbers.tex's fixed part.
OWN_MACROS = {"DataMark", "PackageTitle", "PackageHashRuns", "SyntheticDatatrue"}


def test_the_results_text_types_no_number():
    assert lint_paper(PAPER) == []


def test_the_lint_finds_typed_digits_and_respects_the_allowlist():
    tex = (
        "\\begin{abstract}Costs \\SpreadTrainMax{} times.\\end{abstract}\n"
        "\\section{Design}\nWe ran 30 epochs.\n"
        "\\section{Results}\n"
        "ResNet-18 on CIFAR-100 (S3, Figure~\\ref{fig:2}) % 99 in a comment\n"
        "\\includegraphics[width=0.5\\textwidth]{fig-1.pdf}\n"
        "spends 2.4 times more, \\SpreadEvalMax{} in evaluation, in 7 ecosystems.\n"
        "\\section{Threats}\nOld 2.x versions.\n"
        "\\section{Limitations}\nRQ1 and RQ4 on one host of 2 GPUs.\n")
    found = find_typed_numbers(tex)
    # the Limitations quote figures too: typed there, a number is found; RQ1..RQ4 are names
    assert [(f.line, f.text) for f in found] == [(7, "2.4"), (7, "7"), (11, "2")]
    assert "2.4" in str(found[0]) and "line 7" in str(found[0])
    assert [f.text for f in find_typed_numbers(tex.replace("Costs", "Costs 3"))] == \
        ["3", "2.4", "7", "2"]


@pytest.fixture(scope="module")
def full_design_package(tmp_path_factory):
    """Every configuration of the specification, few repetitions and epochs (fast)."""
    out = tmp_path_factory.mktemp("paper") / "pkg"
    write_synthetic(out, seed=5, repetitions=3, epochs=2)
    return out


def _taken_branches(text: str, flags: dict) -> str:
    """`text` with each conditional of a rendered flag reduced to the branch it takes."""
    return taken_branches(text, {**flags, "SyntheticData": True})


def test_every_macro_the_paper_uses_is_rendered(full_design_package):
    results = analyse(load_tables(Package.open(full_design_package)), Design.from_spec())
    text = re.sub(r"(?<!\\)%.*", "", PAPER.read_text()).split("\\begin{document}")[1]
    # a macro quoted only where a flag the render wrote holds (\\ifCheapestNamedEval) need
    # not exist where it does not
    text = _taken_branches(text, results.flags)
    # render adds the macros of the audit it runs (the defect-class table's totals)
    report = audit(full_design_package)
    defects.add_audit_numbers(results, report, defects.defect_classes(report, load_spec()))
    used = set(re.findall(r"\\([A-Z][A-Za-z]+)", text))
    defined = set(results.values) | OWN_MACROS
    assert used - defined == set()
    # and most of what the analysis computes is quoted (a range's ends stand in for it)
    quoted = {name for name in results.values
              if name in used or name.removesuffix("Min") in used or name.removesuffix("Max") in used}
    assert len(quoted) > 0.8 * len(results.values)


def test_short_inference_blocks_leave_the_paper_naming_no_cheapest_inference_stack(
        full_design_package):
    """The full design at the default model: evaluation blocks are far shorter than the
    specification's minimum, so the text takes the branch that names no cheapest stack and
    the macros that would name one do not exist."""
    results = analyse(load_tables(Package.open(full_design_package)), Design.from_spec())
    assert results.flags["CheapestNamedEval"] is False
    assert not {"CheapestEvalMostly", "CostliestEvalMostly"} & set(results.values)
    text = PAPER.read_text()
    assert r"\CheapestEvalMostly" in text.split(r"\ifCheapestNamedEval")[2].split(r"\else")[0]
    assert "names no" in _taken_branches(text, results.flags).split(r"\subsection{RQ2")[1] \
        .split(r"\subsection")[0]


def test_the_paper_is_organised_by_its_research_questions_and_states_its_limitations():
    text = PAPER.read_text()
    heads = re.findall(r"\\subsection\{(RQ[1-4])", text)
    assert heads == ["RQ1", "RQ2", "RQ3", "RQ4"]
    limitations = text.split(r"\section{Limitations}")[1]
    for topic in ("unsaturated accelerator", "One host", "Scope of models and data", "DRAM",
                  "Pairs the design cannot order", r"\OutOfScopeEcosystems",
                  r"\GpuUtilTrainArchPct", r"\ifEnergyMeasured"):
        assert topic in limitations, topic
    for table in ("table-utilisation.tex", "table-defects.tex"):
        assert f"\\input{{generated/{table}}}" in text


def test_the_paper_needs_tex_and_names_what_is_missing(tmp_path, monkeypatch):
    needed = build.required_tex_packages(PAPER)
    assert {"siunitx", "booktabs", "eso-pic", "fancyhdr", "graphicx"} <= set(needed)
    paper = tmp_path / "paper"
    (paper / "generated").mkdir(parents=True)
    shutil.copy(PAPER, paper / "paper.tex")
    (paper / "generated" / "numbers.tex").write_text("")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UserError) as err:
        build.build_pdf(paper)
    message = str(err.value)
    assert "latexmk" in message and "siunitx.sty" in message and "texlive-science" in message
    assert err.value.code == "missing-tex"


def test_build_without_generated_files_says_to_render(tmp_path):
    (tmp_path / "paper.tex").write_text(PAPER.read_text())
    with pytest.raises(UserError, match="deepgreen render"):
        build.build_pdf(tmp_path)


@pytest.mark.skipif(not (shutil.which("latexmk") and shutil.which("pdftotext")),
                    reason="TeX Live (latexmk) and poppler-utils are needed to build the PDF")
def test_a_pdf_from_a_synthetic_package_is_marked_on_every_page(full_design_package, tmp_path):
    paper = tmp_path / "paper"
    paper.mkdir()
    shutil.copy(PAPER, paper / "paper.tex")
    render(full_design_package, paper / "generated")
    pdf = build.build_pdf(paper)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True).stdout
    pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    assert pages >= 4
    for page in range(1, pages + 1):
        text = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), str(pdf), "-"],
                              capture_output=True, text=True).stdout
        assert "SYNTHETIC DATA" in text, f"page {page} lacks the synthetic mark"
    log = (paper / "build" / "paper.log").read_text(errors="replace")
    assert "undefined" not in log.lower().replace("undefined references", "")
