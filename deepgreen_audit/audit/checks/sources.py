"""Checks against the stack sources (`stacks/`): the plug-in point for sources and built
artefacts.  They read the project's files (`AuditContext.sources_root`: the checkout, or the
copy a wheel ships, deepgreen_audit.resources), not the package, and skip when there is
nothing to read.  The lint of the manuscript's results text, also a source check, is in
`manuscript` beside them (the renderer and `deepgreen paper` run it too).

Stack sources must read the recipe from the specification (collect/experiment.toml, or the
harness that serves it) rather than hard-code it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepgreen_audit.suite.registry import NotApplicable, Outcome, check

if TYPE_CHECKING:  # the audit layer, for the annotation only
    from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.stacks.sources import recipe_literals, stack_sources


@check("source.recipe-not-hardcoded", "source")
def recipe_not_hardcoded(ctx: AuditContext) -> Outcome:
    """Stack sources under stacks/ take the recipe from the specification: no source file
    writes down a recipe value (learning rate, batch size, epochs, ...) as a literal
    (the scan parity's S2.recipe-literals reports too: deepgreen_audit.stacks.sources)."""
    stacks = ctx.sources_root / "stacks"
    files = stack_sources(stacks) if stacks.is_dir() else []
    if not files:
        raise NotApplicable(f"no stack sources in {stacks} to check")
    hits = [f"{path.relative_to(ctx.sources_root)}:{line} ({key} {literal})"
            for path, line, literal, key in recipe_literals(stacks, ctx.spec)]
    if hits:
        return Outcome.failed(f"{len(hits)} hard-coded recipe value(s): " + ", ".join(hits[:10])
                              + (" ..." if len(hits) > 10 else ""), rows=len(hits),
                              details={"lines": hits})
    return Outcome.passed(f"{len(files)} source files under stacks/ hard-code no recipe value")

