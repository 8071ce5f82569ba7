"""Checks against the stack sources (`stacks/`): the plug-in point for sources and built
artefacts.  They read the project's files (`AuditContext.sources_root`: the checkout, or the
copy a wheel ships, deepgreen_audit.resources), not the package, and skip when there is
nothing to read.  The lint of the manuscript's results text, also a source check, is the
renderer's (`deepgreen_audit.render.lint`), registered from there.

Stack sources must read the recipe from the specification (collect/experiment.toml, or the
harness that serves it) rather than hard-code it.
"""

from __future__ import annotations

import re

from deepgreen_audit.registry import Outcome, Skip, check
from deepgreen_audit.spec import recipe

SOURCE_SUFFIXES = {".py", ".cpp", ".cc", ".h", ".hpp", ".java", ".kt", ".r", ".R", ".rs",
                   ".jl", ".m", ".toml", ".yaml", ".yml", ".json", ".sh"}
#: Recipe keys and the spellings stacks use for them in code.
RECIPE_NAMES = {"learning_rate": ("learning_rate", "lr", "learningRate"),
                "batch_size": ("batch_size", "batchSize"),
                "epochs": ("epochs", "num_epochs", "n_epochs"),
                "weight_decay": ("weight_decay", "weightDecay"),
                "loader_workers": ("num_workers", "loader_workers", "workers"),
                "eval_batch_size": ("eval_batch_size", "evalBatchSize")}


def _number_pattern(value) -> str:
    texts = {repr(value), str(value), f"{value:g}", f"{value:.0e}".replace("e-0", "e-")}
    if isinstance(value, float):
        texts |= {f"{value:.0e}", f"{value:.1e}"}
    return "|".join(sorted((re.escape(t) for t in texts), key=len, reverse=True))


@check("source.recipe-not-hardcoded", "source")
def recipe_not_hardcoded(ctx):
    """Stack sources under stacks/ take the recipe from the specification: no source file
    assigns a recipe value (learning rate, batch size, epochs, ...) as a literal."""
    stacks = ctx.sources_root / "stacks"
    if not stacks.is_dir():
        raise Skip(f"no stack sources in {stacks} to check")
    rec = recipe(ctx.spec)
    patterns = [(key, re.compile(r"\b(?:" + "|".join(names) + r")\b\s*(?:=|:|<-|:=)\s*(?:"
                                 + _number_pattern(rec[key]) + r")(?![0-9.])"))
                for key, names in RECIPE_NAMES.items()]
    hits = []
    files = [p for p in sorted(stacks.rglob("*")) if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    if not files:
        raise Skip(f"{stacks} holds no source files")
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for key, pattern in patterns:
                if pattern.search(line):
                    hits.append(f"{path.relative_to(ctx.sources_root)}:{number} ({key})")
    if hits:
        return Outcome.failed(f"{len(hits)} hard-coded recipe value(s): " + ", ".join(hits[:10])
                              + (" ..." if len(hits) > 10 else ""), rows=len(hits),
                              details={"lines": hits})
    return Outcome.passed(f"{len(files)} source files under stacks/ hard-code no recipe value")

