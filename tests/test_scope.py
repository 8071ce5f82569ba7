"""A campaign's declared scope is its design: a six-ecosystem re-collection renders and builds
its paper, which says what the scope leaves out and why; a configuration inside the scope
without a completed run still stops the render; the S7 contrast cell is a campaign of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deepgreen_audit.analysis import MissingValue
from deepgreen_audit.analysis.scope import narrowings
from deepgreen_audit.audit import audit
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.render import build
from deepgreen_audit.render.build import paper_dir, render
from deepgreen_audit.resources import project_file
from deepgreen_audit.spec import load_spec
from deepgreen_audit.synth import write_synthetic

SPEC = load_spec()
RUNNABLE = [e for e in SPEC["S6_replication"]["ecosystems"] if e != "r-torch"]
CONTRAST_PLAN = project_file("collect", "contrast.toml")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """The six ecosystems this project can run, every architecture and dataset, short runs."""
    out = tmp_path_factory.mktemp("six") / "pkg"
    write_synthetic(out, seed=11, ecosystems=RUNNABLE, repetitions=3, epochs=2)
    return out


def test_a_narrowed_synthetic_campaign_declares_its_scope(six):
    scope = Package.open(six).descriptor["scope"]
    assert scope == {"ecosystems": RUNNABLE, "repetitions": 3, "epochs": 2}
    (eco, *_) = narrowings(scope)
    assert eco.key == "ecosystems" and eco.left_out[0][0] == "r-torch"
    assert "cannot be installed" in eco.left_out[0][1]


def test_the_full_campaign_declares_no_scope(tmp_path):
    write_synthetic(tmp_path / "full", seed=3, epochs=None)
    assert "scope" not in Package.open(tmp_path / "full").descriptor
    assert narrowings(None) == ()


@pytest.mark.skipif(not (shutil.which("latexmk") and shutil.which("pdftotext")),
                    reason="TeX Live (latexmk) and poppler-utils are needed to build the PDF")
def test_a_six_ecosystem_campaign_renders_and_builds_a_paper_naming_its_scope(six, tmp_path):
    paper = tmp_path / "paper"
    paper.mkdir()
    shutil.copy(paper_dir() / "paper.tex", paper / "paper.tex")
    render(six, paper / "generated")
    scope_tex = (paper / "generated" / "scope.tex").read_text()
    assert "It leaves out the ecosystem R/torch (because R/torch cannot be installed" in scope_tex
    pdf = build.build_pdf(paper)
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                                   text=True).stdout.split())
    assert "across six deep-learning stacks" in text
    assert "leaves out the ecosystem R/torch (because R/torch cannot be installed" in text
    assert "repeated 3 times, not 5" in text and "2 epochs, not 30" in text
    assert "Rust/tch" in text and "load the same exported TorchScript" in text


def _without_runs(src, out, ecosystem: str):
    """A copy of `src` whose tables lack every run of `ecosystem` (the scope unchanged)."""
    package = Package.open(src)
    tables = {}
    runs = package.text("runs")
    dropped = {row[0] for row in runs.rows if row[runs.header.index("ecosystem")] == ecosystem}
    for name in TABLES:
        table = package.text(name)
        table.rows = [row for row in table.rows if row[0] not in dropped]
        tables[name] = table
    write_package(tables, out, package.meta)
    return out


def test_a_configuration_inside_the_scope_without_a_run_stops_the_render(six, tmp_path):
    pkg = _without_runs(six, tmp_path / "no-dl4j", "java-dl4j")
    with pytest.raises(MissingValue, match="ecosystem=java-dl4j"):
        render(pkg, tmp_path / "generated")


def test_a_scope_without_the_control_group_renders_without_its_spread(tmp_path):
    write_synthetic(tmp_path / "two", seed=2, ecosystems=["python-pytorch", "python-jax"],
                    datasets=["cifar100"], repetitions=3, epochs=2, reason="a smoke test")
    report = render(tmp_path / "two", tmp_path / "generated")
    numbers = (tmp_path / "generated" / "numbers.tex").read_text()
    assert "\\ControlGroupfalse" in numbers and "ControlSpreadTrainMax" not in numbers
    assert "scope.tex" in report.files
    scope_tex = (tmp_path / "generated" / "scope.tex").read_text()
    assert "narrower than the full design of the specification: a smoke test." in scope_tex
    assert "datasets Fashion-MNIST and Tiny ImageNet" in scope_tex


def test_an_unknown_scope_key_in_a_descriptor_is_refused(six, tmp_path):
    package = Package.open(six)
    out = tmp_path / "odd"
    write_package({n: package.text(n) for n in TABLES}, out,
                  {**package.meta, "scope": {"ecosystems": RUNNABLE, "colour": "red"}})
    with pytest.raises(UserError, match="declared scope must be a table of"):
        render(out, tmp_path / "generated")


# ---------------------------------------------------------------- the S7 contrast campaign

def test_the_contrast_plan_declares_the_specifications_contrast_cell():
    cell = SPEC["S3_data"]["contrast_cell"]
    plan = load_plan(CONTRAST_PLAN)
    assert plan.scope["datasets"] == [cell["dataset"]]
    assert plan.scope["batch_size"] == cell["batch_size"]
    assert plan.scope["input_resolution_px"] == cell["input_resolution_px"]
    assert plan.scope["ecosystems"] == RUNNABLE
    assert set(plan.stacks) == set(RUNNABLE)        # from plan.toml, through stacks_from
    jobs = plan.jobs
    assert len(jobs) == len(RUNNABLE) * 2 * 5
    assert len({j.seed for j in jobs}) == len(jobs)
    assert {j.recipe["batch_size"] for j in jobs} == {cell["batch_size"]}
    assert {j.recipe["input_resolution_px"] for j in jobs} == {cell["input_resolution_px"]}
    main = {j.seed for j in load_plan().jobs}
    assert main.isdisjoint(j.seed for j in jobs)


def test_plan_print_lists_the_contrast_runs_with_distinct_seeds(tmp_path):
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit.cli", "plan", "--plan",
                           str(CONTRAST_PLAN), "--print"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()[1:]]
    assert len(rows) == 60 and len({r[2] for r in rows}) == 60
    assert all(".imagenette.r" in r[3] for r in rows)


def test_the_synthetic_contrast_campaign_audits_clean_against_its_scope(tmp_path):
    from deepgreen_audit.cli import main

    out = tmp_path / "contrast"
    assert main(["synth", "--plan", str(CONTRAST_PLAN), "--out", str(out)]) == 0
    scope = Package.open(out).descriptor["scope"]
    assert tomllib.loads(CONTRAST_PLAN.read_text())["scope"] == scope
    report = audit(out)
    assert report.counts.get("fail", 0) == 0 and report.counts.get("warn", 0) == 0, \
        report.format_text()
    assert main(["audit", "--strict", str(out)]) == 0
    # the contrast's larger inputs and smaller batches cost more time per sample
    runs = Package.open(out).text("runs")
    assert {r[runs.header.index("batch_size")] for r in runs.rows} == {"32"}


def test_stacks_from_resolves_against_the_checkout_as_every_path_of_a_plan(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text('campaign = "x"\nstacks_from = "collect/plan.toml"\n'
                    '[stacks.python-jax]\nkind = "python"\nprogram = "mine.py"\n')
    stacks = load_plan(plan).stacks
    assert set(stacks) == set(RUNNABLE)  # the shipped plan's, from a plan in another folder
    assert stacks["python-pytorch"].program == ROOT / "stacks/python_pytorch/train.py"
    assert stacks["python-jax"].program == ROOT / "mine.py"  # the plan's own table wins
    (tmp_path / "plan.toml").write_text("")  # beside the plan: not what a relative path names
    plan.write_text('campaign = "x"\nstacks_from = "plan.toml"\n')
    with pytest.raises(UserError) as refused:
        load_plan(plan)
    assert str(refused.value) == (
        f"{plan}, key 'stacks_from': 'plan.toml' resolves to {ROOT / 'plan.toml'}, which is no "
        "file (a relative stacks_from is read from the checkout, as every path of a plan)")
    plan.write_text(f'campaign = "x"\nstacks_from = "{plan}"\n')
    with pytest.raises(UserError, match="names this plan itself"):
        load_plan(plan)


def test_a_scope_device_other_than_cuda_or_cpu_is_a_plan_error(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text('campaign = "x"\n[scope]\ndevice = "tpu"\n')
    with pytest.raises(UserError, match=r"key 'scope.device': 'tpu' is not a device; did you "
                                        r"mean 'cpu'\? \(valid: cuda, cpu\)"):
        load_plan(plan)
    plan.write_text('campaign = "x"\n[scope]\ndevice = "cpu"\nbatch_size = 0\n')
    with pytest.raises(UserError, match="scope.batch_size"):
        load_plan(plan)
