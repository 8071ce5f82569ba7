"""What the stack sources write down: every numeric literal that is a value the
specification owns (the recipe's learning rate, batch size, epochs, ...).  A stack reads
those from the specification; one that writes one down has a second source of a fact.

Both the audit (`source.recipe-not-hardcoded`) and parity (`S2.recipe-literals`) report
this scan; it reads source files only (the stacks' `build/` and `target/` are skipped).
"""

from __future__ import annotations

import os
import re
import tokenize
from pathlib import Path

from deepgreen_audit.resources import shipped_root
from deepgreen_audit.spec import recipe


def spec_owned_numbers(spec: dict | None = None) -> dict[str, float]:
    """The recipe's numbers that a stack must read rather than write (the distinctive ones:
    non-zero floats and integers >= 8; 0, 1 and 2 occur in any code for other reasons)."""
    values = {}
    for key, value in recipe(spec).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if (isinstance(value, float) and value != 0.0) or (isinstance(value, int) and value >= 8):
            values[key] = value
    return values


#: The source files of the stacks' languages (not their build configuration: a version
#: number in Cargo.toml is not a recipe value).
SOURCE_SUFFIXES = {".py", ".cpp", ".cc", ".h", ".hpp", ".rs", ".r", ".R", ".java", ".kt", ".jl"}


#: Folders of build output (CMake's, Cargo's), never descended into: a built Rust stack's
#: target/ alone holds thousands of files.
BUILD_FOLDERS = frozenset({"build", "target"})


def stack_sources(root: Path | None = None) -> list[Path]:
    """The source files under `root` (default: the stacks/ the project ships), builds left out."""
    root = Path(root or shipped_root() / "stacks")
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if name not in BUILD_FOLDERS]
        found.extend(Path(folder, name) for name in files if Path(name).suffix in SOURCE_SUFFIXES)
    return sorted(p for p in found if p.is_file())


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"", re.S)
_NUMBER = re.compile(r"(?<![\w.])(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w.])")


#: A line carrying this marker (in a comment, with its reason) holds a number that only
#: looks like a recipe value (a file-format constant, a word size).
NOT_RECIPE_MARKER = "not-recipe:"


def _numbers_in(path: Path):
    """(line, literal) of every numeric literal outside comments, strings and marked lines."""
    text = path.read_text(encoding="utf-8", errors="replace")
    marked = {i for i, line in enumerate(text.splitlines(), 1) if NOT_RECIPE_MARKER in line}
    if path.suffix == ".py":
        try:
            with open(path, "rb") as fh:
                numbers = [(tok.start[0], tok.string) for tok in tokenize.tokenize(fh.readline)
                           if tok.type == tokenize.NUMBER and tok.start[0] not in marked]
            yield from numbers
            return
        except (tokenize.TokenError, SyntaxError):
            pass  # not valid Python: scanned as text below
    stripped = _C_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for lineno, line in enumerate(stripped.splitlines(), 1):
        for m in _NUMBER.finditer(line if lineno not in marked else ""):
            yield lineno, m.group(1)


def recipe_literals(root: Path | None = None, spec: dict | None = None) -> list[tuple[Path, int, str, str]]:
    """Every place a stack source writes down a number the specification owns."""
    owned = spec_owned_numbers(spec)
    hits = []
    for path in stack_sources(root):
        for lineno, literal in _numbers_in(path):
            try:
                value = float(literal.replace("_", ""))
            except ValueError:
                continue
            for key, spec_value in owned.items():
                if value == float(spec_value):
                    hits.append((path, lineno, literal, key))
    return hits
