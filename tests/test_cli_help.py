"""The help is the manual (issue 24): every option of every verb says what it does, and every
example a `--help` shows runs as written.

An example is a line `  deepgreen ...` under a help's "examples" heading (`cli.examples_epilog`
writes them); it is run from the checkout's root, in a scratch copy of what examples read
(datapackage.json, replication/, examples/, collect/, calibration/, and ../shared where it exists), each help's
examples in order in one copy, and must exit 0 unless its note says `(exit N)`.  Examples that
read ../shared are skipped where the checkout has none beside it."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import SHARED
from deepgreen_audit.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
#: What the examples read, copied from the checkout into each scratch root.
INPUTS = ("datapackage.json", "replication", "examples", "collect", "calibration")
EXAMPLE = re.compile(r"^  (deepgreen \S.*?)(?:\s{2,}(.*))?$")


def parsers(parser=None, name="deepgreen"):
    """Every parser of the command line, named by its command (`deepgreen import legacy`)."""
    parser = parser or build_parser()
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                yield from parsers(sub, f"{name} {verb}")


def examples(parser) -> list[tuple[str, int]]:
    """The examples of one help, each with the exit status its note promises."""
    found, lines = [], (parser.epilog or "").splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("examples")), None)
    if heading is None:
        return found
    for i, line in enumerate(lines[heading + 1:], heading + 1):
        match = EXAMPLE.match(line)
        if match:
            note = match.group(2) or (lines[i + 1] if i + 1 < len(lines) else "")
            status = re.search(r"\(exit (\d+)\)", note)
            found.append((match.group(1), int(status.group(1)) if status else 0))
    return found


ALL = [(name, parser) for name, parser in parsers()]


@pytest.mark.parametrize("name, parser", ALL, ids=[name for name, _ in ALL])
def test_every_option_has_help(name, parser):
    bare = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if not a.help and not isinstance(a, argparse._SubParsersAction)]
    assert not bare, f"{name}: options without help: {bare}"


WITH_EXAMPLES = [(name, parser) for name, parser in ALL if examples(parser)]


def test_the_main_verbs_show_examples():
    names = {name for name, _ in WITH_EXAMPLES}
    assert {"deepgreen", "deepgreen validate", "deepgreen audit", "deepgreen synth",
            "deepgreen import legacy", "deepgreen import codecarbon"} <= names


@pytest.mark.parametrize("name, parser", WITH_EXAMPLES, ids=[n for n, _ in WITH_EXAMPLES])
def test_examples_run_as_written(name, parser, tmp_path, monkeypatch, capsys):
    root = tmp_path / "checkout"
    root.mkdir()
    for item in INPUTS:
        source = ROOT / item
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, root / item)
    if SHARED.exists():
        (tmp_path / "shared").symlink_to(SHARED)
    monkeypatch.chdir(root)
    for command, expected in examples(parser):
        if "../shared" in command and not SHARED.exists():
            pytest.skip(f"{command}: ../shared is not beside the checkout")
        status = main(shlex.split(command)[1:])
        assert status == expected, f"{command}: exit {status}, not {expected}\n" \
                                   f"{capsys.readouterr().err[-2000:]}"


def test_import_source_help_describes_that_source(capsys):
    for source, words in (("legacy", "first campaign"), ("codecarbon", "emissions.csv"),
                          ("greenlight", "FECoM")):
        with pytest.raises(SystemExit):
            main(["import", source, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert out.startswith(f"usage: deepgreen import {source}") and words in out


def test_synth_help_lists_the_defect_names(capsys):
    from deepgreen_audit.synth.defects import DEFECTS

    with pytest.raises(SystemExit):
        main(["synth", "--help"])
    out = capsys.readouterr().out.replace("-\n", "-").replace("\n", " ")
    assert all(name in " ".join(out.split()).replace("- ", "-") for name in DEFECTS)
