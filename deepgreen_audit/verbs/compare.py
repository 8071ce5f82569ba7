"""Verb `compare` (thin): two packages, what differs, ratios B/A and the control group's drift."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepgreen_audit.errors import UserError


def _notice(location: str) -> None:
    from deepgreen_audit.package.descriptor import Package

    try:
        notice = Package.open(location).notice()
    except UserError:
        return
    if notice:
        print(notice, file=sys.stderr, flush=True)


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare B with A; print text or JSON; write the figure when asked."""
    from deepgreen_audit.compare.core import compare_packages
    from deepgreen_audit.compare.output import figure_pdf, format_json, format_text
    from deepgreen_audit.package import atomic
    from deepgreen_audit.package.descriptor import Package

    control = [s.strip() for s in args.control.split(",") if s.strip()] if args.control else None
    if args.control is not None and not control:
        raise UserError("names no stack; give STACK,STACK,...", field="--control",
                        code="usage-error")
    figure = Path(args.figure) if args.figure else None
    if figure is not None:  # refused before anything is computed, as every output is
        inputs = [p for location in (args.a, args.b) for p in Package.open(location).input_paths()]
        atomic.refuse_overlap(figure, inputs)
        atomic.check_output(figure, args.overwrite)
    comparison = compare_packages(args.a, args.b, control=control)
    for location in (args.a, args.b):  # on stderr, so that --json stays parseable
        _notice(location)
    print(format_json(comparison) if args.json else format_text(comparison), flush=True)
    if figure is not None:
        atomic.write_bytes(figure, figure_pdf(comparison), overwrite=args.overwrite)
        print(f"wrote {figure}", file=sys.stderr, flush=True)
    return 0


def register(verb: Callable[..., Any]) -> None:
    """Add `compare` to the command line."""
    p = verb("compare", cmd_compare, "compare two campaigns against a control group's drift",
             "Validate packages A (the baseline) and B, say what differs between them (the "
             "specification their runs recorded, the environment, the declared scope and the "
             "configurations each holds), then give per configuration (stack, architecture, "
             "dataset, phase) the ratios B/A of median phase energy and duration with seeded "
             "bootstrap intervals, and judge each stack against the control group's drift: the "
             "range the control configurations' intervals cover. The control group is the "
             "stacks named with --control, by default those whose recorded precision policy "
             "and versions did not change. A stack beyond the drift changed by more than the "
             "unchanged stacks moved. Two packages that share no configuration are "
             "compared as far as they can be (what differs), and the text says so first; where "
             "either package measured no counter energy, the text says which and why, and "
             "the durations are compared instead, named as such. Exit 0 when compared, 2 on "
             "an input error. See docs/compare.md.",
             [("deepgreen synth --out a/ --datasets cifar100 --repetitions 3 --epochs 3",
               "a small campaign"),
              (("deepgreen synth --out b/ --datasets cifar100 --repetitions 3 --epochs 3 "
                "--precision-change python-tensorflow=3.14"),
               "the same seed, one stack's precision policy changed"),
              ("deepgreen compare a/ b/", "TensorFlow's training lies beyond the drift"),
              ("deepgreen compare a/ b/ --json --figure compare.pdf", "as JSON, and a figure"),
              ("deepgreen compare a/ b/ --control cpp-libtorch,rust-tch",
               "the LibTorch stacks as the control group")])
    p.add_argument("a", metavar="A", help="the baseline package (folder or its datapackage.json)")
    p.add_argument("b", metavar="B", help="the package compared with it")
    p.add_argument("--control", metavar="STACK,...",
                   help="the stacks known to be unchanged, whose drift is the yardstick "
                        "(default: those whose recorded precision policy and versions did not "
                        "change), e.g. cpp-libtorch,rust-tch")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--figure", metavar="PDF",
                   help="also write the energy ratios with the drift band as a figure, "
                        "e.g. compare.pdf")
    p.add_argument("--overwrite", action="store_true", help="replace the --figure file if it exists")
