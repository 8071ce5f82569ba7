"""examples/first-campaign/: the study's first campaign as `deepgreen import legacy` makes it,
shipped so that a fresh clone has real, flawed data to audit (regenerate it with
scripts/first-campaign.sh)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import shared_data
from deepgreen_audit.importers.legacy import import_source
from deepgreen_audit.package.dispatch import validate_package

SHIPPED = Path(__file__).resolve().parents[1] / "examples" / "first-campaign"


def test_shipped_first_campaign_equals_a_fresh_import(tmp_path):
    source = shared_data("legacy-campaign")
    import_source(source, tmp_path / "fresh")
    shipped = sorted(p.name for p in SHIPPED.iterdir())
    assert shipped == sorted(p.name for p in (tmp_path / "fresh").iterdir())
    for name in shipped:
        assert (SHIPPED / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), \
            f"examples/first-campaign/{name} is stale: run scripts/first-campaign.sh"


def test_shipped_first_campaign_validates_and_states_its_provenance():
    report = validate_package(SHIPPED)
    assert report.valid, report.format_text()
    descriptor = json.loads((SHIPPED / "datapackage.json").read_text(encoding="utf-8"))
    assert descriptor["synthetic"] is False
    provenance = descriptor["provenance"]
    assert provenance["repository"] == "https://github.com/Pampaj7/DeepGreen"
    assert len(provenance["commit"]) == 40 and "MIT" in provenance["licence"]
