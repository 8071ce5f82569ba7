"""The contrast cell (S7) as a package of its own: the audit holds a package that declares the
contrast cell to S3_data.contrast_cell (its scope, its runs, the utilisation samples inside its
training blocks), and leaves every other package alone."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.collect.plan import write_scoped_plan
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.render.build import default_contrast, render
from deepgreen_audit.safe import latex_text
from deepgreen_audit.spec import contrast_cell, declares_contrast_cell, load_spec
from deepgreen_audit.synth import write_synthetic
from package_edits import rehash

SPEC = load_spec()
#: a real collection (tests/data/collected/): the main campaign the smoke paragraph is set beside
COLLECTED = Path(__file__).resolve().parent / "data" / "collected" / "cpu-no-counters"
CELL = contrast_cell(SPEC)
#: a contrast cell cut down to what a test needs: two LibTorch stacks and one other, one
#: architecture, two repetitions of two epochs
SMALL = {"ecosystems": ["python-pytorch", "cpp-libtorch", "python-jax"],
         "architectures": ["resnet18"], "repetitions": 2, "epochs": 2}


def s7(report) -> dict[str, object]:
    return {f.id: f for f in report.findings if f.id.startswith("S7.")}


@pytest.fixture(scope="module")
def conforming(tmp_path_factory):
    """A synthetic contrast cell at S7's dataset, resolution and batch size."""
    out = tmp_path_factory.mktemp("contrast") / "pkg"
    write_synthetic(out, seed=5, datasets=[CELL["dataset"]], batch_size=CELL["batch_size"],
                    input_resolution_px=CELL["input_resolution_px"], **SMALL)
    return out


def test_a_package_that_declares_the_contrast_cell_passes_s7(conforming):
    found = s7(audit(conforming, select=["S7"]))
    assert set(found) == {"S7.scope", "S7.runs", "S7.utilisation-windows"}
    assert all(f.status == "pass" for f in found.values()), [f.message for f in found.values()]
    assert "imagenette at 224 px in batches of 32" in found["S7.runs"].message


def test_a_contrast_scope_at_the_main_designs_resolution_and_batch_fails_s7(tmp_path):
    """Imagenette declared, but at 32 px in batches of 128: the scoped recipe checks pass (the
    runs did what the scope says), and S7 says the scope and its runs are not the cell."""
    out = tmp_path / "pkg"
    write_synthetic(out, seed=6, datasets=[CELL["dataset"]], **SMALL)
    report = audit(out)
    found = s7(report)
    assert found["S7.scope"].status == "fail"
    assert "input_resolution_px not declared (S7: 224)" in found["S7.scope"].message
    assert "batch_size not declared (S7: 32)" in found["S7.scope"].message
    runs = found["S7.runs"]
    assert runs.status == "fail" and runs.rows_affected == 6 and runs.basis == "contradicted"
    assert "input_resolution_px differs in 6 (32: 6; S7 224)" in runs.message
    assert "batch_size differs in 6 (128: 6; S7 32)" in runs.message
    assert {f.id: f.status for f in report.findings}["S2.recipe"] == "pass"


def test_a_training_block_without_a_utilisation_sample_fails_s7(conforming, tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(conforming, pkg)
    samples = pkg / "samples.csv"
    with samples.open(newline="") as f:
        rows = list(csv.reader(f))
    victim = rows[1][0]
    for row in rows[1:]:
        if row[0] == victim:
            row[2] = ""  # gpu_utilization_pct: the sampler read nothing of this run's GPU
    with samples.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    rehash(pkg)
    found = s7(audit(pkg, select=["S7"]))["S7.utilisation-windows"]
    assert found.status == "fail" and found.rows_affected == SMALL["epochs"]
    assert {row["run_id"] for row in found.details["evidence"]} == {victim}


def test_a_package_that_is_not_the_contrast_cell_is_not_applicable(tmp_path):
    out = tmp_path / "pkg"
    write_synthetic(out, seed=7, **SMALL)
    found = s7(audit(out, select=["S7"]))
    assert {f.status for f in found.values()} == {"skip"}
    assert {f.basis for f in found.values()} == {"not applicable"}


def test_only_a_scope_naming_the_contrast_dataset_declares_the_cell():
    assert declares_contrast_cell({"datasets": ["imagenette"]}, SPEC)
    assert not declares_contrast_cell({"datasets": ["digits"]}, SPEC)
    assert not declares_contrast_cell(None, SPEC)


#: A contrast-like cell this CPU host can collect in seconds: the LibTorch family's Python and
#: C++ stacks in S7's batches of 32, on digits (Imagenette is not stored here) at its 32 px, a
#: few batches of one epoch
SMOKE = {"ecosystems": ["python-pytorch", "cpp-libtorch"], "architectures": ["resnet18"],
         "datasets": ["digits"], "repetitions": 1, "epochs": 1, "batch_size": CELL["batch_size"],
         "device": "cpu", "max_train_batches": 4, "max_eval_batches": 1,
         "reason": "a contrast-like smoke cell on a CPU host: S7's batch size on digits"}


def deepgreen(*args: str) -> str:
    """One step, as a user types it, in its own process; it must exit 0."""
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", *args], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def test_a_real_contrast_like_collection_goes_to_its_paragraph(tmp_path):
    """plan -> data prepare -> collect -> flatten -> validate -> audit -> render --contrast, on
    real stack runs: the paragraph says the package is not S7's cell and quotes what it ran."""
    plan = write_scoped_plan(tmp_path / "contrast.toml", "contrastsmoke", tmp_path / "data", SMOKE)
    deepgreen("data", "prepare", "--plan", str(plan))
    deepgreen("collect", "--plan", str(plan), "--out", str(tmp_path / "out"), "--allow-missing-counters")
    pkg = tmp_path / "pkg"
    deepgreen("flatten", str(tmp_path / "out" / "runs"), "--out", str(pkg))
    deepgreen("validate", str(pkg))
    said = deepgreen("audit", str(pkg), "--json")
    findings = {f["id"]: f for f in json.loads(said[said.index("{"):])["findings"]}
    assert {findings[i]["basis"] for i in ("S7.scope", "S7.runs", "S7.utilisation-windows")} \
        == {"not applicable"}
    deepgreen("render", str(COLLECTED), "--contrast", str(pkg), "--out", str(tmp_path / "generated"))
    paragraph = (tmp_path / "generated" / "contrast.tex").read_text()
    assert "is not the study's declared contrast cell" in paragraph
    assert r"against \CpuUtilTrainPct{} in the main campaign" in paragraph
    assert r"\ContrastControlSpreadTrain{} inside the LibTorch control group" in paragraph
    macros = dict(re.findall(r"^\\newcommand\{\\(Contrast[A-Za-z]+)\}\{(.*)\}$",
                             (tmp_path / "generated" / "numbers.tex").read_text(), re.M))
    assert macros["ContrastRunsTotal"] == r"\num{2}~runs"
    assert (macros["ContrastDataset"], macros["ContrastBatchSize"]) == ("digits", "32")
    assert macros["ContrastCellBatchSize"] == "32" and macros["ContrastRankedQuantity"] == "time"
    assert float(re.search(r"\\num\{([\d.]+)\}", macros["ContrastSpreadTrain"]).group(1)) >= 1.0


ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "contrast"


def test_the_shipped_contrast_package_is_what_synth_makes_of_the_contrast_plan(tmp_path):
    """contrast/ is `deepgreen synth --plan collect/contrast.toml --out contrast/`, marked
    synthetic, and it validates and audits strictly, S7 included."""
    from deepgreen_audit.cli import main

    assert main(["synth", "--plan", str(ROOT / "collect" / "contrast.toml"), "--out", str(tmp_path / "again")]) == 0
    for name in ("datapackage.json", "SHA256SUMS", *(f"{t}.csv" for t in TABLES)):
        assert (tmp_path / "again" / name).read_bytes() == (SHIPPED / name).read_bytes(), name
    descriptor = json.loads((SHIPPED / "datapackage.json").read_text())
    assert descriptor["synthetic"] is True and "SYNTHETIC" in descriptor["title"]
    assert declares_contrast_cell(descriptor["scope"], SPEC)
    assert main(["validate", str(SHIPPED)]) == 0
    assert main(["audit", "--strict", str(SHIPPED)]) == 0
    assert default_contrast() == SHIPPED / "datapackage.json"


def test_the_paragraph_of_the_shipped_contrast_says_it_is_synthetic(conforming, tmp_path):
    """Rendered beside a small main campaign: the synthetic contrast's paragraph says so, and
    sets its utilisation and spreads beside the main campaign's macros."""
    render(conforming, tmp_path / "gen", contrast=SHIPPED)
    paragraph = (tmp_path / "gen" / "contrast.tex").read_text()
    assert r"The contrast package (\ContrastTitle{}) is synthetic" in paragraph
    assert "The study's declared contrast cell (S7) is a campaign of its own" in paragraph
    assert r"against \GpuUtilTrainPct{} in the main campaign" in paragraph
    assert r"(lowest:" in paragraph     # six ecosystems: the lowest and highest are named
    assert r"\SpreadTrain{} over all ecosystems and \ControlSpreadTrain{}" in paragraph
    numbers = (tmp_path / "gen" / "numbers.tex").read_text()
    assert r"\newcommand{\ContrastRunsTotal}{\num{60}~runs}" in numbers
    assert r"\newcommand{\ContrastResolutionPx}{224}" in numbers


#: Text a descriptor's title may carry that would act on a TeX run or a terminal if it reached
#: the paper unescaped: a command, math, a comment, a group, an escape sequence, a bidi override.
HOSTILE_TITLES = ("\\input{/etc/passwd} $x^2$ % rest", "{\\catcode`\\@=11} #1 & _ ~ ^",
                  "\x1b]0;owned\x07 \u202etxt.exe =HYPERLINK(\"x\")",
                  "a comment's end\n\\input{/etc/passwd}\r\\catcode")


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_a_companion_packages_title_reaches_the_paper_escaped(conforming, tmp_path, title):
    """The contrast and initialiser-trial packages' titles are text from data: they reach
    numbers.tex and the paragraphs as escaped TeX, never as a command, math or a control."""
    contrast, trial = tmp_path / "contrast", tmp_path / "trial"
    shutil.copytree(conforming, contrast)
    shutil.copytree(ROOT / "initialiser-trial", trial)
    for package in (contrast, trial):
        descriptor = json.loads((package / "datapackage.json").read_text(encoding="utf-8"))
        descriptor["title"] = title
        (package / "datapackage.json").write_text(json.dumps(descriptor), encoding="utf-8")
    render(conforming, tmp_path / "gen", contrast=contrast, initialiser_trial=trial)
    numbers = (tmp_path / "gen" / "numbers.tex").read_text(encoding="utf-8")
    assert f"\\newcommand{{\\ContrastTitle}}{{{latex_text(title)}}}" in numbers
    trial_tex = (tmp_path / "gen" / "trial.tex").read_text(encoding="utf-8")
    assert latex_text(title) in trial_tex
    for name in ("numbers.tex", "contrast.tex", "trial.tex"):
        text = (tmp_path / "gen" / name).read_text(encoding="utf-8")
        # a header's comment may quote the title (each on one line: no break ends the comment)
        body = "\n".join(line for line in text.splitlines() if not line.startswith("%"))
        assert "\\input{/etc/passwd}" not in body and "$x^2$" not in body, name
        assert "\\catcode" not in body, name
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), name
