"""Print the pip constraints of the pinned frameworks (collect/experiment.toml, S4_backend).

Run by scripts/setup.sh before the project is installed, so it reads the specification with
the standard library only (deepgreen_audit.pins).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepgreen_audit.pins import pip_constraints  # noqa: E402

sys.stdout.write(pip_constraints())
