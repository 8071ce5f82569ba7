"""The experiment specification (`collect/experiment.toml`), loaded once.

It is the single source of the study's recipe and measurement contract:
the synthetic generator, the campaign plan, the stacks and the audit read
their values from here rather than writing them down again.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import project_root


def spec_path() -> Path:
    return project_root() / "collect" / "experiment.toml"


@lru_cache(maxsize=None)
def load_spec(path: str | None = None) -> dict:
    """The specification as a dict of sections S1_model ... S6_replication."""
    target = Path(path) if path else spec_path()
    try:
        return tomllib.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError("the experiment specification is missing", path=target) from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"is not valid TOML: {exc}", path=target) from None


def recipe(spec: dict | None = None) -> dict:
    """The per-run recipe values, keyed by their column names in the runs table."""
    spec = spec or load_spec()
    s2, s3, s4 = spec["S2_optimisation"], spec["S3_data"], spec["S4_backend"]
    return {
        "optimizer": s2["optimizer"], "learning_rate": s2["learning_rate"],
        "batch_size": s2["batch_size"], "epochs": s2["epochs"],
        "lr_schedule": s2["lr_schedule"], "weight_decay": s2["weight_decay"],
        "input_resolution_px": s3["input_resolution_px"], "input_scaling": s3["input_scaling"],
        "input_normalisation": s3["input_normalisation"], "loader_workers": s3["loader_workers"],
        "eval_batch_size": s3["eval_batch_size"], "precision_policy": s4["precision_policy"],
    }
