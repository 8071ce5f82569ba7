"""Planted effects are recovered: a synthetic campaign with another seed and other spreads.

The campaign is drawn with a seed other than the default and a model whose
ecosystem multipliers, noise and CodeCarbon behaviour differ from the
defaults; the analysis must give back the planted values (from the truth
file) within the tolerances stated in each test.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats as sps

from deepgreen_audit.analysis import Design, accuracy, analyse, energy, instruments, load_tables, utilisation
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.synth import TRUTH_FILE, SynthModel, write_synthetic

ECOSYSTEMS = ["python-pytorch", "cpp-libtorch", "rust-tch", "java-dl4j"]
CAMPAIGN = dict(ecosystems=ECOSYSTEMS, architectures=["resnet18"],
                datasets=["fashion-mnist", "cifar100"], repetitions=5, epochs=6)
PLANTED = SynthModel().with_overrides({
    "ecosystem_time": {"java-dl4j": 3.0, "cpp-libtorch": 0.8, "rust-tch": 1.15},
    "ecosystem_gpu_utilization_pct": {"java-dl4j": 47.0, "rust-tch": 90.0},
    "ecosystem_accuracy_offset": {"java-dl4j": -0.05, "rust-tch": 0.01},
    "run_time_sigma": 0.05,
    "codecarbon_overhang_s": [0.4, 1.4],
    "codecarbon_energy_bias": 0.03,
    "codecarbon_ram_power_w": 0.0,
})
SEED = 777


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("planted") / "pkg"
    write_synthetic(out, seed=SEED, model=PLANTED, **CAMPAIGN)
    truth = json.loads((out / TRUTH_FILE).read_text())
    design = Design.from_spec(ecosystems=ECOSYSTEMS, architectures=CAMPAIGN["architectures"],
                              datasets=CAMPAIGN["datasets"])
    tables = load_tables(Package.open(out))
    return tables, design, truth, analyse(tables, design)


def test_cell_spreads_and_cheapest_ecosystem_are_recovered(planted):
    _, design, truth, results = planted
    for _, row in results.spreads.iterrows():
        key = f"{row['architecture']}.{row['dataset']}.{row['phase']}"
        # tolerance: 6 % relative (run noise 5 %, medians of 5 on each side)
        assert row["spread"] == pytest.approx(truth["spreads"][key]["max_over_min"], rel=0.06)
        assert row["cheapest"] == truth["spreads"][key]["min_ecosystem"]
        assert row["most_expensive"] == truth["spreads"][key]["max_ecosystem"]
        assert row["control_spread"] == pytest.approx(
            truth["control_group_spreads"][key]["max_over_min"], rel=0.06)
        assert row["spread_low"] <= row["spread"] <= row["spread_high"]


def test_configuration_medians_follow_the_planted_phase_energy(planted):
    _, _, truth, results = planted
    for _, row in results.medians.iterrows():
        cfg = truth["configurations"][f"{row['ecosystem']}.{row['architecture']}.{row['dataset']}"]
        # tolerance: 8 % (noise-free expectation vs a median of 5 noisy runs)
        assert row["energy_j"] == pytest.approx(cfg[row["phase"]]["phase_energy_j"], rel=0.08)


def test_between_run_variability_recovers_the_planted_noise(planted):
    _, _, truth, results = planted
    sigma = truth["model"]["run_time_sigma"]
    cv = results.values["CvTrainMedianPct"].value / 100
    # tolerance: within 40 % of the planted lognormal sigma (n = 5 per configuration)
    assert 0.6 * sigma <= cv <= 1.4 * sigma


def test_instrument_agreement_recovers_bias_and_overhang(planted):
    tables, design, truth, results = planted
    lo, hi = truth["codecarbon_overhang_s"]["low"], truth["codecarbon_overhang_s"]["high"]
    expected_share = (hi - design.codecarbon_interval_s) / (hi - lo)
    agreement = instruments.agreement(instruments.paired_blocks(tables.blocks),
                                      design.codecarbon_interval_s)
    # tolerance: 0.08 absolute (a few hundred blocks, binomial sd about 0.03)
    assert agreement["overhang_share"] == pytest.approx(expected_share, abs=0.08)
    # no RAM term planted: the median difference is the bias (tolerance 0.5 points)
    assert agreement["median_relative_difference"] == pytest.approx(
        truth["codecarbon_energy"]["bias"], abs=0.005)
    # the worst understatement: CodeCarbon's power over a window up to `hi` s longer
    worst = agreement["largest_power_understatement"]
    assert 0 < worst < 1
    blocks = instruments.paired_blocks(tables.blocks)
    top = blocks.loc[blocks["power_understatement"].idxmax()]
    assert worst == pytest.approx(1 - (1 + top["relative_difference"]) * top["duration_s"]
                                  / top["codecarbon_duration_s"])


def test_accuracy_spread_recovers_the_planted_offsets(planted):
    _, design, truth, results = planted
    offsets = truth["model"]["ecosystem_accuracy_offset"]
    curve = 1 - math.exp(-truth["campaign"]["epochs"] / truth["model"]["accuracy_tau_epochs"])
    planted_pp = 100 * (max(offsets[e] for e in ECOSYSTEMS)
                        - min(offsets[e] for e in ECOSYSTEMS)) * curve
    for _, row in results.accuracy_spreads.iterrows():
        # tolerance: 1 percentage point (run noise 0.6 points, medians of 5)
        assert row["spread_pp"] == pytest.approx(planted_pp, abs=1.0)
        assert row["least_accurate"] == "java-dl4j"
    assert results.values["CollapsesCount"].value == 0


def test_utilisation_medians_recover_the_planted_gpu_utilisation(planted):
    tables, design, truth, _ = planted
    med = utilisation.utilisation_medians(tables, design)
    train = med[med["phase"] == "train"].set_index("ecosystem")["gpu_utilization_pct"]
    for eco in ECOSYSTEMS:
        # tolerance: 1.5 points (sampler noise sd 1.5, hundreds of samples)
        assert train[eco] == pytest.approx(
            truth["model"]["ecosystem_gpu_utilization_pct"][eco], abs=1.5)


def test_energy_follows_time_within_cells(planted):
    _, design, _, results = planted
    rho = energy.energy_time_correlation(results.totals, "train", "duration_s", design)
    assert rho["pooled"] > 0.9 and rho["within_min"] > 0.8
    cell = results.totals[(results.totals["phase"] == "train")
                          & (results.totals["dataset"] == "cifar100")]
    assert rho["within_min"] <= sps.spearmanr(cell["energy_j"], cell["duration_s"]).statistic \
        <= rho["within_max"]


def test_pairwise_family_matches_the_design(planted):
    _, design, _, results = planted
    pairs = len(ECOSYSTEMS) * (len(ECOSYSTEMS) - 1) // 2
    assert len(results.pairwise) == pairs * len(design.cells) * 2
    # DL4J at 3x the time is completely separated from every other ecosystem
    dl4j = results.pairwise[(results.pairwise["ecosystem_b"] == "java-dl4j")]
    assert set(dl4j["a12"]) == {0.0}
    assert dl4j["p"].max() == pytest.approx(2 / 252)
    # 2/252 > 0.05 / family size: Holm lets nothing through
    assert results.values["ComparisonsSurviveHolm"].value == 0
    assert results.values["SmallestAttainableP"].value > results.values["HolmFirstThreshold"].value


def test_planted_collapses_are_counted_with_an_exact_bound(tmp_path):
    model = SynthModel().with_overrides({"ecosystem_accuracy_offset": {"java-dl4j": -0.9}})
    out = tmp_path / "pkg"
    write_synthetic(out, seed=31, model=model, ecosystems=["python-pytorch", "java-dl4j"],
                    architectures=["resnet18"], datasets=["cifar100"], repetitions=3, epochs=2)
    design = Design.from_spec(ecosystems=["python-pytorch", "java-dl4j"],
                              architectures=["resnet18"], datasets=["cifar100"])
    final = accuracy.final_accuracy(load_tables(Package.open(out)))
    c = accuracy.collapses(final, design)
    assert (c["collapsed"], c["runs"]) == (3, 6)
    assert c["upper_bound"] == pytest.approx(sps.beta.ppf(0.95, 4, 3))
