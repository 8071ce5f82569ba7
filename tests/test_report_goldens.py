"""The reports a restructuring must leave unchanged, byte for byte: the audit of the shipped
package, of the first campaign and of the 28 shared CodeCarbon logs (JSON and text), the
validation of the shipped package, and the numbers the shipped package renders.

Each is normalised (the seconds a check took, the temporary folder a package was imported into)
and hashed; tests/data/report-goldens.json holds the digests.  A change meant to change a report
writes them again, and its commit says why:

    .venv/bin/python tests/test_report_goldens.py      # rewrites tests/data/report-goldens.json
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = ROOT / "tests" / "data" / "report-goldens.json"
SHARED_LOGS = ROOT.parent / "shared" / "codecarbon-logs"


def _without_seconds(value):
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, Sequence) and not isinstance(value, str):  # lists, rows made when read
        return [_without_seconds(v) for v in value]
    return value


def _report_texts(report, where: Path | None = None) -> dict[str, str]:
    """The JSON (without timings) and the text of a report, the folder `where` named <PKG> and
    the checkout <ROOT> (a clone elsewhere gives the same digests)."""
    data = json.dumps(_without_seconds(report.to_dict()), sort_keys=True, default=str)
    text = report.format_text(width=100)
    if where is not None:
        data, text = (t.replace(str(where), "<PKG>") for t in (data, text))
    return {"json": data.replace(str(ROOT), "<ROOT>"), "text": text.replace(str(ROOT), "<ROOT>")}


def shipped_audit() -> dict[str, str]:
    from deepgreen_audit.audit import audit

    return _report_texts(audit(ROOT / "datapackage.json"))


def shipped_validate() -> dict[str, str]:
    from deepgreen_audit.package.validate import validate

    return _report_texts(validate(ROOT / "datapackage.json"))


def first_campaign_audit() -> dict[str, str]:
    from deepgreen_audit.audit import audit

    return _report_texts(audit(ROOT / "examples" / "first-campaign"))


def codecarbon_logs_audit() -> dict[str, str]:
    from deepgreen_audit.codecarbon.audit import audit_log
    from deepgreen_audit.codecarbon.importer import import_logs

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "logs"
        import_logs([SHARED_LOGS], out)
        report, _ = audit_log(out)
        return _report_texts(report, out)


def shipped_numbers() -> dict[str, str]:
    from deepgreen_audit.render.build import render

    with tempfile.TemporaryDirectory() as scratch:
        render(ROOT / "datapackage.json", Path(scratch) / "gen", pilot=None)
        numbers = (Path(scratch) / "gen" / "numbers.tex").read_text(encoding="utf-8")
        numbers = re.sub(r"%% renderer: deepgreen \S+", "%% renderer", numbers)
        return {"numbers": numbers.replace(str(ROOT), "<ROOT>")}


#: Each report, and whether it needs ../shared beside the checkout.
REPORTS: dict[str, tuple[Callable[[], dict[str, str]], bool]] = {
    "shipped-audit": (shipped_audit, False),
    "shipped-validate": (shipped_validate, False),
    "first-campaign-audit": (first_campaign_audit, False),
    "codecarbon-logs-audit": (codecarbon_logs_audit, True),
    "shipped-numbers": (shipped_numbers, False),
}


def digests(name: str) -> dict[str, str]:
    make, _ = REPORTS[name]
    return {part: hashlib.sha256(text.encode("utf-8")).hexdigest() for part, text in make().items()}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_report_is_what_it_was(name):
    if REPORTS[name][1] and not SHARED_LOGS.is_dir():
        pytest.skip(f"{SHARED_LOGS} is not here (../shared beside the checkout)")
    expected = json.loads(GOLDENS.read_text(encoding="utf-8"))[name]
    assert digests(name) == expected, (f"the {name} report changed; if that was meant, run "
                                       "tests/test_report_goldens.py and say why in the commit")


def main() -> None:
    sys.path.insert(0, str(ROOT))
    GOLDENS.write_text(json.dumps({name: digests(name) for name in sorted(REPORTS)}, indent=2,
                                  sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDENS}")


if __name__ == "__main__":
    main()
