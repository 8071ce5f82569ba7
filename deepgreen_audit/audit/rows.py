"""What the checks of CodeCarbon's own columns read, in whichever kind holds them: a campaign's
blocks or the rows of anyone's CodeCarbon logs.  Those checks (S5.energy-domains,
S5.carbon-intensity, S5.emissions-rate) take a `CodeCarbonColumns`; each kind's context
implements it, and `suite.registry.check_for` has the type checker prove that it does where a
kind reuses them.  Their messages are templates whose nouns are the kind's (`RowWords`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from deepgreen_audit.columnar.frame import Frame
from deepgreen_audit.spec import AuditTolerances


@dataclass(frozen=True)
class RowWords:
    """How a kind's findings name its rows: "block(s)" of a campaign, "row(s)" of a log."""

    #: one row, and many
    row: str
    rows: str
    #: what an identity that fails counts as checked
    checked: str
    #: whether the kind records counter energy beside CodeCarbon's
    has_counters: bool


CAMPAIGN_WORDS = RowWords("block", "blocks", "readings", has_counters=True)
LOG_WORDS = RowWords("row", "rows", "rows", has_counters=False)


class CodeCarbonColumns(Protocol):
    """A context whose rows carry CodeCarbon's columns under the blocks table's names."""

    spec: dict[str, Any]
    tolerances: AuditTolerances
    words: RowWords

    @property
    def blocks(self) -> Frame: ...

    @property
    def block_runs(self) -> Frame: ...
