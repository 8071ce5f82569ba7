"""SHA256SUMS in the format `sha256sum -c` reads: `<hex>  <name>` per line."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.paths import read_bytes, regular_file

FILENAME = "SHA256SUMS"
_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


def sha256_chunks(chunks: Iterable[bytes]) -> str:
    """SHA-256 (hex) of the chunks one after the other: the project's one hashing helper, for
    bytes, files read piecewise and several arrays hashed as one."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return sha256_chunks((data,))


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file, read in 1 MiB pieces."""
    regular_file(path)
    with open(path, "rb") as handle:
        return sha256_chunks(iter(lambda: handle.read(1 << 20), b""))


def format_sums(sums: dict[str, str]) -> str:
    """SHA256SUMS text for {file name: hex digest}, in the given order."""
    return "".join(f"{digest}  {name}\n" for name, digest in sums.items())


@dataclass(frozen=True)
class SumsLine:
    """One line of SHA256SUMS that names a file for the first time: its number and digest."""

    number: int
    digest: str


@dataclass(frozen=True)
class SumsProblem:
    """What is wrong with one line of SHA256SUMS: a validation code, the line, a message."""

    code: str
    number: int
    message: str


def parse_sums(path: Path) -> tuple[dict[str, SumsLine], list[SumsProblem]]:
    """{file name: its line} from a SHA256SUMS file, and every line's problem: malformed,
    a repeat of an earlier line, or a second digest for a file (which one would hold?).

    Every line is read, so a malformed one hides nothing after it; only text that is not
    UTF-8 is refused whole."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"is not UTF-8 (byte {exc.start})", path=path,
                        row=data[: exc.start].count(b"\n") + 1, code="checksum-format") from None
    sums: dict[str, SumsLine] = {}
    problems: list[SumsProblem] = []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        match = _LINE.fullmatch(line)
        if match is None:
            problems.append(SumsProblem("checksum-format", number, "is not a 'sha256sum' line: "
                                        "<64 hex digits>  <file name>"))
            continue
        digest, name = match.groups()
        first = sums.get(name)
        if first is None:
            sums[name] = SumsLine(number, digest)
        elif first.digest == digest:
            problems.append(SumsProblem("checksum-duplicate", number,
                                        f"repeats line {first.number} ({name})"))
        else:
            problems.append(SumsProblem("checksum-conflict", number, f"gives {name} another "
                                        f"SHA256 than line {first.number} does"))
    return sums, problems
