"""Every quantity the paper quotes, computed from the tables in one pass.

`analyse` returns a `Results`: the scalar values the text quotes (each a
`Number` or `Text` under the name of the LaTeX macro that will carry it)
and the per-configuration frames the tables and figures draw.  Nothing
here formats or writes anything; that is `deepgreen_audit.render`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from deepgreen_audit.analysis import accuracy, campaign, comparisons, energy, hosts, instruments, utilisation
from deepgreen_audit.analysis.data import PHASES, CampaignTables, Design, MissingValue
from deepgreen_audit.spec import load_spec
from deepgreen_audit.units import J_PER_KWH


@dataclass(frozen=True)
class Number:
    """A number the paper quotes: its value, siunitx unit (None: a bare number), decimals."""

    value: float
    decimals: int
    description: str
    unit: str | None = None


@dataclass(frozen=True)
class Text:
    """A label the paper quotes (an ecosystem, a date)."""

    value: str
    description: str
    #: "label": a normalised label of the tables, shown by its display name; "labels": several,
    #: joined by ";", shown as a list of display names; "plain": as is.
    kind: str = "plain"


@dataclass
class Results:
    """Scalars by macro name, and the frames behind the tables and figures."""

    values: dict = field(default_factory=dict)
    # The frames are None until `results()` fills them; the renderers read filled Results.
    totals: pd.DataFrame = None
    medians: pd.DataFrame = None
    spreads: pd.DataFrame = None
    variability: pd.DataFrame = None
    accuracy_spreads: pd.DataFrame = None
    final_accuracy: pd.DataFrame = None
    pairwise: pd.DataFrame = None
    paired_blocks: pd.DataFrame = None
    utilisation: pd.DataFrame = None
    #: median utilisation per (ecosystem, architecture, phase), with the runs sampled
    utilisation_by_architecture: pd.DataFrame = None
    #: per phase: its median block duration and whether it may name a cheapest stack
    cheapest_rule: dict = field(default_factory=dict)
    #: within-host beside across-host spread per configuration (None: one host)
    host_spread: pd.DataFrame | None = None
    #: LaTeX conditionals (\ifName) the text branches on: what the declared design holds
    flags: dict = field(default_factory=dict)

    def number(self, name: str, value: float, decimals: int, description: str,
               unit: str | None = None) -> None:
        if name in self.values:
            raise ValueError(f"macro {name} defined twice")
        if value is None or value != value:
            raise MissingValue(f"the value of \\{name} ({description}) could not be computed "
                               "from the package (it is empty or NaN)")
        self.values[name] = Number(float(value), decimals, description, unit)

    def text(self, name: str, value: str, description: str, kind: str = "plain") -> None:
        if name in self.values:
            raise ValueError(f"macro {name} defined twice")
        if value is None or value == "":
            raise MissingValue(f"the label \\{name} ({description}) is missing")
        self.values[name] = Text(str(value), description, kind)


_COUNT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")


def _count_word(count: int) -> str:
    """A small count in words, as the text reads it ("seven deep-learning stacks")."""
    return _COUNT_WORDS[count] if count < len(_COUNT_WORDS) else str(count)


def _phase_word(phase: str) -> str:
    return {"train": "Train", "eval": "Eval"}[phase]


def analyse(tables: CampaignTables, design: Design, spec: dict | None = None) -> Results:
    """All of the paper's numbers from the tables, against the specification's design."""
    spec = spec or load_spec()
    r = Results()
    _campaign(r, tables, design, spec)
    r.totals = energy.phase_totals(tables, design)
    r.medians = energy.configuration_medians(r.totals, design)
    r.spreads = energy.cell_spreads(r.medians, design)
    _cheapest_rule(r, tables, design)
    _spreads(r, design)
    r.variability = energy.variability(r.totals)
    _hosts(r, tables)
    for phase in PHASES:
        cv = r.variability[r.variability["phase"] == phase]["cv"].dropna()
        if cv.empty:
            raise MissingValue(f"no configuration has two repetitions of {phase} energy, so "
                               "the between-run variability is missing")
        r.number(f"Cv{_phase_word(phase)}MedianPct", 100 * cv.median(), 1,
                 f"median over configurations of the CV (ddof=1) of {phase} energy", r"\percent")
        r.number(f"Cv{_phase_word(phase)}MaxPct", 100 * cv.max(), 1,
                 f"largest CV (ddof=1) of {phase} energy over configurations", r"\percent")
    for phase in PHASES:
        for column, word in (("duration_s", "Counter"), ("codecarbon_duration_s", "CodeCarbon")):
            rho = energy.energy_time_correlation(r.totals, phase, column, design)
            base = f"Rho{_phase_word(phase)}{word}"
            what = f"Spearman rho of {phase} energy against {column}"
            r.number(base, rho["pooled"], 2, what + ", pooled over configurations")
            r.number(base + "WithinMin", rho["within_min"], 2, what + ", lowest within a cell")
            r.number(base + "WithinMax", rho["within_max"], 2, what + ", highest within a cell")
    _instruments(r, tables, design)
    _accuracy(r, tables, design)
    _comparisons(r, design)
    _utilisation(r, tables, design)
    _campaign_energy(r, tables)
    _out_of_scope(r, spec)
    return r


def _campaign(r: Results, tables: CampaignTables, design: Design, spec: dict) -> None:
    runs, blocks = tables.runs, tables.blocks
    if runs.empty:
        raise MissingValue("the runs table has no rows")
    r.number("RunsTotal", len(runs), 0, "runs in the package")
    r.number("RunsCompleted", int((runs["status"] == "completed").sum()), 0, "completed runs")
    r.number("BlocksTotal", len(blocks), 0, "measurement blocks in the package")
    r.number("BlocksMissingEnergy", int(blocks["energy_j"].isna().sum()), 0,
             "blocks without counter energy")
    r.number("SamplesTotal", len(tables.samples), 0, "1 Hz samples in the package")
    r.number("EcosystemsCount", len(design.ecosystems), 0, "ecosystems of the design")
    r.text("EcosystemsCountWord", _count_word(len(design.ecosystems)),
           "number of ecosystems of the design, in words")
    for name, labels in (("Ecosystems", design.ecosystems), ("Architectures", design.architectures),
                         ("Datasets", design.datasets)):
        r.text(f"{name}List", ";".join(labels), f"{name.lower()} of the design", kind="labels")
    r.flags["ControlGroup"] = len(design.control_group) >= 2
    if r.flags["ControlGroup"]:
        r.text("ControlGroupList", ";".join(design.control_group),
               "the LibTorch control group's ecosystems in the design", kind="labels")
    r.number("ArchitecturesCount", len(design.architectures), 0, "architectures of the design")
    r.number("DatasetsCount", len(design.datasets), 0, "datasets of the design")
    r.number("ConfigurationsCount", len(design.configurations), 0, "configurations of the design")
    r.number("CellsCount", len(design.cells) * len(PHASES), 0,
             "cells (architecture, dataset, phase)")
    r.number("RepetitionsPlanned", design.repetitions, 0, "repetitions per configuration (S6)")
    r.number("SpecEpochs", spec["S2_optimisation"]["epochs"], 0, "epochs per run (S2)")
    r.number("SpecBatchSize", spec["S2_optimisation"]["batch_size"], 0, "batch size (S2)")
    r.number("SpecLearningRate", spec["S2_optimisation"]["learning_rate"], 4,
             "learning rate (S2)")
    r.number("SpecInputPx", spec["S3_data"]["input_resolution_px"], 0, "input side (S3)",
             r"\pixel")
    r.number("SpecLoaderWorkers", spec["S3_data"]["loader_workers"], 0, "loader workers (S3)")
    r.number("SpecCodeCarbonIntervalS", design.codecarbon_interval_s, 0,
             "CodeCarbon sampling interval (S5)", r"\second")
    r.number("SpecSamplerHz", spec["S5_measurement"]["sampler_rate_hz"], 0,
             "utilisation sampler rate (S5)", r"\hertz")
    r.text("PhaseEnergyEpochs", energy.counted_epochs_text(design.warmup_epochs_excluded),
           "the epochs a run's phase energy sums ([analysis] warmup_epochs_excluded)")
    r.number("SpecCodeCarbonMajor", spec["S5_measurement"]["codecarbon_min_major"], 0,
             "lowest CodeCarbon major version accepted (S5)")
    total_j = blocks["energy_j"].sum()
    r.number("EnergyTotalMJ", total_j / 1e6, 1, "counter energy of all blocks", r"\mega\joule")
    r.number("EnergyTotalKWh", total_j / J_PER_KWH, 1, "counter energy of all blocks",
             r"\kilo\watt\hour")
    r.number("CodeCarbonTotalKWh", blocks["codecarbon_energy_j"].sum() / J_PER_KWH, 1,
             "CodeCarbon energy of all blocks", r"\kilo\watt\hour")
    r.number("MeasuredHours", blocks["duration_s"].sum() / 3600, 1,
             "counter-bracketed time of all blocks", r"\hour")
    r.text("CampaignFirstDay", runs["started_at_utc"].min().strftime("%Y-%m-%d"),
           "UTC date of the first run's start")
    r.text("CampaignLastDay", runs["ended_at_utc"].max().strftime("%Y-%m-%d"),
           "UTC date of the last run's end")


def _spreads(r: Results, design: Design) -> None:
    s = r.spreads
    intervals = []
    for phase in PHASES:
        rows = s[s["phase"] == phase]
        w = _phase_word(phase)
        r.number(f"Spread{w}Min", rows["spread"].min(), 2,
                 f"smallest {phase} spread (most over least expensive ecosystem) over cells")
        r.number(f"Spread{w}Max", rows["spread"].max(), 2, f"largest {phase} spread over cells")
        if len(design.control_group) >= 2:
            r.number(f"ControlSpread{w}Min", rows["control_spread"].min(), 2,
                     f"smallest {phase} spread inside the LibTorch control group")
            r.number(f"ControlSpread{w}Max", rows["control_spread"].max(), 2,
                     f"largest {phase} spread inside the LibTorch control group")
        if r.cheapest_rule[phase]["names_cheapest"]:
            # a phase too short to rank its stacks ([analysis] cheapest_min_sampler_intervals)
            # names neither its cheapest nor its costliest one
            cheapest, count = Counter(rows["cheapest"]).most_common(1)[0]
            r.text(f"Cheapest{w}Mostly", cheapest, f"ecosystem cheapest in most {phase} cells",
                   kind="label")
            r.number(f"Cheapest{w}Count", count, 0,
                     f"{phase} cells where that ecosystem is cheapest")
            costliest, count = Counter(rows["most_expensive"]).most_common(1)[0]
            r.text(f"Costliest{w}Mostly", costliest,
                   f"ecosystem most expensive in most {phase} cells", kind="label")
            r.number(f"Costliest{w}Count", count, 0,
                     f"{phase} cells where that ecosystem is most expensive")
        for _, row in rows.iterrows():
            low, high = energy.spread_interval(
                r.totals, row["architecture"], row["dataset"], phase, design.ecosystems,
                seed=comparisons.pair_seed(design, row["architecture"], row["dataset"], phase),
                n_resamples=design.bootstrap_resamples, confidence=design.bootstrap_confidence)
            intervals.append({"architecture": row["architecture"], "dataset": row["dataset"],
                              "phase": phase, "spread_low": low, "spread_high": high})
        widest = rows.loc[rows["spread"].idxmax()]
        (low, high), = [(i["spread_low"], i["spread_high"]) for i in intervals
                        if (i["architecture"], i["dataset"], i["phase"])
                        == (widest["architecture"], widest["dataset"], phase)]
        level = f"{100 * design.bootstrap_confidence:g}%"
        r.number(f"Spread{w}MaxLow", low, 2, f"bootstrap {level} interval of the largest {phase} "
                 "spread, lower end")
        r.number(f"Spread{w}MaxHigh", high, 2, f"bootstrap {level} interval of the largest {phase} "
                 "spread, upper end")
        r.text(f"Spread{w}MaxArchitecture", widest["architecture"],
               f"architecture of the cell with the largest {phase} spread", kind="label")
        r.text(f"Spread{w}MaxDataset", widest["dataset"],
               f"dataset of the cell with the largest {phase} spread", kind="label")
    r.spreads = r.spreads.merge(pd.DataFrame(intervals),
                                on=["architecture", "dataset", "phase"], how="left")
    r.spreads["names_cheapest"] = r.spreads["phase"].map(
        lambda p: bool(r.cheapest_rule[p]["names_cheapest"]))


def _cheapest_rule(r: Results, tables: CampaignTables, design: Design) -> None:
    """The specification's rule on naming a cheapest stack, applied to each phase."""
    r.cheapest_rule = energy.cheapest_rule(tables.blocks, design)
    r.number("CheapestMinSamplerIntervals", design.cheapest_min_sampler_intervals, 0,
             "sampler intervals a phase's median block must last to name a cheapest stack "
             "([analysis] cheapest_min_sampler_intervals)")
    r.number("CheapestMinBlockS", design.cheapest_min_sampler_intervals * design.sampler_interval_s,
             1, "shortest median block that may name a cheapest stack", r"\second")
    for phase in PHASES:
        w = _phase_word(phase)
        rule = r.cheapest_rule[phase]
        r.number(f"MedianBlock{w}S", rule["median_block_s"], 1,
                 f"median duration of a {phase} block", r"\second")
        r.flags[f"CheapestNamed{w}"] = bool(rule["names_cheapest"])


def _hosts(r: Results, tables: CampaignTables) -> None:
    r.host_spread = hosts.host_spread(r.totals, tables.environment)
    r.flags["SeveralHosts"] = r.host_spread is not None
    if r.host_spread is None:
        return
    r.number("HostsCount", tables.environment["host"].nunique(), 0, "hosts that measured the campaign")
    for column, word in (("within_host_cv", "Within"), ("across_host_cv", "Across")):
        r.number(f"HostCv{word}MedianPct", 100 * r.host_spread[column].median(), 1,
                 f"median over configuration-phases of the {column.replace('_', ' ')} of energy",
                 r"\percent")


def _instruments(r: Results, tables: CampaignTables, design: Design) -> None:
    a = instruments.agreement(tables.blocks, design.codecarbon_interval_s)
    r.paired_blocks = instruments.paired_blocks(tables.blocks)
    r.number("InstrumentBlocks", a["blocks"], 0, "blocks with both readings")
    r.number("CodeCarbonMedianDiffPct", 100 * a["median_relative_difference"], 1,
             "median relative difference of CodeCarbon energy against the counters", r"\percent")
    r.number("OverhangSharePct", 100 * a["overhang_share"], 1,
             "share of blocks whose CodeCarbon duration outlasts the counter window by more "
             "than one sampling interval", r"\percent")
    r.number("PowerUnderstatementMaxPct", 100 * a["largest_power_understatement"], 1,
             "largest understatement of power derived from CodeCarbon's energy and duration",
             r"\percent")
    r.number("PowerUnderstatementBlockS", a["largest_understatement_duration_s"], 1,
             "counter duration of the block with the largest power understatement", r"\second")
    r.text("PowerUnderstatementPhase", a["largest_understatement_phase"],
           "phase of the block with the largest power understatement", kind="label")


def _accuracy(r: Results, tables: CampaignTables, design: Design) -> None:
    r.final_accuracy = accuracy.final_accuracy(tables)
    r.accuracy_spreads = accuracy.accuracy_spreads(r.final_accuracy, design)
    r.number("AccuracySpreadMinPp", r.accuracy_spreads["spread_pp"].min(), 1,
             "smallest final-accuracy spread over cells, percentage points")
    r.number("AccuracySpreadMaxPp", r.accuracy_spreads["spread_pp"].max(), 1,
             "largest final-accuracy spread over cells, percentage points")
    c = accuracy.collapses(r.final_accuracy, design)
    r.number("CollapsesCount", c["collapsed"], 0, "runs whose training collapsed")
    r.number("CollapseRuns", c["runs"], 0, "runs judged for collapse")
    r.number("CollapseUpperPct", 100 * c["upper_bound"], 1,
             "exact one-sided upper confidence bound on the collapse rate", r"\percent")
    r.number("CollapseMarginPp", 100 * design.collapse_margin_fraction, 0,
             "collapse margin above chance, percentage points")
    r.number("CollapseConfidencePct", 100 * design.collapse_confidence, 0,
             "confidence of the collapse-rate bound", r"\percent")
    r.number("CollapseWastedTrainPct",
             100 * accuracy.wasted_training_share(r.final_accuracy, r.totals, design), 1,
             "share of the campaign's training energy that collapsed runs spent", r"\percent")
    r.flags["CollapseSusceptible"] = bool(design.collapse_susceptible)
    if design.collapse_susceptible:
        s = accuracy.susceptible_collapses(r.final_accuracy, design)
        r.text("CollapseSusceptibleList", ";".join(design.collapse_susceptible),
               "architectures whose cells are susceptible to collapses "
               "([analysis] collapse_susceptible_architectures)", kind="labels")
        r.number("CollapseSusceptibleCount", s["collapsed"], 0,
                 "collapsed runs on the susceptible cells")
        r.number("CollapseSusceptibleRuns", s["runs"], 0, "runs judged on the susceptible cells")
        r.number("CollapseSusceptibleUpperPct", 100 * s["upper_bound"], 1,
                 "exact one-sided Clopper-Pearson upper bound on the collapse rate of the "
                 "susceptible cells", r"\percent")


def _comparisons(r: Results, design: Design) -> None:
    r.pairwise = comparisons.pairwise(r.totals, design)
    s = comparisons.summary(r.pairwise, design)
    r.number("ComparisonsTotal", s["comparisons"], 0, "pairwise comparisons in the family")
    r.number("ComparisonsSurviveHolm", s["survive_holm"], 0,
             "comparisons significant after Holm's correction")
    r.number("ComparisonsUncorrected", s["uncorrected_below_alpha"], 0,
             "comparisons with an uncorrected p below alpha")
    r.number("ComparisonsAlpha", design.alpha, 2, "family-wise significance level")
    r.number("SmallestAttainableP", s["smallest_attainable_p"], 4,
             "smallest exact two-sided Mann-Whitney p-value with these repetitions")
    r.number("HolmFirstThreshold", s["holm_first_threshold"], 5,
             "Holm's threshold for the smallest p-value (alpha over the family size)")
    r.number("ComparisonRepetitions", s["repetitions"], 0, "repetitions per side in the tests")
    r.number("CompleteSeparationCount", s["complete_separation"], 0,
             "comparisons whose repetitions do not overlap at all (A12 of 0 or 1)")
    r.number("MedianEffectSize", s["median_effect"], 2,
             "median |Cliff's delta| = 2|A12 - 0.5| over the comparisons")
    r.number("BootstrapResamples", design.bootstrap_resamples, 0,
             "bootstrap resamples per interval")


def _utilisation(r: Results, tables: CampaignTables, design: Design) -> None:
    samples = utilisation.attributed_samples(tables)
    r.utilisation = utilisation.utilisation_medians(tables, design, samples)
    r.utilisation_by_architecture = utilisation.utilisation_by_architecture(tables, design, samples)
    coverage = utilisation.sampler_coverage(tables, samples)
    r.number("SamplerRunsCovered", coverage["covered"], 0,
             "runs with at least one 1 Hz sample inside one of their blocks")
    r.number("SamplerCoveragePct", 100 * coverage["covered"] / coverage["runs"], 1,
             "share of the package's runs the sampler covered", r"\percent")
    by_arch = r.utilisation_by_architecture
    for phase in PHASES:
        w = _phase_word(phase)
        gpu = by_arch[by_arch["phase"] == phase]["gpu_utilization_pct"]
        r.number(f"GpuUtil{w}ArchMinPct", gpu.min(), 0,
                 f"lowest median GPU utilisation of a stack and architecture in {phase} blocks",
                 r"\percent")
        r.number(f"GpuUtil{w}ArchMaxPct", gpu.max(), 0,
                 f"highest median GPU utilisation of a stack and architecture in {phase} blocks",
                 r"\percent")
    train = r.utilisation[r.utilisation["phase"] == "train"].set_index("ecosystem")
    for column, word in (("gpu_utilization_pct", "Gpu"), ("cpu_utilization_pct", "Cpu")):
        values = train[column]
        r.number(f"{word}UtilTrainMinPct", values.min(), 0,
                 f"lowest median {word.upper()} utilisation while training", r"\percent")
        r.text(f"{word}UtilTrainMinEcosystem", values.idxmin(),
               f"ecosystem with the lowest median {word.upper()} utilisation while training", kind="label")
        r.number(f"{word}UtilTrainMaxPct", values.max(), 0,
                 f"highest median {word.upper()} utilisation while training", r"\percent")
        r.text(f"{word}UtilTrainMaxEcosystem", values.idxmax(),
               f"ecosystem with the highest median {word.upper()} utilisation while training", kind="label")


def _campaign_energy(r: Results, tables: CampaignTables) -> None:
    """Slurm's whole-run reading summed over the campaign, where it was recorded."""
    slurm = campaign.slurm_energy(tables)
    r.flags["SlurmEnergy"] = slurm is not None
    if slurm is None:
        return
    r.number("SlurmRuns", slurm["runs"], 0, "runs with Slurm's ConsumedEnergy and complete blocks")
    r.number("SlurmEnergyKWh", slurm["slurm_j"] / J_PER_KWH, 1,
             "Slurm's whole-run energy summed over those runs", r"\kilo\watt\hour")
    r.number("SlurmBlocksKWh", slurm["blocks_j"] / J_PER_KWH, 1,
             "counter energy of the same runs' blocks", r"\kilo\watt\hour")
    r.number("SlurmBeyondBlocksPct", 100 * (slurm["slurm_j"] / slurm["blocks_j"] - 1), 1,
             "energy Slurm read beyond the blocks, relative to the blocks", r"\percent")


def _out_of_scope(r: Results, spec: dict) -> None:
    """Ecosystems outside the study altogether, with the reason (S6_replication.out_of_scope)."""
    outside = dict(spec["S6_replication"].get("out_of_scope", {}))
    r.flags["OutOfScope"] = bool(outside)
    if outside:
        r.text("OutOfScopeEcosystems", "; ".join(f"{name}: {why}" for name, why in outside.items()),
               "ecosystems outside the study and why (S6_replication.out_of_scope)")
