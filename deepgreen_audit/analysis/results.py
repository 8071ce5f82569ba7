r"""Every quantity the paper quotes, computed from the tables in one pass.

`analyse` returns a `Results`: the scalar values the text quotes (each a value of
`deepgreen_audit.analysis.values` under the name of the LaTeX macro that will carry it),
the per-configuration frames the tables and figures draw, the conditionals the text
branches on, and the package's `Coverage`: what it measured and why it lacks what it lacks.
Only measured quantities are computed: a package without counter energy ranks its stacks
by phase duration (which the text then calls time), a campaign on the CPU quotes no GPU
utilisation, and each `\\if...Measured` conditional tells the text which sentence to write.
Nothing here formats or writes anything; that is `deepgreen_audit.render`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from deepgreen_audit.analysis import accuracy, campaign, comparisons, energy, hosts, instruments, utilisation
from deepgreen_audit.analysis.coverage import Coverage, codecarbon_models_cpu, coverage
from deepgreen_audit.analysis.data import PHASES, CampaignTables, Design, MissingValue
from deepgreen_audit.analysis.values import (
    Count,
    NotMeasured,
    Number,
    Range,
    Text,
    decimals_for,
    exact_decimals,
    scaled,
)
from deepgreen_audit.batchnorm import accuracy_caveat
from deepgreen_audit.spec import load_spec
from deepgreen_audit.units import J_PER_KWH

__all__ = ["Count", "NotMeasured", "Number", "Range", "Results", "Text", "analyse"]

#: Watt-hours in one joule.
WH_PER_J = 1000.0 / J_PER_KWH


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
    #: blocks with both readings (None: no block carries both)
    paired_blocks: pd.DataFrame | None = None
    utilisation: pd.DataFrame = None
    #: median utilisation per (ecosystem, architecture, phase), with the runs sampled
    utilisation_by_architecture: pd.DataFrame = None
    #: per phase: its median block duration and whether it may name a cheapest stack
    cheapest_rule: dict = field(default_factory=dict)
    #: per phase with a stack and architecture no utilisation sample fell inside: why
    unsampled: dict = field(default_factory=dict)
    #: within-host beside across-host spread per configuration (None: one host)
    host_spread: pd.DataFrame | None = None
    #: LaTeX conditionals (\ifName) the text branches on: what the declared design holds
    flags: dict = field(default_factory=dict)
    #: what the package measured, and why it lacks the rest
    coverage: Coverage | None = None

    @property
    def column(self) -> str:
        """The column the spreads rank: energy, else (no energy measured) phase duration."""
        return self.coverage.primary_column if self.coverage else "energy_j"

    def _put(self, name: str, value) -> None:
        if name in self.values:
            raise ValueError(f"macro {name} defined twice")
        self.values[name] = value

    def adopt(self, name: str, value) -> None:
        """A value computed by another package's analysis (the contrast cell's), quoted here."""
        self._put(name, value)

    def number(self, name: str, value: float, decimals: int, description: str,
               unit: str | None = None) -> None:
        _require(name, value, description)
        self._put(name, Number(float(value), decimals, description, unit))

    def scaled(self, name: str, kind: str, base_value: float, description: str) -> None:
        """An energy (J or Wh) or a duration (s), in the unit its size asks for."""
        _require(name, base_value, description)
        self._put(name, scaled(kind, float(base_value), description))

    def count(self, name: str, value: int, singular: str, plural: str, description: str,
              words: bool = False) -> None:
        _require(name, value, description)
        self._put(name, Count(int(value), singular, plural, description, words))

    def range(self, name: str, low: float, high: float, decimals: int, description: str,
              unit: str | None = None) -> None:
        """`name` from `low` to `high` (one value when they print alike), plus `name`Min and
        `name`Max on their own."""
        _require(name, low, description)
        _require(name, high, description)
        lo = Number(float(low), decimals, description + ", lowest", unit)
        hi = Number(float(high), decimals, description + ", highest", unit)
        self._put(name, Range(lo, hi, description))
        self._put(name + "Min", lo)
        self._put(name + "Max", hi)

    def text(self, name: str, value: str, description: str, kind: str = "plain") -> None:
        if value is None or value == "":
            raise MissingValue(f"the label \\{name} ({description}) is missing")
        self._put(name, Text(str(value), description, kind))

    def not_measured(self, name: str, reason: str, description: str) -> None:
        self._put(name, NotMeasured(reason, description))


def _require(name: str, value, description: str) -> None:
    if value is None or value != value:
        raise MissingValue(f"the value of \\{name} ({description}) could not be computed "
                           "from the package (it is empty or NaN)")


_TIMES = {1: "once", 2: "twice"}


def _phase_word(phase: str) -> str:
    return {"train": "Train", "eval": "Eval"}[phase]


def analyse(tables: CampaignTables, design: Design, spec: dict | None = None,
            measured: dict | None = None) -> Results:
    """All of the paper's numbers from the tables, against the specification's design;
    `measured` is the package descriptor's record of where and within which boundary it was
    measured (collected packages have one)."""
    spec = spec or load_spec()
    r = Results()
    r.coverage = coverage(tables, design, measured)
    _coverage(r)
    _campaign(r, tables, design, spec)
    r.totals = energy.phase_totals(tables, design)
    r.medians = energy.configuration_medians(r.totals, design, r.column)
    r.spreads = energy.cell_spreads(r.medians, design, r.column)
    _cheapest_rule(r, tables, design)
    _spreads(r, design)
    r.variability = energy.variability(r.totals, r.column)
    _hosts(r, tables)
    _variability(r)
    _correlations(r, design)
    _instruments(r, tables, design)
    _codecarbon(r, tables)
    _accuracy(r, tables, design, spec)
    _comparisons(r, design)
    _utilisation(r, tables, design)
    _campaign_energy(r, tables)
    _out_of_scope(r, spec)
    return r


def _coverage(r: Results) -> None:
    """The conditionals of what was measured, and the reason for each thing that was not."""
    c = r.coverage
    assert c is not None
    r.flags["EnergyMeasured"] = c.energy.measured
    r.flags["GpuMeasured"] = c.gpu_utilisation.measured
    r.flags["CodeCarbonMeasured"] = c.codecarbon.measured
    r.flags["CpuUtilMeasured"] = c.cpu_utilisation.measured
    for name, quantity in (("Energy", c.energy), ("GpuUtil", c.gpu_utilisation),
                           ("CodeCarbon", c.codecarbon)):
        if not quantity.measured:
            r.text(f"{name}NotMeasuredReason", quantity.reason,
                   f"why the package holds no {quantity.label} (the first page says it whole)")
    r.text("RankedQuantity", "energy" if c.energy.measured else "time",
           "what the spreads between ecosystems rank (energy, else time)")


def _campaign(r: Results, tables: CampaignTables, design: Design, spec: dict) -> None:
    runs, blocks = tables.runs, tables.blocks
    if runs.empty:
        raise MissingValue("the runs table has no rows")
    r.count("RunsTotal", len(runs), "run", "runs", "runs in the package")
    r.number("RunsCompleted", int((runs["status"] == "completed").sum()), 0, "completed runs")
    r.count("BlocksTotal", len(blocks), "measurement block", "measurement blocks",
            "measurement blocks in the package")
    missing = int(blocks["energy_j"].isna().sum())
    r.text("BlocksMissingEnergySentence",
           "no block lacks counter energy" if missing == 0 else
           f"{missing:,} block{'' if missing == 1 else 's'} lack{'s' if missing == 1 else ''} "
           "counter energy", "how many blocks lack counter energy, as a clause")
    r.count("SamplesTotal", len(tables.samples), "utilisation sample", "utilisation samples",
            "1 Hz samples in the package")
    r.number("EcosystemsCount", len(design.ecosystems), 0, "ecosystems of the design")
    r.count("StacksPhrase", len(design.ecosystems), "deep-learning stack", "deep-learning stacks",
            "ecosystems of the design, in words", words=True)
    r.count("EcosystemsPhrase", len(design.ecosystems), "ecosystem", "ecosystems",
            "ecosystems of the design, in words", words=True)
    for name, labels in (("Ecosystems", design.ecosystems), ("Architectures", design.architectures),
                         ("Datasets", design.datasets)):
        r.text(f"{name}List", ";".join(labels), f"{name.lower()} of the design", kind="labels")
    r.flags["ControlGroup"] = len(design.control_group) >= 2
    if r.flags["ControlGroup"]:
        r.text("ControlGroupList", ";".join(design.control_group),
               "the LibTorch control group's ecosystems in the design", kind="labels")
    r.flags["SeveralEcosystems"] = len(design.ecosystems) >= 2
    r.count("ArchitecturesPhrase", len(design.architectures), "convolutional network",
            "convolutional networks", "architectures of the design", words=True)
    r.count("DatasetsPhrase", len(design.datasets), "dataset", "datasets",
            "datasets of the design", words=True)
    r.count("ConfigurationsCount", len(design.configurations), "configuration", "configurations",
            "configurations of the design")
    r.count("CellsCount", len(design.cells) * len(PHASES), "cell", "cells",
            "cells (architecture, dataset, phase)")
    r.count("RepetitionsPlanned", design.repetitions, "independent repetition",
            "independent repetitions", "repetitions per configuration (S6)")
    r.text("RepetitionsTimes", _TIMES.get(design.repetitions, f"{design.repetitions:,} times"),
           "how often each configuration is repeated (S6), in words")
    r.count("SpecEpochs", spec["S2_optimisation"]["epochs"], "epoch", "epochs", "epochs per run (S2)")
    r.number("SpecBatchSize", spec["S2_optimisation"]["batch_size"], 0, "batch size (S2)")
    learning_rate = float(spec["S2_optimisation"]["learning_rate"])
    r.number("SpecLearningRate", learning_rate, exact_decimals(learning_rate), "learning rate (S2)")
    r.number("SpecInputPx", spec["S3_data"]["input_resolution_px"], 0, "input side (S3)",
             r"\pixel")
    r.count("SpecLoaderWorkers", spec["S3_data"]["loader_workers"], "loader worker",
            "loader workers", "loader workers (S3)")
    r.number("SpecCodeCarbonIntervalS", design.codecarbon_interval_s, 0,
             "CodeCarbon sampling interval (S5)", r"\second")
    r.number("SpecSamplerHz", spec["S5_measurement"]["sampler_rate_hz"], 0,
             "utilisation sampler rate (S5)", r"\hertz")
    r.text("PhaseEnergyEpochs", energy.counted_epochs_text(design.warmup_epochs_excluded),
           "the epochs a run's phase energy sums ([analysis] warmup_epochs_excluded)")
    r.number("SpecCodeCarbonMajor", spec["S5_measurement"]["codecarbon_min_major"], 0,
             "lowest CodeCarbon major version accepted (S5)")
    if r.flags["EnergyMeasured"]:
        total_j = float(blocks["energy_j"].sum())
        r.scaled("EnergyTotal", "energy_j", total_j, "counter energy of all blocks")
        r.scaled("EnergyTotalWh", "energy_wh", total_j * WH_PER_J, "counter energy of all blocks")
    else:
        reason = r.coverage.energy.reason if r.coverage else ""
        r.not_measured("EnergyTotal", reason, "counter energy of all blocks")
        r.not_measured("EnergyTotalWh", reason, "counter energy of all blocks")
    r.scaled("MeasuredTime", "duration_s", float(blocks["duration_s"].sum()),
             "counter-bracketed time of all blocks")
    first = runs["started_at_utc"].min().strftime("%Y-%m-%d")
    last = runs["ended_at_utc"].max().strftime("%Y-%m-%d")
    r.text("CampaignDays", f"on {first}" if first == last else f"from {first} to {last}",
           "UTC days of the first run's start and the last run's end")


def _spreads(r: Results, design: Design) -> None:
    s = r.spreads
    intervals = []
    control = len(design.control_group) >= 2
    for phase in PHASES:
        rows = s[s["phase"] == phase]
        w = _phase_word(phase)
        r.range(f"Spread{w}", rows["spread"].min(), rows["spread"].max(), 2,
                f"{phase} spread (most over least expensive ecosystem) over cells")
        if control:
            r.range(f"ControlSpread{w}", rows["control_spread"].min(),
                    rows["control_spread"].max(), 2,
                    f"{phase} spread inside the LibTorch control group over cells")
        if r.cheapest_rule[phase]["names_cheapest"]:
            # a phase too short to rank its stacks ([analysis] cheapest_min_sampler_intervals)
            # names neither its cheapest nor its costliest one
            cheapest, count = Counter(rows["cheapest"]).most_common(1)[0]
            r.text(f"Cheapest{w}Mostly", cheapest, f"ecosystem cheapest in most {phase} cells",
                   kind="label")
            r.count(f"Cheapest{w}Count", count, f"{DISPLAY_PHASE[phase]} cell",
                    f"{DISPLAY_PHASE[phase]} cells", f"{phase} cells where that ecosystem is cheapest")
            costliest, count = Counter(rows["most_expensive"]).most_common(1)[0]
            r.text(f"Costliest{w}Mostly", costliest,
                   f"ecosystem most expensive in most {phase} cells", kind="label")
            r.count(f"Costliest{w}Count", count, f"{DISPLAY_PHASE[phase]} cell",
                    f"{DISPLAY_PHASE[phase]} cells",
                    f"{phase} cells where that ecosystem is most expensive")
        for _, row in rows.iterrows():
            low, high = energy.spread_interval(
                r.totals, row["architecture"], row["dataset"], phase, design.ecosystems,
                seed=comparisons.pair_seed(design, row["architecture"], row["dataset"], phase),
                n_resamples=design.bootstrap_resamples, confidence=design.bootstrap_confidence,
                column=r.column)
            intervals.append({"architecture": row["architecture"], "dataset": row["dataset"],
                              "phase": phase, "spread_low": low, "spread_high": high})
        widest = rows.loc[rows["spread"].idxmax()]
        (low, high), = [(i["spread_low"], i["spread_high"]) for i in intervals
                        if (i["architecture"], i["dataset"], i["phase"])
                        == (widest["architecture"], widest["dataset"], phase)]
        level = f"{100 * design.bootstrap_confidence:g}%"
        r.range(f"Spread{w}MaxInterval", low, high, 2,
                f"bootstrap {level} interval of the largest {phase} spread")
        r.text(f"Spread{w}MaxArchitecture", widest["architecture"],
               f"architecture of the cell with the largest {phase} spread", kind="label")
        r.text(f"Spread{w}MaxDataset", widest["dataset"],
               f"dataset of the cell with the largest {phase} spread", kind="label")
    r.flags["SeveralCells"] = len(design.cells) >= 2
    r.spreads = r.spreads.merge(pd.DataFrame(intervals),
                                on=["architecture", "dataset", "phase"], how="left")
    r.spreads["names_cheapest"] = r.spreads["phase"].map(
        lambda p: bool(r.cheapest_rule[p]["names_cheapest"]))


#: How the text names a phase in a count ("training cells").
DISPLAY_PHASE = {"train": "training", "eval": "evaluation"}


def _cheapest_rule(r: Results, tables: CampaignTables, design: Design) -> None:
    """The specification's rule on naming a cheapest stack, applied to each phase."""
    r.cheapest_rule = energy.cheapest_rule(tables.blocks, design)
    r.count("CheapestMinSamplerIntervals", design.cheapest_min_sampler_intervals,
            "sampler interval", "sampler intervals",
            "sampler intervals a phase's median block must last to name a cheapest stack "
            "([analysis] cheapest_min_sampler_intervals)")
    r.scaled("CheapestMinBlockS", "duration_s",
             design.cheapest_min_sampler_intervals * design.sampler_interval_s,
             "shortest median block that may name a cheapest stack")
    for phase in PHASES:
        w = _phase_word(phase)
        rule = r.cheapest_rule[phase]
        r.scaled(f"MedianBlock{w}S", "duration_s", rule["median_block_s"],
                 f"median duration of a {phase} block")
        r.flags[f"CheapestNamed{w}"] = bool(rule["names_cheapest"])


def _hosts(r: Results, tables: CampaignTables) -> None:
    r.host_spread = hosts.host_spread(r.totals, tables.environment, r.column)
    r.flags["SeveralHosts"] = r.host_spread is not None
    if r.host_spread is None:
        return
    r.count("HostsCount", tables.environment["host"].nunique(), "host", "hosts",
            "hosts that measured the campaign")
    for column, word in (("within_host_cv", "Within"), ("across_host_cv", "Across")):
        r.number(f"HostCv{word}MedianPct", 100 * r.host_spread[column].median(), 1,
                 f"median over configuration-phases of the {column.replace('_', ' ')} of "
                 f"{r.values['RankedQuantity'].value}", r"\percent")


def _variability(r: Results) -> None:
    """The between-run CV of each phase's ranked quantity, where a configuration has two
    repetitions of it (one repetition has no variability to report)."""
    r.flags["Variability"] = bool(r.variability["cv"].notna().any())
    if not r.flags["Variability"]:
        return
    what = r.values["RankedQuantity"].value
    for phase in PHASES:
        cv = r.variability[r.variability["phase"] == phase]["cv"].dropna()
        if cv.empty:
            raise MissingValue(f"no configuration has two repetitions of {phase} {what}, so "
                               "the between-run variability is missing")
        r.number(f"Cv{_phase_word(phase)}MedianPct", 100 * cv.median(), 1,
                 f"median over configurations of the CV (ddof=1) of {phase} {what}", r"\percent")
        r.number(f"Cv{_phase_word(phase)}MaxPct", 100 * cv.max(), 1,
                 f"largest CV (ddof=1) of {phase} {what} over configurations", r"\percent")


def _correlations(r: Results, design: Design) -> None:
    """Energy against time (RQ3), where energy was measured and a cell has runs enough."""
    r.flags["Correlations"] = False
    if not r.flags["EnergyMeasured"]:
        return
    found = {}
    for phase in PHASES:
        for column, word in (("duration_s", "Counter"), ("codecarbon_duration_s", "CodeCarbon")):
            rho = energy.energy_time_correlation(r.totals, phase, column, design)
            if rho is None:
                return
            found[(phase, column, word)] = rho
    r.flags["Correlations"] = True
    for (phase, column, word), rho in found.items():
        base = f"Rho{_phase_word(phase)}{word}"
        what = f"Spearman rho of {phase} energy against {column}"
        r.number(base, rho["pooled"], 2, what + ", pooled over configurations")
        r.range(base + "Within", rho["within_min"], rho["within_max"], 2, what + " within a cell")


def _instruments(r: Results, tables: CampaignTables, design: Design) -> None:
    """The two instruments side by side, where blocks carry both readings."""
    r.paired_blocks = instruments.paired_blocks(tables.blocks)
    r.flags["InstrumentsCompared"] = r.paired_blocks is not None
    if r.paired_blocks is None:
        return
    a = instruments.agreement(r.paired_blocks, design.codecarbon_interval_s)
    r.count("InstrumentBlocks", a["blocks"], "block", "blocks", "blocks with both readings")
    r.number("CodeCarbonMedianDiffPct", 100 * a["median_relative_difference"], 1,
             "median relative difference of CodeCarbon energy against the counters", r"\percent")
    r.number("OverhangSharePct", 100 * a["overhang_share"], 1,
             "share of blocks whose CodeCarbon duration outlasts the counter window by more "
             "than one sampling interval", r"\percent")
    r.number("PowerUnderstatementMaxPct", 100 * a["largest_power_understatement"], 1,
             "largest understatement of power derived from CodeCarbon's energy and duration",
             r"\percent")
    r.scaled("PowerUnderstatementBlockS", "duration_s", a["largest_understatement_duration_s"],
             "counter duration of the block with the largest power understatement")
    r.text("PowerUnderstatementPhase", a["largest_understatement_phase"],
           "phase of the block with the largest power understatement", kind="label")


def _codecarbon(r: Results, tables: CampaignTables) -> None:
    """CodeCarbon's total over the blocks, and whether its CPU figure is a model."""
    blocks = tables.blocks
    r.flags["CodeCarbonCpuModelled"] = codecarbon_models_cpu(blocks)
    if not r.flags["CodeCarbonMeasured"]:
        return
    r.scaled("CodeCarbonTotalWh", "energy_wh",
             float(blocks["codecarbon_energy_j"].sum()) * WH_PER_J, "CodeCarbon energy of all blocks")
    r.text("CodeCarbonHow", r.coverage.codecarbon.how if r.coverage else "",
           "how CodeCarbon read each component")


def _accuracy(r: Results, tables: CampaignTables, design: Design, spec: dict) -> None:
    caveat = accuracy_caveat(spec)
    r.flags["AccuracyCaveat"] = caveat is not None
    if caveat is not None:
        r.text("AccuracyCaveatText", caveat, "why the scope's test accuracy does not measure the "
               "trained weights (deepgreen_audit.batchnorm)")
    r.final_accuracy = accuracy.final_accuracy(tables)
    r.accuracy_spreads = accuracy.accuracy_spreads(r.final_accuracy, design)
    r.range("AccuracySpreadPp", r.accuracy_spreads["spread_pp"].min(),
            r.accuracy_spreads["spread_pp"].max(), 1,
            "final-accuracy spread over cells, percentage points")
    c = accuracy.collapses(r.final_accuracy, design)
    r.count("CollapsesCount", c["collapsed"], "run", "runs", "runs whose training collapsed",
            words=True)
    r.count("CollapseRuns", c["runs"], "run", "runs", "runs judged for collapse")
    r.number("CollapseUpperPct", 100 * c["upper_bound"], 1,
             "exact one-sided upper confidence bound on the collapse rate", r"\percent")
    r.number("CollapseMarginPp", 100 * design.collapse_margin_fraction, 0,
             "collapse margin above chance, percentage points")
    r.number("CollapseConfidencePct", 100 * design.collapse_confidence, 0,
             "confidence of the collapse-rate bound", r"\percent")
    r.number("CollapseWastedTrainPct",
             100 * accuracy.wasted_training_share(r.final_accuracy, r.totals, design, r.column), 1,
             f"share of the campaign's training {r.values['RankedQuantity'].value} that "
             "collapsed runs spent", r"\percent")
    r.flags["CollapseSusceptible"] = bool(design.collapse_susceptible)
    if design.collapse_susceptible:
        s = accuracy.susceptible_collapses(r.final_accuracy, design)
        r.text("CollapseSusceptibleList", ";".join("/".join(c) for c in design.collapse_susceptible),
               "the cells susceptible to collapses ([analysis] collapse_susceptible_cells)",
               kind="cells")
        r.text("CollapseSusceptibleReason", str(spec["analysis"]["collapse_susceptible_reason"]),
               "why those cells ([analysis] collapse_susceptible_reason)")
        r.number("CollapseSusceptibleCount", s["collapsed"], 0,
                 "collapsed runs on the susceptible cells")
        r.count("CollapseSusceptibleRuns", s["runs"], "run", "runs",
                "runs judged on the susceptible cells")
        r.number("CollapseSusceptibleUpperPct", 100 * s["upper_bound"], 1,
                 "exact one-sided Clopper-Pearson upper bound on the collapse rate of the "
                 "susceptible cells", r"\percent")


def _comparisons(r: Results, design: Design) -> None:
    r.pairwise = comparisons.pairwise(r.totals, design, r.column)
    r.flags["PairsCompared"] = not r.pairwise.empty
    if r.pairwise.empty:
        return
    s = comparisons.summary(r.pairwise, design)
    r.count("ComparisonsTotal", s["comparisons"], "comparison", "comparisons",
            "pairwise comparisons in the family")
    r.number("ComparisonsSurviveHolm", s["survive_holm"], 0,
             "comparisons significant after Holm's correction")
    r.number("ComparisonsUncorrected", s["uncorrected_below_alpha"], 0,
             "comparisons with an uncorrected p below alpha")
    r.number("ComparisonsAlpha", design.alpha, 2, "family-wise significance level")
    r.number("SmallestAttainableP", s["smallest_attainable_p"],
             decimals_for(s["smallest_attainable_p"]),
             "smallest exact two-sided p-value the repetitions allow")
    r.number("HolmFirstThreshold", s["holm_first_threshold"],
             decimals_for(s["holm_first_threshold"]),
             "Holm's first threshold: the smallest p-value (alpha over the family size)")
    r.count("ComparisonRepetitions", s["repetitions"], "repetition", "repetitions",
            "repetitions per side in the tests")
    r.count("CompleteSeparationCount", s["complete_separation"], "pair", "pairs",
            "comparisons whose repetitions do not overlap at all (A12 of 0 or 1)")
    r.number("MedianEffectSize", s["median_effect"], 2,
             "median |Cliff's delta| = 2|A12 - 0.5| over the comparisons")
    r.number("BootstrapResamples", design.bootstrap_resamples, 0,
             "bootstrap resamples per interval")


#: The utilisation columns and the word of their macros.
UTILISATION_WORDS = (("gpu_utilization_pct", "Gpu"), ("cpu_utilization_pct", "Cpu"))


def _utilisation(r: Results, tables: CampaignTables, design: Design) -> None:
    assert r.coverage is not None
    measured = tuple(column for column, quantity in (
        ("gpu_utilization_pct", r.coverage.gpu_utilisation),
        ("cpu_utilization_pct", r.coverage.cpu_utilisation)) if quantity.measured)
    if not measured:
        raise MissingValue("no 1 Hz sample records a utilisation, so the sampler's medians "
                           "are missing")
    samples = utilisation.attributed_samples(tables)
    r.utilisation = utilisation.utilisation_medians(tables, design, samples, measured)
    r.utilisation_by_architecture = utilisation.utilisation_by_architecture(
        tables, design, samples, measured)
    coverage = utilisation.sampler_coverage(tables, samples)
    r.number("SamplerRunsCovered", coverage["covered"], 0,
             "runs with at least one 1 Hz sample inside one of their blocks")
    r.number("SamplerCoveragePct", 100 * coverage["covered"] / coverage["runs"], 1,
             "share of the package's runs the sampler covered", r"\percent")
    by_arch = r.utilisation_by_architecture
    train = r.utilisation[r.utilisation["phase"] == "train"].set_index("ecosystem")
    for phase in PHASES:
        w = _phase_word(phase)
        cells = by_arch.loc[by_arch["phase"] == phase, list(measured)]
        if cells.isna().any().any():
            r.unsampled[phase] = utilisation.unsampled_reason(tables, design, phase)
        sampled = bool(cells.notna().any().any())
        r.flags[f"Util{w}Sampled"] = sampled
        if not sampled:
            r.text(f"Util{w}NotSampledReason", r.unsampled[phase],
                   f"why no utilisation sample falls inside a {phase} block")
    for column, word in UTILISATION_WORDS:
        if column not in measured:
            continue
        for phase in PHASES:
            w = _phase_word(phase)
            values = by_arch[by_arch["phase"] == phase][column].dropna()
            description = (f"median {word.upper()} utilisation of a stack and architecture in "
                           f"{phase} blocks")
            if values.empty:
                r.not_measured(f"{word}Util{w}ArchPct", r.values[f"Util{w}NotSampledReason"].value,
                               description)
                continue
            r.range(f"{word}Util{w}ArchPct", values.min(), values.max(), 0, description,
                    r"\percent")
        values = train[column].dropna()
        if values.empty:
            continue
        r.range(f"{word}UtilTrainPct", values.min(), values.max(), 0,
                f"median {word.upper()} utilisation of an ecosystem while training", r"\percent")
        r.text(f"{word}UtilTrainMinEcosystem", values.idxmin(),
               f"ecosystem with the lowest median {word.upper()} utilisation while training", kind="label")
        r.text(f"{word}UtilTrainMaxEcosystem", values.idxmax(),
               f"ecosystem with the highest median {word.upper()} utilisation while training", kind="label")


def _campaign_energy(r: Results, tables: CampaignTables) -> None:
    """Slurm's whole-run reading summed over the campaign, where it was recorded."""
    slurm = campaign.slurm_energy(tables)
    r.flags["SlurmEnergy"] = slurm is not None
    if slurm is None:
        return
    r.count("SlurmRuns", int(slurm["runs"]), "run", "runs",
            "runs with Slurm's ConsumedEnergy and complete blocks")
    r.scaled("SlurmEnergyWh", "energy_wh", slurm["slurm_j"] * WH_PER_J,
             "Slurm's whole-run energy summed over those runs")
    r.scaled("SlurmBlocksWh", "energy_wh", slurm["blocks_j"] * WH_PER_J,
             "counter energy of the same runs' blocks")
    r.number("SlurmBeyondBlocksPct", 100 * (slurm["slurm_j"] / slurm["blocks_j"] - 1), 1,
             "energy Slurm read beyond the blocks, relative to the blocks", r"\percent")


def _out_of_scope(r: Results, spec: dict) -> None:
    """Ecosystems outside the study altogether, with the reason (S6_replication.out_of_scope)."""
    outside = dict(spec["S6_replication"].get("out_of_scope", {}))
    r.flags["OutOfScope"] = bool(outside)
    if outside:
        r.text("OutOfScopeEcosystems", "; ".join(f"{name}: {why}" for name, why in outside.items()),
               "ecosystems outside the study and why (S6_replication.out_of_scope)")
