"""The audit as a reviewer reads it (one self-contained HTML page) and as CI reads it (JUnit).

The pages of the shipped synthetic package and of the imported legacy campaign (read from
../shared) are rendered, checked as text, and opened in headless Chromium (Debian's
`chromium`; scripts/setup.sh installs it as root): every check has its section, every failing
or warning finding its figure, the console has no error and the page fetches nothing."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from deepgreen_audit.audit.driver import audit_with_context
from deepgreen_audit.audit.html import render_junit, render_page
from deepgreen_audit.cli import main
from tests.conftest import SHARED

CHROMIUM = Path("/usr/bin/chromium")
LEGACY = SHARED / "legacy-campaign"
ROOT = Path(__file__).resolve().parents[1]
#: the acceptance's bound on the legacy campaign's page
MAX_PAGE_BYTES = 5 * 2**20


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """(report, page) of the shipped package and of the legacy campaign."""
    from deepgreen_audit.importers.legacy import import_source

    if not LEGACY.is_dir():
        pytest.skip(f"the legacy campaign is not at {LEGACY} (../shared beside the checkout)")
    base = tmp_path_factory.mktemp("html")
    legacy_descriptor, _ = import_source(LEGACY, base / "legacy")
    out = {}
    for name, location in (("shipped", ROOT / "datapackage.json"),
                           ("legacy", legacy_descriptor)):
        report, ctx = audit_with_context(location)
        path = base / f"{name}.html"
        path.write_text(render_page(report, ctx), encoding="utf-8")
        out[name] = (report, path)
    return out


@pytest.mark.parametrize("name", ["shipped", "legacy"])
def test_every_check_has_its_section_and_every_finding_its_evidence_and_figure(pages, name):
    report, path = pages[name]
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < MAX_PAGE_BYTES
    for f in report.findings:
        start = text.index(f'data-check="{f.id}"')
        section = text[start:text.index("</section>", start)]
        assert f">{f.status}</span>" in section
        if f.status in ("fail", "warn"):
            assert 'class="figure"' in section and "data:image/png;base64," in section, f.id
            if (f.details or {}).get("evidence"):
                assert 'class="evidence"' in section, f.id
    # nothing to fetch: no remote reference, and a policy that forbids any
    assert "http://" not in text.replace("http-equiv", "") and "https://" not in text
    assert "Content-Security-Policy" in text and "<script" not in text


def test_the_synthetic_page_says_so_as_the_pdf_does(pages):
    report, path = pages["shipped"]
    text = path.read_text(encoding="utf-8")
    assert report.synthetic
    assert text.count("SYNTHETIC DATA") >= 3          # banner, heading, watermark
    assert "<title>SYNTHETIC" in text and 'class="watermark"' in text
    legacy = pages["legacy"][1].read_text(encoding="utf-8")
    assert 'class="synthetic"' not in legacy and "measured or imported" in legacy


def test_the_legacy_page_shows_the_campaigns_evidence(pages):
    report, path = pages["legacy"]
    text = path.read_text(encoding="utf-8")
    assert report.counts["fail"] > 0 and not report.finished
    assert "python-tensorflow/resnet18/fashion-mnist" in text         # the mislabel, in its table
    assert "Not flagged, with the explanation the evidence favours" in text
    assert "more row(s) in the JSON report" in text                   # capped evidence says so


@pytest.mark.parametrize("name", ["shipped", "legacy"])
def test_in_chromium_the_page_renders_without_error_or_request(pages, name, tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip("Chromium is not installed (apt-get install chromium; scripts/setup.sh does "
                    "it as root)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is in the dev extra (scripts/setup.sh)")
    report, path = pages[name]
    requests, problems = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1200, "height": 1600})
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        sections = page.locator("section.check").count()
        figures = page.locator("section.fail img.figure, section.warn img.figure")
        loaded = figures.evaluate_all("imgs => imgs.filter(i => i.complete && i.naturalWidth > 0).length")
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=False)
        browser.close()
    assert sections == len(report.findings)
    assert loaded == report.counts["fail"] + report.counts["warn"]
    assert requests == [path.as_uri()], requests
    assert not problems, problems
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000


def test_junit_counts_equal_the_audits_and_parse(pages, tmp_path):
    junitparser = pytest.importorskip("junitparser", reason="junitparser is in the dev extra")
    for name, (report, _) in pages.items():
        path = tmp_path / f"{name}.xml"
        path.write_text(render_junit(report), encoding="utf-8")
        root = ET.parse(path).getroot()
        assert root.tag == "testsuites"
        cases = root.findall("./testsuite/testcase")
        assert [c.get("name") for c in cases] == [f.id for f in report.findings]
        assert all(c.get("classname") for c in cases)
        suite = next(iter(junitparser.JUnitXml.fromfile(str(path))))
        counts = report.counts
        assert (suite.tests, suite.failures, suite.skipped, suite.errors) == (
            len(report.findings), counts["fail"], counts["skip"], 0)
        failing = {c.get("name") for c in cases if c.find("failure") is not None}
        assert failing == {f.id for f in report.findings if f.status == "fail"}


def test_the_cli_writes_both_beside_its_usual_report(tmp_path, capsys):
    package = tmp_path / "pkg"
    shutil.copytree(ROOT / "replication", package / "replication")
    shutil.copy(ROOT / "datapackage.json", package / "datapackage.json")
    html, junit = tmp_path / "out" / "audit.html", tmp_path / "out" / "audit.xml"
    html.parent.mkdir()
    assert main(["audit", str(package / "datapackage.json"), "--strict", "--select", "S5",
                 "--html", str(html), "--junit", str(junit)]) == 0
    assert "SYNTHETIC DATA" in capsys.readouterr().out
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert ET.parse(junit).getroot().get("failures") == "0"
