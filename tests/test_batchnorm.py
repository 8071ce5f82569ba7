"""BatchNorm's running statistics against a scope's optimiser steps (deepgreen_audit.batchnorm):
the judgement, the collected package's caveat, the plan preview's note and S2.train-eval-gap, on
a real stack run, on synthetic packages and on the shipped one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch import nn

from deepgreen_audit import batchnorm
from deepgreen_audit.audit import audit
from deepgreen_audit.cli import main
from deepgreen_audit.spec import load_spec, scoped
from deepgreen_audit.stacks import models_torch
from deepgreen_audit.stacks.conventions import BATCHNORM_ARCHITECTURES
from deepgreen_audit.synth import write_synthetic
from tests.test_audit_checks import SMALL, edited

ROOT = Path(__file__).resolve().parents[1]
CHECK = "S2.train-eval-gap"


def digits_scope(**changes) -> dict:
    """The specification scoped to ResNet-18 on digits, 2 epochs (24 optimiser steps)."""
    return scoped(load_spec(), {"architectures": ["resnet18"], "datasets": ["digits"], "epochs": 2,
                                **changes})


def test_batchnorm_architectures_are_those_built_with_batchnorm():
    for architecture in load_spec()["S1_model"]["architectures"]:
        model = models_torch.build(architecture, 10)
        has = any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
        assert has == (architecture in BATCHNORM_ARCHITECTURES), architecture


def test_digits_steps_and_what_the_running_statistics_need():
    assert batchnorm.scope_steps_per_epoch(digits_scope(), "digits") == 12          # ceil(1437 / 128)
    assert batchnorm.min_steps(load_spec()) == 100                                   # 10 horizons of 1 / 0.1
    (stats,) = batchnorm.scope_running_statistics(digits_scope())
    assert (stats.steps, stats.follow, stats.epochs_needed) == (24, False, 9)
    assert batchnorm.scope_running_statistics(digits_scope(epochs=9))[0].follow
    # a smoke scope's batch limit caps the steps of any dataset
    limited = batchnorm.scope_running_statistics(scoped(load_spec(), {
        "architectures": ["resnet18"], "datasets": ["cifar100"], "epochs": 3, "max_train_batches": 2}))
    assert [(s.steps, s.follow) for s in limited] == [(6, False)]


def test_accuracy_caveat_names_the_short_configuration_and_the_epochs_that_would_do():
    caveat = batchnorm.accuracy_caveat(digits_scope(architectures=["resnet18", "vgg16"]))
    assert caveat is not None and caveat.count(".") <= 3                           # one sentence
    assert "resnet18 on digits takes 24 optimiser steps (2 epochs of 12)" in caveat
    assert "fewer than the 100" in caveat and "9 epochs would be enough" in caveat
    assert "vgg16" not in caveat                                                     # no BatchNorm
    assert batchnorm.accuracy_caveat(digits_scope(epochs=9)) is None
    assert batchnorm.accuracy_caveat(digits_scope(architectures=["vgg16"])) is None
    assert batchnorm.accuracy_caveat(load_spec()) is None                            # the full design


def test_shipped_synthetic_package_passes():
    report = audit(ROOT / "datapackage.json", select=[CHECK])
    finding = report.finding(CHECK)
    assert finding.status == "pass", finding.message


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("small") / "pkg"
    write_synthetic(out, **SMALL)
    return out


def test_a_gap_in_a_long_enough_scope_is_reported_without_the_batchnorm_explanation(small, tmp_path):
    target = "python-pytorch.resnet18.cifar100.r1"

    def widen(frames):
        blocks = frames["blocks"]
        last = (blocks["run_id"] == target) & (blocks["epoch"] == SMALL["epochs"])
        blocks.loc[last & (blocks["phase"] == "train"), "loss"] = 0.01
        blocks.loc[last & (blocks["phase"] == "eval"), "loss"] = 4.0                  # 0.87 x ln(100)
    finding = audit(edited(small, tmp_path / "pkg", widen), select=[CHECK]).finding(CHECK)
    assert finding.status == "warn" and finding.rows_affected == 1, finding.message
    (row,) = finding.details["evidence"]
    assert (row["run_id"], row["epoch"], row["train_loss"], row["eval_loss"]) == (target, 3, 0.01, 4.0)
    assert row["optimiser_steps"] == 3 * 391 and row["likely_cause"] == "not-batchnorm"
    assert "not that lag" in finding.message and "fewer than" not in finding.message


def test_a_package_without_losses_is_skipped(small, tmp_path):
    def forget(frames):
        frames["blocks"]["loss"] = None
    finding = audit(edited(small, tmp_path / "pkg", forget), select=[CHECK]).finding(CHECK)
    assert finding.status == "skip"


def test_the_plan_preview_notes_a_scope_too_short(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('campaign = "short"\nmaster_seed = 11\nrun_timeout_s = 600\n'
                    f'data_dir = "{tmp_path / "data"}"\n'
                    '[stacks.python-pytorch]\nkind = "python"\nprogram = "stacks/python_pytorch/train.py"\n'
                    '[scope]\necosystems = ["python-pytorch"]\narchitectures = ["resnet18"]\n'
                    'datasets = ["digits"]\nrepetitions = 1\nepochs = 2\ndevice = "cpu"\n')
    assert main(["plan", "--plan", str(plan)]) == 0
    assert "note: Test accuracy does not measure the trained weights" in capsys.readouterr().out


def test_real_short_digits_runs_warn_with_their_cause_and_their_package_says_why():
    """Real runs of four stacks (tests/data/collected/cpu-no-counters, collected by
    scripts/collected_fixtures.py), ResNet-18 on digits for 2 whole epochs (24 steps): the
    training loss falls far below ln(10) while the evaluation, with running statistics that lag
    the weights, stays near it."""
    package = ROOT / "tests" / "data" / "collected" / "cpu-no-counters"
    descriptor = json.loads((package / "datapackage.json").read_text(encoding="utf-8"))
    assert descriptor["measured"]["accuracy_caveat"] == batchnorm.accuracy_caveat(
        scoped(load_spec(), descriptor["scope"]))
    finding = audit(package, select=[CHECK]).finding(CHECK)
    assert finding.status == "warn" and finding.rows_affected == 8, finding.message
    for row in finding.details["evidence"]:
        assert row["train_loss"] < 0.5 and row["eval_loss"] > 1.5, row             # measured, not planted
        assert (row["epoch"], row["optimiser_steps"], row["batchnorm_steps_needed"]) == (2, 24, 100)
        assert row["likely_cause"] == "batchnorm-running-statistics"
    assert "took 24 optimiser steps (2 epochs of 12), fewer than the 100" in finding.message
