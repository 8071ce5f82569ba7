"""The initialiser trial: one configuration run from several initialisers' weights.

A plan whose [scope] names `initialisers` (collect/initialiser-trial.toml) runs
each configuration of its scope once per initialiser and repetition, every run
from its own seeded export drawn with that initialiser (`stacks.weights`, "he"
being the canonical export).  Its run ids name the initialiser,
``<ecosystem>.<architecture>.<dataset>.<initialiser>.r<repetition>``, and its
runs record the hash of the export they loaded: the collection, the synthetic
generator, the audit and the analysis read a run's initialiser from here.
"""

from __future__ import annotations

import re

from deepgreen_audit.errors import UserError

#: The initialiser of the canonical export (S1_model.initialisers; models_torch.canonical_init_,
#: torchvision's): every run outside a trial starts from its export.
CANONICAL_INITIALISER = "he"


def known_initialisers(spec: dict) -> list[str]:
    """The initialisers the specification describes (S1_model.initialisers)."""
    return list(spec["S1_model"]["initialisers"])


def trial_initialisers(scope: dict | None) -> tuple[str, ...]:
    """The initialisers a declared scope compares (empty: the campaign is no trial)."""
    return tuple((scope or {}).get("initialisers") or ())


def run_id(ecosystem: str, architecture: str, dataset: str, repetition: int,
           initialiser: str | None = None) -> str:
    """A run's id: its configuration, the trial's initialiser when there is one, repetition."""
    arm = f".{initialiser}" if initialiser else ""
    return f"{ecosystem}.{architecture}.{dataset}{arm}.r{repetition}"


def initialiser_of(run: str, initialisers: tuple[str, ...]) -> str:
    """The initialiser a trial run's id names; a UserError naming the run when it names none
    of `initialisers`."""
    match = re.fullmatch(r".+\.([^.]+)\.r[0-9]+", run)
    if match is None or match.group(1) not in initialisers:
        raise UserError(f"run {run!r} names none of the trial's initialisers "
                        f"({', '.join(initialisers)}) in its id (<configuration>.<initialiser>"
                        ".r<n>)", code="trial-error")
    return match.group(1)
