"""Every analysis of `deepgreen_audit/analysis/` on packages `collect` made from real stack runs
(tests/data/collected/, scripts/collected_fixtures.py): fractional sample clocks, evaluation
blocks of a tenth of a second, one architecture, a CPU host without energy counters, and the
same host on a fake RAPL counter.  The synthetic generator's tidy shapes hid a crash on real
timestamps (a nanosecond against a microsecond join); these tests hold every function to the
shapes real runs produce."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepgreen_audit.analysis import (
    Design,
    MissingValue,
    accuracy,
    analyse,
    campaign,
    comparisons,
    energy,
    hosts,
    instruments,
    load_tables,
    pilot,
    scope,
    stats,
    utilisation,
)
from deepgreen_audit.analysis.coverage import coverage
from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.analysis.values import Count, NotMeasured, Range
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.render.build import render
from deepgreen_audit.spec import load_spec, scoped

COLLECTED = Path(__file__).resolve().parent / "data" / "collected"


def _open(name: str):
    package = Package.open(COLLECTED / name)
    spec = scoped(load_spec(), package.descriptor.get("scope"), package.descriptor_path)
    return package, load_tables(package), Design.from_spec(spec), spec


@pytest.fixture(scope="module")
def no_counters():
    return _open("cpu-no-counters")


@pytest.fixture(scope="module")
def fake_rapl():
    return _open("cpu-fake-rapl")


def test_tables_load_with_real_clocks_at_one_resolution(no_counters):
    _, tables, _, _ = no_counters
    assert str(tables.runs["started_at_utc"].dtype) == "datetime64[ns, UTC]"
    assert str(tables.blocks["started_at_utc"].dtype) == "datetime64[ns, UTC]"
    # a real sampler's ticks are not whole seconds
    assert (tables.samples["t_s"] % 1 != 0).any()
    assert tables.blocks["energy_j"].isna().all()


def test_coverage_says_what_was_measured_and_why_not(no_counters, fake_rapl):
    package, tables, design, _ = no_counters
    c = coverage(tables, design, package.descriptor["measured"])
    assert not c.energy.measured and "RAPL" in c.energy.how and "RAPL" in c.energy.reason
    assert not c.gpu_utilisation.measured and "CPU" in c.gpu_utilisation.how
    assert c.cpu_utilisation.measured and c.durations.measured and c.accuracy.measured
    assert c.codecarbon.measured and "load model" in c.codecarbon.how
    assert c.primary_column == "duration_s"
    package, tables, design, _ = fake_rapl
    c = coverage(tables, design, package.descriptor["measured"])
    assert c.energy.measured and "CPU packages (RAPL)" in c.energy.how
    assert c.primary_column == "energy_j"


def test_utilisation_attributes_fractional_samples_and_explains_short_blocks(no_counters):
    _, tables, design, _ = no_counters
    samples = utilisation.attributed_samples(tables)
    assert len(samples) > 0 and set(samples["phase"]) <= set(PHASES)
    by_arch = utilisation.utilisation_by_architecture(tables, design, samples,
                                                      ("cpu_utilization_pct",))
    assert len(by_arch) == len(design.ecosystems) * len(PHASES)
    train = by_arch[by_arch["phase"] == "train"]["cpu_utilization_pct"]
    assert train.notna().all() and ((train > 0) & (train <= 100)).all()
    # digits' evaluation epoch is shorter than the sampler's second: empty, with the reason
    why = utilisation.unsampled_reason(tables, design, "eval")
    assert "less than the 1 s between two samples" in why
    medians = utilisation.utilisation_medians(tables, design, samples, ("cpu_utilization_pct",))
    assert set(medians["ecosystem"]) == set(design.ecosystems)
    cover = utilisation.sampler_coverage(tables, samples)
    assert cover == {"covered": 8, "runs": 8}


def test_phase_totals_medians_and_spreads_rank_time_without_energy(no_counters):
    _, tables, design, _ = no_counters
    totals = energy.phase_totals(tables, design)
    assert len(totals) == 8 * len(PHASES) and totals["energy_j"].isna().all()
    assert (totals["duration_s"] > 0).all() and (totals["blocks"] == 2).all()
    with pytest.raises(MissingValue, match="no completed run with counter energy"):
        energy.configuration_medians(totals, design)
    medians = energy.configuration_medians(totals, design, "duration_s")
    spreads = energy.cell_spreads(medians, design, "duration_s")
    assert len(spreads) == len(PHASES) and (spreads["spread"] >= 1).all()
    # DL4J is the slowest of the four stacks on this CPU, by far
    assert set(spreads["most_expensive"]) == {"java-dl4j"}
    low, high = energy.spread_interval(totals, "resnet18", "digits", "train", design.ecosystems,
                                       seed=1, n_resamples=200, confidence=0.95,
                                       column="duration_s")
    assert 1 <= low <= high
    cv = energy.variability(totals, "duration_s")
    assert cv["cv"].notna().all()
    assert energy.energy_time_correlation(totals, "train", "duration_s", design) is None
    rule = energy.cheapest_rule(tables.blocks, design)
    assert rule["eval"]["median_block_s"] < 1 and not rule["eval"]["names_cheapest"]


def test_energy_quantities_on_the_fake_counter(fake_rapl):
    _, tables, design, _ = fake_rapl
    totals = energy.phase_totals(tables, design)
    assert totals["energy_j"].notna().all()
    medians = energy.configuration_medians(totals, design)
    assert (medians["energy_j"] > 0).all()
    rho = energy.energy_time_correlation(totals, "train", "duration_s", design)
    # the fake counter draws a constant power: energy follows time exactly
    assert rho is not None and rho["pooled"] == pytest.approx(1.0)
    paired = instruments.paired_blocks(tables.blocks)
    assert paired is not None and len(paired) == len(tables.blocks)
    agreement = instruments.agreement(paired, design.codecarbon_interval_s)
    assert agreement["blocks"] == len(tables.blocks)
    assert np.isfinite(agreement["median_relative_difference"])


def test_instruments_hold_nothing_to_compare_without_counters(no_counters):
    _, tables, _, _ = no_counters
    assert instruments.paired_blocks(tables.blocks) is None


def test_accuracy_and_collapses_on_real_runs(no_counters):
    _, tables, design, _ = no_counters
    final = accuracy.final_accuracy(tables)
    assert len(final) == 8 and final["test_accuracy"].between(0, 1).all()
    spreads = accuracy.accuracy_spreads(final, design)
    assert len(spreads) == 1 and spreads["spread_pp"].iloc[0] >= 0
    c = accuracy.collapses(final, design)
    assert c["runs"] == 8 and 0 <= c["collapsed"] <= 8 and 0 < c["upper_bound"] <= 1
    with pytest.raises(MissingValue, match="susceptible"):
        accuracy.susceptible_collapses(final, design)   # the scope holds no VGG-16
    totals = energy.phase_totals(tables, design)
    share = accuracy.wasted_training_share(final, totals, design, "duration_s")
    assert 0 <= share <= 1


def test_comparisons_of_every_pair_of_stacks(no_counters):
    _, tables, design, _ = no_counters
    totals = energy.phase_totals(tables, design)
    table = comparisons.pairwise(totals, design, "duration_s")
    assert len(table) == 6 * len(PHASES)          # 4 stacks: 6 pairs, in each phase
    assert table["p"].between(0, 1).all() and table["a12"].between(0, 1).all()
    summary = comparisons.summary(table, design)
    assert summary["repetitions"] == 2
    assert summary["smallest_attainable_p"] == pytest.approx(stats.smallest_exact_p(2, 2))


def test_one_host_one_campaign_no_slurm(no_counters):
    _, tables, _, _ = no_counters
    totals = energy.phase_totals(tables, Design.from_spec(scoped(load_spec(), {
        "ecosystems": ["python-pytorch", "cpp-libtorch", "rust-tch", "java-dl4j"],
        "architectures": ["resnet18"], "datasets": ["digits"], "repetitions": 2, "epochs": 2})))
    assert hosts.host_spread(totals, tables.environment, "duration_s") is None
    assert campaign.slurm_energy(tables) is None


def test_the_scope_says_what_the_collection_leaves_out(no_counters):
    package, _, _, _ = no_counters
    found = {n.key: n for n in scope.narrowings(package.descriptor["scope"])}
    assert found["device"].declared == "cpu"
    assert dict(found["ecosystems"].left_out)["r-torch"]    # a known reason
    assert found["datasets"].added == ("digits",)


def test_statistics_on_collected_durations(no_counters):
    _, tables, design, _ = no_counters
    totals = energy.phase_totals(tables, design)
    train = totals[totals["phase"] == "train"]
    dl4j = train.loc[train["ecosystem"] == "java-dl4j", "duration_s"]
    torch = train.loc[train["ecosystem"] == "python-pytorch", "duration_s"]
    assert stats.vargha_delaney_a12(dl4j, torch) == 1.0
    assert stats.cliffs_delta(dl4j, torch) == 1.0
    assert stats.mann_whitney_exact(dl4j, torch) == pytest.approx(stats.smallest_exact_p(2, 2))
    assert stats.coefficient_of_variation(dl4j) >= 0


def test_the_pilot_analysis_refuses_a_package_without_gpu_energy(no_counters):
    package, _, _, _ = no_counters
    with pytest.raises(MissingValue, match="GPU energy"):
        pilot.analyse_pilot(package.descriptor_path)


def test_the_whole_analysis_and_its_values(no_counters, fake_rapl):
    package, tables, design, spec = no_counters
    r = analyse(tables, design, spec, package.descriptor["measured"])
    assert r.flags["EnergyMeasured"] is False and r.flags["GpuMeasured"] is False
    assert isinstance(r.values["EnergyTotal"], NotMeasured)
    assert isinstance(r.values["RunsTotal"], Count) and r.values["RunsTotal"].value == 8
    assert isinstance(r.values["SpreadTrain"], Range)
    assert r.values["RankedQuantity"].value == "time"
    # Java/DL4J's evaluation epoch outlasts a second, the other stacks' do not: their cells
    # are empty with the reason, the phase is still sampled
    assert r.flags["UtilEvalSampled"] is True and "eval" in r.unsampled
    package, tables, design, spec = fake_rapl
    r = analyse(tables, design, spec, package.descriptor["measured"])
    assert r.flags["EnergyMeasured"] and r.flags["Correlations"] and r.flags["InstrumentsCompared"]
    assert r.values["EnergyTotal"].unit in (r"\joule", r"\kilo\joule")


@pytest.mark.parametrize("name", ["cpu-no-counters", "cpu-fake-rapl"])
def test_render_of_a_collected_package(name, tmp_path):
    report = render(COLLECTED / name, tmp_path / "gen")
    assert "numbers.tex" in report.files and "measured.tex" in report.files
    numbers = (tmp_path / "gen" / "numbers.tex").read_text()
    assert not re.search(r"\\(num|qty)\{[^}]*(nan|inf)", numbers, re.I)
    table = pd.read_csv(COLLECTED / name / "runs.csv")
    assert len(table) in (6, 8)
