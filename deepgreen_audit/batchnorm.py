"""Whether a run gave BatchNorm's running statistics the optimiser steps they need.

Every stack reports test accuracy in evaluation mode, where BatchNorm normalises with its
running statistics: an exponential average of the training batches' statistics with PyTorch
momentum 0.1 (`conventions`), so an average over roughly the last 1 / 0.1 = 10 optimiser
steps (its horizon).  While the weights still move fast, those statistics describe weights of
several steps ago and evaluation scores near chance although the weights, normalised with
their own batch's statistics, classify well.  A scope of few optimiser steps (digits: 1,437
images, 12 steps an epoch at batch 128) ends there: measured on ResNet-18 in every stack
(docs/analysis.md, "Accuracy on small smoke scopes").  The number of horizons a run needs is
the specification's `audit.batchnorm_min_horizons`.

The collection (the descriptor's `measured.accuracy_caveat`), the audit (S2.train-eval-gap)
and the paper ask this module, so it imports only the specification and the stacks' numeric
conventions (a leaf module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deepgreen_audit.spec import AuditTolerances
from deepgreen_audit.stacks.conventions import BATCHNORM_ARCHITECTURES, BATCHNORM_TORCH_MOMENTUM


def horizon_steps(momentum: float = BATCHNORM_TORCH_MOMENTUM) -> float:
    """The optimiser steps a running average of PyTorch momentum `momentum` mostly covers."""
    return 1.0 / momentum


def min_steps(spec: dict) -> int:
    """The optimiser steps a run needs before its running statistics follow its weights."""
    return math.ceil(AuditTolerances.of(spec).batchnorm_min_horizons * horizon_steps())


def optimiser_steps(samples: int, batch_size: int) -> int:
    """The optimiser steps of one pass over `samples` (a short last batch is a step)."""
    return math.ceil(samples / batch_size)


@dataclass(frozen=True)
class RunningStatistics:
    """The steps one configuration's runs give BatchNorm's running statistics."""

    architecture: str
    dataset: str
    steps_per_epoch: int
    epochs: int
    #: the steps they need (min_steps)
    needed_steps: int

    @property
    def steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    @property
    def has_batchnorm(self) -> bool:
        return self.architecture in BATCHNORM_ARCHITECTURES

    @property
    def follow(self) -> bool:
        """Whether evaluation can measure the weights: no BatchNorm, or enough steps."""
        return not self.has_batchnorm or self.steps >= self.needed_steps

    @property
    def epochs_needed(self) -> int:
        return math.ceil(self.needed_steps / self.steps_per_epoch)

    def shortfall(self) -> str:
        """'24 optimiser steps (2 epochs of 12), fewer than the 100 that ... need'."""
        return (f"{self.steps:,} optimiser steps ({self.epochs} epoch{'s' * (self.epochs != 1)} "
                f"of {self.steps_per_epoch:,}), fewer than the {self.needed_steps:,} that "
                f"BatchNorm's running statistics (momentum {BATCHNORM_TORCH_MOMENTUM}, an average "
                f"over about the last {horizon_steps():.0f} steps) need to follow the weights")


def scope_steps_per_epoch(spec: dict, dataset: str) -> int:
    """A scoped specification's optimiser steps per epoch on `dataset` (its batch limit too)."""
    steps = optimiser_steps(int(spec["S3_data"]["train_samples"][dataset]),
                            int(spec["S2_optimisation"]["batch_size"]))
    limit = (spec.get("scope") or {}).get("max_train_batches")
    return min(steps, int(limit)) if limit else steps


def scope_running_statistics(spec: dict) -> list[RunningStatistics]:
    """Each (architecture, dataset) of a scoped specification (deepgreen_audit.spec.scoped)."""
    return [RunningStatistics(architecture, dataset, scope_steps_per_epoch(spec, dataset),
                              int(spec["S2_optimisation"]["epochs"]), min_steps(spec))
            for architecture in spec["S1_model"]["architectures"]
            for dataset in spec["S3_data"]["datasets"]]


def accuracy_caveat(spec: dict) -> str | None:
    """One sentence saying whose test accuracy a scoped specification's runs cannot make
    meaningful, and why; None when every configuration gives its running statistics enough
    steps (or has no BatchNorm)."""
    short = [s for s in scope_running_statistics(spec) if not s.follow]
    if not short:
        return None
    where = "; ".join(f"{s.architecture} on {s.dataset} takes {s.shortfall()} "
                      f"({s.epochs_needed:,} epochs would be enough)" for s in short)
    return (f"Test accuracy does not measure the trained weights: {where}, so evaluation "
            f"normalises with statistics of earlier weights and may score near chance.")
