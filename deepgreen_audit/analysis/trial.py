"""The initialiser trial's counts: collapses per initialiser, with exact intervals.

An initialiser-trial package (collect/initialiser-trial.toml; `deepgreen_audit.trial`)
declares the initialisers it compares in its scope, and each run's id names its
initialiser.  A run *collapsed* by the campaign's rule (`accuracy.collapsed_runs`:
a final test accuracy within `analysis.collapse_margin_fraction` of chance);
each initialiser's rate is given with its exact two-sided Clopper-Pearson
interval at `analysis.collapse_confidence` (`stats.clopper_pearson_interval`).
The runs of different initialisers must have loaded different exports (their
recorded `initial_weights_sha256`), which is what makes them a trial of the
initialisers and not of anything else.  The paper's sentence ("0 of 6 runs
collapsed under He, 2 of 6 under Glorot and 4 of 6 under Xavier") is
rendered from these counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepgreen_audit.analysis import accuracy, stats
from deepgreen_audit.analysis.data import Design, MissingValue, typed_columns
from deepgreen_audit.analysis.results import Number, Text
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.spec import load_spec, scoped
from deepgreen_audit.trial import initialiser_of, trial_initialisers

RUN_COLUMNS = ("run_id", "ecosystem", "architecture", "dataset", "repetition", "status", "epochs",
               "initial_weights_sha256")
BLOCK_COLUMNS = ("run_id", "epoch", "phase", "test_accuracy")


@dataclass(frozen=True)
class Arm:
    """One initialiser's runs: how many were judged, how many collapsed, the exact interval."""

    initialiser: Text
    runs: Number
    collapsed: Number
    low_pct: Number
    high_pct: Number
    exports: Number


@dataclass(frozen=True)
class TrialResults:
    """The trial's identity, what it ran, and one `Arm` per initialiser in the scope's order."""

    title: Text
    synthetic: bool
    #: each configuration the trial ran: {"ecosystem", "architecture", "dataset"} as labels
    configurations: tuple[dict, ...]
    epochs: Number
    repetitions: Number
    confidence_pct: Number
    margin_pp: Number
    arms: tuple[Arm, ...]


def analyse_trial(location) -> TrialResults:
    """The trial's counts from the package at `location`; a UserError when it is no trial."""
    package = Package.open(location)
    scope = package.descriptor.get("scope")
    initialisers = trial_initialisers(scope if isinstance(scope, dict) else None)
    if not initialisers:
        raise UserError("is not an initialiser-trial package: its declared scope names no "
                        "initialisers (collect it, or synthesise it, with "
                        "collect/initialiser-trial.toml)", path=package.descriptor_path,
                        code="trial-error")
    design = Design.from_spec(scoped(load_spec(), scope, package.descriptor_path))
    runs = typed_columns(package, "runs", RUN_COLUMNS)
    if runs.empty:
        raise MissingValue("initialiser trial: the package has no runs", path=package.descriptor_path)
    runs["initialiser"] = [_initialiser(r, initialisers, package) for r in runs["run_id"]]
    _refuse_shared_exports(runs, package)
    final = accuracy.final_accuracy_of(runs, typed_columns(package, "blocks", BLOCK_COLUMNS))
    final = final.merge(runs[["run_id", "initialiser"]], on="run_id")
    collapsed = accuracy.collapsed_runs(final, design)
    arms = tuple(_arm(i, final, collapsed, runs, design) for i in initialisers)
    descriptor = package.descriptor
    configurations = tuple(
        {"ecosystem": Text(e, "ecosystem", kind="label"),
         "architecture": Text(a, "architecture", kind="label"),
         "dataset": Text(d, "dataset", kind="label")}
        for e, a, d in sorted(set(zip(runs["ecosystem"], runs["architecture"], runs["dataset"]))))
    return TrialResults(
        title=Text(str(descriptor.get("title", descriptor.get("name", ""))), "trial title"),
        synthetic=package.synthetic,
        configurations=configurations,
        epochs=Number(int(runs["epochs"].max()), 0, "trial epochs per run"),
        repetitions=Number(int(runs["repetition"].max()), 0, "trial repetitions per initialiser"),
        confidence_pct=Number(100 * design.collapse_confidence, 0,
                              "confidence of the exact intervals", r"\percent"),
        margin_pp=Number(100 * design.collapse_margin_fraction, 0,
                         "collapse margin above chance, percentage points"),
        arms=arms)


def _initialiser(run_id: str, initialisers: tuple[str, ...], package: Package) -> str:
    try:
        return initialiser_of(run_id, initialisers)
    except UserError as exc:
        raise UserError(exc.message, path=package.descriptor_path, code=exc.code) from None


def _refuse_shared_exports(runs, package: Package) -> None:
    """Runs of two initialisers that recorded one export (or none) did not compare them."""
    unhashed = runs[runs["initial_weights_sha256"].isna()]
    if not unhashed.empty:
        raise MissingValue(f"initialiser trial: run {unhashed['run_id'].iloc[0]} records no "
                           "initial_weights_sha256, so its initialiser's export is unknown",
                           path=package.descriptor_path)
    owners = runs.groupby("initial_weights_sha256")["initialiser"].nunique()
    shared = owners[owners > 1]
    if not shared.empty:
        raise MissingValue(f"initialiser trial: runs of different initialisers recorded one "
                           f"export ({shared.index[0]}), so they did not start from different "
                           "initial weights", path=package.descriptor_path)


def _arm(initialiser: str, final, collapsed, runs, design: Design) -> Arm:
    ids = final.loc[final["initialiser"] == initialiser, "run_id"]
    judged = collapsed[collapsed.index.isin(ids)]
    if judged.empty:
        raise MissingValue(f"initialiser trial: no run of initialiser {initialiser} has a final "
                           "test accuracy, so its collapses are missing")
    k, n = int(judged.sum()), len(judged)
    low, high = stats.clopper_pearson_interval(k, n, design.collapse_confidence)
    exports = runs.loc[runs["initialiser"] == initialiser, "initial_weights_sha256"].nunique()
    return Arm(initialiser=Text(initialiser, "initialiser", kind="label"),
               runs=Number(n, 0, f"{initialiser}: runs judged"),
               collapsed=Number(k, 0, f"{initialiser}: runs collapsed"),
               low_pct=Number(100 * low, 0, f"{initialiser}: lower end of the exact interval",
                              r"\percent"),
               high_pct=Number(100 * high, 0, f"{initialiser}: upper end of the exact interval",
                               r"\percent"),
               exports=Number(int(exports), 0, f"{initialiser}: distinct exports"))
