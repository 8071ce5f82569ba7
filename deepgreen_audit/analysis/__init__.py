"""The analysis: every number the paper quotes, as tested functions of the typed tables.

`load_tables(package)` reads the columns the analysis needs (refusing a
package that lacks one), `Design.from_spec()` is the planned campaign, and
`analyse(tables, design)` computes everything into a `Results`.  See
docs/analysis.md for each quantity's definition.
"""

from deepgreen_audit.analysis.data import CampaignTables, Design, MissingValue, load_tables
from deepgreen_audit.analysis.results import Results, analyse
from deepgreen_audit.analysis.values import Count, NotMeasured, Number, Range, Text

__all__ = ["CampaignTables", "Count", "Design", "MissingValue", "NotMeasured", "Number", "Range",
           "Results", "Text", "analyse", "load_tables"]
