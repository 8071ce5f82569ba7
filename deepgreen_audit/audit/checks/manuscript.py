"""The results text types no number: every figure it quotes comes from a macro.

`find_typed_numbers(tex)` returns each digit sequence typed in the abstract,
the Results section and the Limitations section of a manuscript, after removing comments, macro
names, the arguments of cross-referencing and file commands, and a short
allowlist of names that contain digits.  The tests run it on paper/paper.tex,
`deepgreen paper` refuses to build when it finds anything, and the audit runs it
as the check `source.results-text-numbers`, which this module registers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.package import paths
from deepgreen_audit.suite.registry import NotApplicable, Outcome, check

#: Digits that are part of a name, not a quoted figure.
ALLOWLIST = (r"ResNet-18", r"VGG-16", r"CIFAR-100", r"\bS[1-6]\b", r"\bRQ[1-4]\b")
#: Commands whose (optional and mandatory) arguments are labels or files, not figures.
ARGUMENT_COMMANDS = ("ref", "eqref", "autoref", "label", "cite", "input", "include",
                     "includegraphics", "begin", "end", "url", "href", "hypersetup")
_ARGUMENTS = re.compile(r"\\(?:" + "|".join(ARGUMENT_COMMANDS) + r")(?![A-Za-z])\*?(?:\[[^\]]*\])*(?:\{[^}]*\})?")
#: The sections whose text quotes the campaign's figures (besides the abstract).
SECTIONS = ("Results", "Limitations")
_COMMENT = re.compile(r"(?<!\\)%.*$", re.M)
_ALLOWED = re.compile("|".join(ALLOWLIST))
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class TypedNumber:
    line: int
    text: str
    context: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text!r} typed in the results text ({self.context.strip()})"


def results_spans(tex: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the abstract and of the Results and Limitations sections (each
    up to the next section or the end of the document)."""
    spans = []
    abstract = re.search(r"\\begin\{abstract\}(.*?)\\end\{abstract\}", tex, re.S)
    if abstract:
        spans.append(abstract.span(1))
    for title in SECTIONS:
        found = re.search(rf"\\section\{{{title}\}}(.*?)(?=\\section\*?\{{|\\end\{{document\}}|\Z)",
                          tex, re.DOTALL)
        if found:
            spans.append(found.span(1))
    return spans


def _blank(match: re.Match) -> str:
    """Replace a match by spaces, keeping newlines so line numbers stay right."""
    return re.sub(r"[^\n]", " ", match.group(0))


def find_typed_numbers(tex: str) -> list[TypedNumber]:
    """Digits typed in the results text of `tex` outside macros and the allowlist."""
    uncommented = _COMMENT.sub(_blank, tex)
    # blanking keeps every offset, so the spans found before it still apply after it
    cleaned = _ALLOWED.sub(_blank, _ARGUMENTS.sub(_blank, uncommented))
    found = []
    for start, end in results_spans(uncommented):
        for match in _DIGITS.finditer(cleaned, start, end):
            line = cleaned.count("\n", 0, match.start()) + 1
            found.append(TypedNumber(line, match.group(0), tex.splitlines()[line - 1]))
    return found


_CONDITIONAL = re.compile(r"\\(if[A-Za-z]+|else|fi)(?![A-Za-z])")


def taken_branches(tex: str, flags: dict[str, bool]) -> str:
    r"""`tex` with each conditional ``\\ifName ... [\\else ...] \\fi`` of a flag in `flags`
    reduced to the branch the flag takes, nested ones too; a conditional of another name
    (``\\ifdim``, ``\\ifSyntheticData`` where not given) keeps both branches.  What is left is
    the text TeX expands, so every macro in it must be defined."""
    kept: list[str] = []
    #: the open conditionals, innermost last: (flag name, whether its current branch is kept)
    open_: list[tuple[str, bool]] = []
    position = 0
    for match in _CONDITIONAL.finditer(tex):
        if all(keep for _, keep in open_):
            kept.append(tex[position:match.start()])
        word = match.group(1)
        if word == "fi" and open_:
            open_.pop()
        elif word == "else" and open_:
            name, _ = open_[-1]
            open_[-1] = (name, not flags[name] if name in flags else True)
        elif word.startswith("if"):
            name = word[2:]
            open_.append((name, flags.get(name, True)))
        position = match.end()
    if all(keep for _, keep in open_):
        kept.append(tex[position:])
    return "".join(kept)


def lint_paper(path: Path) -> list[TypedNumber]:
    """`find_typed_numbers` of a manuscript file."""
    return find_typed_numbers(paths.read_text(path))


@check("source.results-text-numbers", "source")
def results_text_numbers(ctx: AuditContext) -> Outcome:
    """The manuscript's results text (abstract and Results section of paper/paper.tex) types
    no number: every figure it quotes comes from a macro the renderer wrote
    (deepgreen_audit.audit.checks.manuscript)."""
    paper = ctx.sources_root / "paper" / "paper.tex"
    if not paper.is_file():
        raise NotApplicable(f"no manuscript at {paper} to lint")
    typed = lint_paper(paper)
    if typed:
        return Outcome.failed(f"{len(typed)} number(s) typed in the results text: "
                              + "; ".join(str(t) for t in typed[:5]), rows=len(typed))
    return Outcome.passed(f"{paper.relative_to(ctx.sources_root)}: the results text types no number")
