"""Each fact once: the constants live in the specification, the schemas or `units`, and the
analysis, the audit, parity, the plan and the generator read them from there."""

from __future__ import annotations

import ast
import copy
import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from deepgreen_audit import spec as spec_module
from deepgreen_audit.analysis import accuracy, comparisons
from deepgreen_audit.analysis.data import PHASES, Design
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.spec import load_spec
from deepgreen_audit.units import J_PER_KWH

PACKAGE = Path(__file__).resolve().parents[1] / "deepgreen_audit"
#: Names that once held a fact the specification now states; no module may define them again.
RETIRED_NAMES = {"ALPHA", "BOOTSTRAP_SEED", "BOOTSTRAP_RESAMPLES", "COLLAPSE_MARGIN",
                 "COLLAPSE_CONFIDENCE", "TOLERANCES", "REFERENCE", "DEFAULT_SEED"}


def _modules(*under: str):
    for folder in under:
        root = PACKAGE / folder
        for path in sorted([root] if root.suffix == ".py" else root.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _module_constants(tree: ast.Module):
    """(name, value node) of every module-level assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            yield node.target.id, node.value


def test_the_master_seed_and_joules_per_kwh_are_written_once():
    seed = load_spec()["S6_replication"]["master_seed"]
    found = []
    for path, tree in _modules("."):
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and type(node.value) in (int, float)
                    and (node.value == seed or (node.value == J_PER_KWH and path.name != "units.py"))):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value}")
    assert not found, found
    plan = (PACKAGE.parent / "collect" / "plan.toml").read_text(encoding="utf-8")
    assert str(seed) not in plan


def test_no_module_defines_a_retired_constant_or_the_phases_again():
    found = []
    for path, tree in _modules("."):
        for name, value in _module_constants(tree):
            if name in RETIRED_NAMES:
                found.append(f"{path.relative_to(PACKAGE)}: {name}")
            literal = isinstance(value, (ast.Tuple, ast.List)) and all(
                isinstance(e, ast.Constant) for e in value.elts)
            if literal and {e.value for e in value.elts} == set(PHASES):
                found.append(f"{path.relative_to(PACKAGE)}: {name} restates the phases")
    assert not found, found


def test_analysis_and_parity_define_no_spec_constant_of_their_own():
    values = {v for section in ("analysis", "parity") for v in load_spec()[section].values()
              if type(v) in (int, float)}
    found = [f"{path.relative_to(PACKAGE)}: {name}"
             for path, tree in _modules("analysis", "render", "collect/parity.py", "audit")
             for name, value in _module_constants(tree)
             if isinstance(value, ast.Constant) and type(value.value) in (int, float)
             and value.value in values]
    assert not found, found
    for path, tree in _modules("analysis"):
        for node in ast.walk(tree):
            if isinstance(node, ast.arguments):
                defaults = [*node.defaults, *filter(None, node.kw_defaults)]
                assert not [d.value for d in defaults if isinstance(d, ast.Constant)
                            and type(d.value) in (int, float) and d.value in values], path


def test_audit_checks_compare_with_no_unnamed_tolerance():
    """A float in a comparison of a check (or an rtol/atol) is a tolerance: it belongs in [audit]."""
    found = []
    for path, tree in _modules("audit/checks"):
        for node in ast.walk(tree):
            scopes = [node] if isinstance(node, ast.Compare) else \
                [node.value] if isinstance(node, ast.keyword) and node.arg in ("rtol", "atol") else []
            for scope in scopes:
                found += [f"{path.name}:{c.lineno} {c.value}" for c in ast.walk(scope)
                          if isinstance(c, ast.Constant) and isinstance(c.value, float)
                          and c.value not in (0.0, 1.0)]
    assert not found, found


def test_every_audit_tolerance_is_read_by_a_check():
    from dataclasses import fields

    from deepgreen_audit.spec import AuditTolerances

    readers = [*(PACKAGE / "audit").rglob("*.py"), *(PACKAGE / "codecarbon").rglob("*.py"),
               PACKAGE / "batchnorm.py"]
    text = "".join(p.read_text(encoding="utf-8") for p in readers)
    names = [f.name for f in fields(AuditTolerances)]
    assert sorted(names) == sorted(k for k in load_spec()["audit"] if k not in AuditTolerances.PROSE)
    assert [n for n in names if f".{n}" not in text] == []


def test_the_phases_are_the_blocks_schema_enum_everywhere():
    from deepgreen_audit.collect import harness

    synth_generate = importlib.import_module("deepgreen_audit.synth.generate")  # not synth.generate()

    enum = load_schema("blocks").field("phase").enum
    assert PHASES == harness.PHASES == synth_generate.PHASES == enum


def _spec_with(**changes) -> dict:
    spec = copy.deepcopy(load_spec())
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        spec[section][key] = value
    return spec


def test_the_analysis_follows_the_specification():
    design = Design.from_spec(_spec_with(**{"analysis.alpha": 0.2, "analysis.bootstrap_resamples": 17,
                                            "analysis.collapse_margin_fraction": 0.001,
                                            "S6_replication.master_seed": 5}))
    assert (design.alpha, design.bootstrap_resamples, design.bootstrap_seed) == (0.2, 17, 5)
    table = pd.DataFrame({"p": [0.01, 0.1, 0.5], "n_a": 5, "n_b": 5, "a12": 0.5,
                          "survives": False})
    assert comparisons.summary(table, design)["uncorrected_below_alpha"] == 2
    assert comparisons.summary(table, Design.from_spec())["uncorrected_below_alpha"] == 1
    assert comparisons.pair_seed(design, "a") != comparisons.pair_seed(Design.from_spec(), "a")
    final = pd.DataFrame({"dataset": ["cifar100"], "test_accuracy": [0.025]})   # chance 0.01
    assert accuracy.collapses(final, Design.from_spec())["collapsed"] == 1
    assert accuracy.collapses(final, design)["collapsed"] == 0


def test_every_analysis_constant_is_read_by_the_analysis():
    text = "".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "analysis").rglob("*.py"))
    unread = [key for key, value in load_spec()["analysis"].items()
              if not isinstance(value, (str, dict)) and f'"{key}"' not in text]
    assert not unread


@pytest.mark.parametrize("excluded", [0, 1])
def test_the_phase_totals_leave_out_the_warmup_epochs_the_specification_names(tiny_package, excluded):
    """Whatever [analysis] warmup_epochs_excluded says, the phase totals sum the epochs after
    it, the paper's text says which, and so does S6.warmup."""
    from deepgreen_audit.analysis import energy, load_tables
    from deepgreen_audit.audit.checks.replication import _warmup_rule
    from deepgreen_audit.package.descriptor import Package

    tables = load_tables(Package.open(tiny_package))
    design = Design.from_spec(_spec_with(**{"analysis.warmup_epochs_excluded": excluded}))
    totals = energy.phase_totals(tables, design)
    b = tables.blocks
    for _, row in totals.iterrows():
        kept = b[(b["run_id"] == row["run_id"]) & (b["phase"] == row["phase"])
                 & (b["epoch"] > excluded)]
        assert row["blocks"] == len(kept) == 2 - excluded
        assert row["duration_s"] == kept["duration_s"].sum()
    assert ("warm-up epoch included" in energy.counted_epochs_text(design.warmup_epochs_excluded)) \
        == (excluded == 0)
    ctx = SimpleNamespace(spec=_spec_with(**{"analysis.warmup_epochs_excluded": excluded}))
    assert f"warmup_epochs_excluded = {excluded}" in _warmup_rule(ctx)
    assert ("include every epoch" in _warmup_rule(ctx)) == (excluded == 0)


def test_the_warmup_count_must_be_a_count():
    from deepgreen_audit.errors import UserError

    with pytest.raises(UserError, match="warmup_epochs_excluded must be an integer >= 0"):
        Design.from_spec(_spec_with(**{"analysis.warmup_epochs_excluded": -1}))


def test_parity_follows_the_specification(monkeypatch):
    from deepgreen_audit.collect import parity

    changed = _spec_with(**{"parity.logits_abs_tolerance": 0.5, "parity.reference": "python-jax"})
    monkeypatch.setattr(parity, "load_spec", lambda: changed)
    assert parity.tolerances()["logits"]["atol"] == 0.5
    assert parity.reference_stack() == "python-jax"
    probe = lambda logits: SimpleNamespace(logits={"eval": np.array(logits)}, loss={"eval": 1.0})  # noqa: E731
    ctx = SimpleNamespace(reference=probe([0.0, 0.0]), probe=probe([0.3, 0.0]),
                          tolerances=parity.tolerances())
    assert parity.logits_eval(ctx).ok
    ctx.tolerances = parity.tolerances(load_spec())
    assert not parity.logits_eval(ctx).ok


@pytest.fixture(scope="module")
def small_package(tmp_path_factory) -> Path:
    from deepgreen_audit.synth import write_synthetic

    out = tmp_path_factory.mktemp("facts") / "pkg"
    write_synthetic(out, ecosystems=["python-pytorch", "java-dl4j"], architectures=["resnet18"],
                    datasets=["cifar100"], repetitions=2, epochs=2)
    return out


SMALL = {"S6_replication.repetitions": 2, "S2_optimisation.epochs": 2}


def _status(package: Path, check_id: str, **changes) -> str:
    from deepgreen_audit.audit import audit

    report = audit(package, spec=_spec_with(**SMALL, **changes), select=[check_id])
    return report.finding(check_id).status


@pytest.mark.parametrize("check_id, key, value", [
    ("S5.units", "kwh_suspect_power_w", 1e9),
    ("S5.units", "kwh_conversion_relative_tolerance", -1.0),
    ("S5.energy-domains", "codecarbon_domain_sum_relative_tolerance", -1.0),
    ("S5.sampler", "sampler_step_tolerance_fraction", -1.0),
])
def test_the_audit_follows_the_specification(small_package, check_id, key, value):
    assert _status(small_package, check_id) == "pass"
    assert _status(small_package, check_id, **{f"audit.{key}": value}) == "fail"


def test_the_recipe_check_takes_its_tolerance_from_the_specification(small_package):
    near = load_spec()["S2_optimisation"]["learning_rate"] * (1 + 1e-9)
    assert _status(small_package, "S2.recipe", **{"S2_optimisation.learning_rate": near}) == "fail"
    assert _status(small_package, "S2.recipe", **{"S2_optimisation.learning_rate": near,
                                                  "audit.recipe_relative_tolerance": 1e-6}) == "pass"


def test_the_plan_and_the_generator_take_the_specification_master_seed(tmp_path, monkeypatch):
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.synth.model import CODECARBON_CONFIG_PLACEHOLDER, SynthModel

    plan = tmp_path / "plan.toml"
    plan.write_text('campaign = "test"\nrun_timeout_s = 60\n[stacks.python-pytorch]\nkind = "python"\n'
                    'program = "stacks/python_pytorch/train.py"\n[scope]\necosystems = ["python-pytorch"]\n')
    assert load_plan(plan).master_seed == spec_module.master_seed()
    s5 = load_spec()["S5_measurement"]
    model = SynthModel()
    assert (model.codecarbon_tracking_mode, model.min_block_s, model.codecarbon_cpu_method,
            model.codecarbon_gpu_method) == (s5["codecarbon_tracking_mode"], s5["codecarbon_interval_s"],
                                             s5["cpu_power_method"], s5["gpu_power_method"])
    assert f"tracking_mode = {s5['codecarbon_tracking_mode']}\n" in CODECARBON_CONFIG_PLACEHOLDER
    from deepgreen_audit.synth import model as synth_model

    monkeypatch.setattr(synth_model, "load_spec", lambda: _spec_with(
        **{"S5_measurement.codecarbon_tracking_mode": "process"}))
    assert SynthModel().codecarbon_tracking_mode == "process"
