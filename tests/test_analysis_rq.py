"""The analyses the paper's research questions add: collapses on the susceptible cells with
the energy collapsed runs wasted, the rule on naming a cheapest stack, utilisation per stack
and architecture with the sampler's coverage, campaign-level energy, and the defect-class
table generated from the audit's registry."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sps

from deepgreen_audit.analysis import (
    Design,
    accuracy,
    analyse,
    campaign,
    energy,
    load_tables,
    stats,
    utilisation,
)
from deepgreen_audit.analysis.data import MissingValue
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.render import render, tables as render_tables
from deepgreen_audit.spec import load_spec
from deepgreen_audit.synth import SynthModel, write_synthetic

ECOSYSTEMS = ["python-pytorch", "java-dl4j"]
SMALL = {"ecosystems": ECOSYSTEMS, "architectures": ["resnet18", "vgg16"],
         "datasets": ["cifar100"], "repetitions": 2, "epochs": 2}
#: Blocks long enough for both phases to name a cheapest stack (default: eval ~2 s, train ~9 s).
LONG_BLOCKS = SynthModel().with_overrides({
    "architecture_train_s_per_10k": {"resnet18": 6.0, "vgg16": 8.0},
    "architecture_eval_s_per_10k": {"resnet18": 30.0, "vgg16": 40.0}})


def _design(**changes) -> Design:
    spec = copy.deepcopy(load_spec())
    spec["analysis"].update(changes)
    return Design.from_spec(spec, ecosystems=ECOSYSTEMS, architectures=SMALL["architectures"],
                            datasets=SMALL["datasets"])


@pytest.fixture(scope="module")
def short(tmp_path_factory) -> Path:
    """The default model: evaluation blocks far shorter than the rule's minimum."""
    out = tmp_path_factory.mktemp("short") / "pkg"
    write_synthetic(out, seed=11, **SMALL)
    return out


@pytest.fixture(scope="module")
def long(tmp_path_factory) -> Path:
    """Blocks of both phases longer than the rule's minimum."""
    out = tmp_path_factory.mktemp("long") / "pkg"
    write_synthetic(out, seed=11, model=LONG_BLOCKS, **SMALL)
    return out


# ---------------------------------------------------------------- collapses

def _final(architecture: str, runs: int, collapsed: int, start: int = 0) -> pd.DataFrame:
    """`runs` final accuracies on cifar100 (chance 1 %), the first `collapsed` at chance."""
    return pd.DataFrame({
        "run_id": [f"{architecture}-{start + i}" for i in range(runs)],
        "ecosystem": "python-pytorch", "architecture": architecture, "dataset": "cifar100",
        "epochs": 30, "test_accuracy": [0.01 if i < collapsed else 0.55 for i in range(runs)]})


@pytest.mark.parametrize("collapsed", [0, 3])
def test_the_bound_on_the_susceptible_cells_is_scipys_one_sided_clopper_pearson(collapsed):
    """105 VGG-16 runs beside 105 ResNet-18 runs that collapsed a lot: only VGG-16 counts."""
    final = pd.concat([_final("vgg16", 105, collapsed), _final("resnet18", 105, 40)])
    design = Design.from_spec()
    assert ("vgg16", "cifar100") in design.collapse_susceptible
    c = accuracy.susceptible_collapses(final, design)
    assert (c["collapsed"], c["runs"]) == (collapsed, 105)
    reference = sps.binomtest(collapsed, 105, alternative="less").proportion_ci(
        confidence_level=0.95, method="exact").high
    assert c["upper_bound"] == pytest.approx(reference, rel=1e-9)
    # over all runs the pooled bound is another, larger number here
    assert accuracy.collapses(final, design)["collapsed"] == collapsed + 40


def test_zero_of_105_is_2_8_percent_one_sided_and_the_studys_4_2_is_zero_of_70():
    """The documented formula (one-sided, 1 - alpha ** (1 / n) for 0 of n) against the two
    readings it is easily confused with."""
    one_sided = stats.clopper_pearson_upper(0, 105, 0.95)
    assert one_sided == pytest.approx(1 - 0.05 ** (1 / 105))
    assert round(100 * one_sided, 1) == 2.8
    two_sided_upper = sps.beta.ppf(0.975, 1, 105)       # alpha / 2: another, wider interval
    assert round(100 * two_sided_upper, 2) == 3.45
    assert round(100 * stats.clopper_pearson_upper(0, 70, 0.95), 1) == 4.2


def test_the_susceptible_cells_come_from_the_specification():
    assert _design(collapse_susceptible_cells=["resnet18/cifar100"]).collapse_susceptible == \
        (("resnet18", "cifar100"),)
    with pytest.raises(UserError, match="collapse_susceptible_cells"):
        _design(collapse_susceptible_cells=["vgg16"])
    # an architecture the (scoped) design does not hold is left out
    narrow = Design.from_spec(architectures=["resnet18"])
    assert narrow.collapse_susceptible == ()
    with pytest.raises(MissingValue, match="susceptible"):
        accuracy.susceptible_collapses(_final("resnet18", 5, 0), narrow)


def _study_final(collapsed: int = 0) -> pd.DataFrame:
    """The study's design's final accuracies: 7 ecosystems x 2 architectures x 3 datasets x 5
    repetitions, ResNet-18 never collapsing, VGG-16 collapsing `collapsed` times on CIFAR-100."""
    spec = load_spec()
    rows = []
    for eco in spec["S6_replication"]["ecosystems"]:
        for arch in spec["S1_model"]["architectures"]:
            for ds in spec["S3_data"]["datasets"]:
                for rep in range(1, 6):
                    rows.append({"run_id": f"{eco}.{arch}.{ds}.r{rep}", "ecosystem": eco,
                                 "architecture": arch, "dataset": ds, "epochs": 30,
                                 "test_accuracy": 0.5})
    final = pd.DataFrame(rows)
    hit = final.index[(final["architecture"] == "vgg16") & (final["dataset"] == "cifar100")]
    final.loc[hit[:collapsed], "test_accuracy"] = 0.01
    return final


def test_the_studys_4_2_percent_is_0_of_70_runs_on_the_named_susceptible_cells():
    """The study's counts (0 of 70 on VGG-16's two many-class cells, not 0 of its 105 runs)
    give its bound, and the paper names the cells and why."""
    spec = load_spec()
    assert len(spec["S6_replication"]["ecosystems"]) == 7
    design = Design.from_spec(spec)
    assert design.collapse_susceptible == (("vgg16", "cifar100"), ("vgg16", "tiny-imagenet"))
    c = accuracy.susceptible_collapses(_study_final(), design)
    assert (c["collapsed"], c["runs"]) == (0, 70)
    assert round(100 * c["upper_bound"], 1) == 4.2
    c = accuracy.susceptible_collapses(_study_final(collapsed=2), design)
    assert (c["collapsed"], c["runs"]) == (2, 70)
    from deepgreen_audit.analysis.values import Text
    from deepgreen_audit.render.environment import format_text
    assert format_text(Text("vgg16/cifar100;vgg16/tiny-imagenet", "", kind="cells")) == \
        "VGG-16 on CIFAR-100 and VGG-16 on Tiny ImageNet"


def test_the_wasted_share_is_the_collapsed_runs_training_energy_over_all():
    final = pd.concat([_final("vgg16", 3, 1), _final("resnet18", 2, 0, start=10)])
    totals = pd.DataFrame({
        "run_id": [*final["run_id"], *final["run_id"]],
        "phase": ["train"] * 5 + ["eval"] * 5,
        "energy_j": [300.0, 100.0, 100.0, 250.0, 250.0, 7.0, 7.0, 7.0, 7.0, 7.0]})
    share = accuracy.wasted_training_share(final, totals, Design.from_spec())
    assert share == pytest.approx(300.0 / 1000.0)


# ---------------------------------------------------------------- naming a cheapest stack

def test_short_inference_blocks_name_no_cheapest_stack(short):
    design = _design()
    tables = load_tables(Package.open(short))
    rule = energy.cheapest_rule(tables.blocks, design)
    assert rule["eval"]["median_block_s"] < rule["eval"]["threshold_s"] == 10.0
    r = analyse(tables, design)
    assert r.flags["CheapestNamedEval"] is False
    assert "CheapestEvalMostly" not in r.values and "CostliestEvalMostly" not in r.values
    panel = {p["phase"]: p for p in render_tables.energy_context(r, design)["panels"]}
    assert not any(v["cheapest"] for row in panel["eval"]["rows"] for v in row["entries"])
    assert panel["eval"]["names_cheapest"] is False
    cells = render_tables.cells_context(r, design)["rows"]
    assert {row["cheapest"] for row in cells if row["phase"] == "eval"} == {None}


def test_long_blocks_name_a_cheapest_stack_in_both_phases(long):
    design = _design()
    r = analyse(load_tables(Package.open(long)), design)
    assert r.flags["CheapestNamedEval"] is True and r.flags["CheapestNamedTrain"] is True
    assert r.values["MedianBlockEvalS"].value >= 10.0
    panel = {p["phase"]: p for p in render_tables.energy_context(r, design)["panels"]}
    for column in range(len(design.cells)):
        bold = [row["entries"][column]["cheapest"] for row in panel["eval"]["rows"]]
        assert bold.count(True) == 1


def test_the_minimum_is_the_specifications(short):
    """The same package names a cheapest inference stack when the specification asks for one
    sampler interval only (its evaluation blocks last about two)."""
    r = analyse(load_tables(Package.open(short)), _design(cheapest_min_sampler_intervals=1))
    assert r.flags["CheapestNamedEval"] is True and "CheapestEvalMostly" in r.values


# ---------------------------------------------------------------- utilisation

def test_utilisation_has_a_row_per_stack_architecture_and_phase(short):
    design = _design()
    tables = load_tables(Package.open(short))
    frame = utilisation.utilisation_by_architecture(tables, design)
    assert list(zip(frame["ecosystem"], frame["architecture"], frame["phase"])) == [
        (e, a, p) for e in ECOSYSTEMS for a in SMALL["architectures"] for p in ("train", "eval")]
    assert set(frame["runs"]) == {SMALL["repetitions"]}
    table = render_tables.utilisation_context(analyse(tables, design), design)
    assert [(row["ecosystem"], row["architecture"]) for row in table["rows"]] == [
        (e, a) for e in ECOSYSTEMS for a in SMALL["architectures"]]


def test_the_sampler_coverage_counts_the_runs_with_samples_inside_blocks(short):
    tables = load_tables(Package.open(short))
    runs = len(tables.runs)
    assert utilisation.sampler_coverage(tables) == {"covered": runs, "runs": runs}
    gone = tables.runs["run_id"].iloc[0]
    fewer = tables.__class__(tables.runs, tables.blocks,
                             tables.samples[tables.samples["run_id"] != gone],
                             tables.environment, tables.optional)
    assert utilisation.sampler_coverage(fewer) == {"covered": runs - 1, "runs": runs}


# ---------------------------------------------------------------- campaign-level energy

def test_slurm_energy_is_summed_where_recorded(short):
    tables = load_tables(Package.open(short))
    slurm = campaign.slurm_energy(tables)
    assert slurm is not None and slurm["runs"] == len(tables.runs)
    expected = tables.optional["runs"]["slurm_consumed_energy_j"].sum()
    assert slurm["slurm_j"] == pytest.approx(expected)
    assert slurm["blocks_j"] == pytest.approx(tables.blocks["energy_j"].sum())
    empty = tables.optional["runs"].assign(slurm_consumed_energy_j=float("nan"))
    none = tables.__class__(tables.runs, tables.blocks, tables.samples, tables.environment,
                            {"runs": empty})
    assert campaign.slurm_energy(none) is None
    assert analyse(none, _design()).flags["SlurmEnergy"] is False


# ---------------------------------------------------------------- rendered

def _macros(folder: Path) -> dict[str, str]:
    text = (folder / "numbers.tex").read_text()
    return dict(re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$", text, re.MULTILINE))


def test_render_writes_the_new_numbers_tables_and_flags(short, tmp_path):
    render(short, tmp_path / "gen", design=_design())
    macros = _macros(tmp_path / "gen")
    for name in ("CollapseSusceptibleUpperPct", "CollapseSusceptibleRuns", "CollapseWastedTrainPct",
                 "SamplerCoveragePct", "GpuUtilTrainArchPctMax", "MedianBlockEvalS",
                 "CheapestMinBlockS", "SlurmEnergyWh", "AuditChecksCount", "DefectClassesCount"):
        assert macros[name].startswith((r"\num{", r"\qty{")), name
    assert macros["CollapseSusceptibleRuns"] == r"\num{4}~runs"     # 2 stacks x 2 reps of VGG-16
    numbers = (tmp_path / "gen" / "numbers.tex").read_text()
    assert "\\CheapestNamedEvalfalse\n\\newif" in numbers       # one flag a line
    energy_table = (tmp_path / "gen" / "table-energy.tex").read_text()
    evaluation = energy_table.split(r"\emph{evaluation}")[1]
    assert r"\bfseries" not in evaluation and "too short" in evaluation
    utilisation_table = (tmp_path / "gen" / "table-utilisation.tex").read_text()
    assert utilisation_table.count("VGG-16") == len(ECOSYSTEMS)


def test_the_defect_table_lists_every_section_and_what_the_audit_found(short, tmp_path, copy_of):
    from deepgreen_audit.suite.registry import SUITES

    render(short, tmp_path / "clean", design=_design())
    clean = (tmp_path / "clean" / "table-defects.tex").read_text()
    for c in audit_checks():
        assert c.id.split(".", 1)[1].replace("_", r"\_") in clean, c.id
    assert clean.count(r" \\") - clean.count(r"\\ ") >= len(SUITES["audit"])
    assert "yes:" not in clean

    planted = tmp_path / "planted"
    write_synthetic(planted, seed=11, defects=["modelled-cpu"], **SMALL)
    render(planted, tmp_path / "found", design=_design())
    found = (tmp_path / "found" / "table-defects.tex").read_text()
    assert "yes:" in found
    assert _macros(tmp_path / "found")["AuditChecksFound"] != r"\num{0}"
