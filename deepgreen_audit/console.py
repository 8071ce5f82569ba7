"""What every verb's parser shares, below the verbs that use it: the help's formatter and its
examples, the options and types several verbs take, and the parser that names the closest
valid choice.  The verbs' modules (`deepgreen_audit.cli` and each subpackage's `cli`) import
it; it imports nothing of theirs."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from deepgreen_audit.errors import unknown_name


def examples_epilog(examples) -> str:
    """A help's examples, each `(command, what it shows)`: every line `  deepgreen ...` under
    "examples" runs as written from the checkout's root (tests/test_cli_help.py runs them all,
    in order, in a scratch copy), exiting 0 unless its note says `(exit N)`."""
    if not examples:
        return ""
    width = max((len(command) for command, _ in examples if len(command) <= 50), default=0) + 3
    lines = []
    for command, note in examples:
        lines.append(f"  {command:<{width}}{note}".rstrip() if len(command) < width
                     and 2 + width + len(note) <= 88 else f"  {command}\n      {note}".rstrip())
    return "\nexamples (run from the checkout's root):\n" + "\n".join(lines) + "\n"


def strict_option(parser) -> None:
    """--strict, the same on every verb that checks something (errors.EXIT_CODES)."""
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on a warning or a check that could not run too (not on "
                             "one that does not apply to the package; without --strict: on a "
                             "failed check only)")


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (a usage error, exit 2, otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


class LazyChoicesAppend(argparse._AppendAction):
    """A repeatable option whose choices a registry holds that is costly to import (the synth
    defects import numpy and the generator): `load_choices` is called only when the option is
    given or its help shown, so that every other verb starts without it.  Its help may say
    %(choices)s."""

    def __init__(self, *args, load_choices: Callable[[], Iterable[str]], **kwargs):
        self._load_choices = load_choices
        super().__init__(*args, **kwargs)

    @property
    def choices(self) -> list[str]:
        return list(self._load_choices())

    @choices.setter
    def choices(self, _value) -> None:
        """The registry is the one list: what argparse sets (None) is ignored."""

    @property
    def help(self) -> str:
        return self._help.replace("%(choices)s", ", ".join(self.choices))

    @help.setter
    def help(self, value: str) -> None:
        self._help = value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions wrapped to the terminal, while the lines an epilog indents (examples, the
    exit codes) stay as written, so that each example remains one line to copy."""

    def _fill_text(self, text, width, indent):
        return "\n".join(line if line.startswith("  ") or len(line) <= width else
                         textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                         for line in text.splitlines())


class Parser(argparse.ArgumentParser):
    """argparse's parser, refusing a value outside an option's choices (a verb, --defect, ...)
    as every verb refuses a misspelt name: the valid ones and the closest
    (`errors.unknown_name`), where argparse 3.11 lists them only."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            what = ("a verb" if isinstance(action, argparse._SubParsersAction)
                    else "one of its choices")
            raise argparse.ArgumentError(action, unknown_name(str(value), [str(c) for c in choices],
                                                              what))
