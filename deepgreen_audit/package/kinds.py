"""The kinds of package deepgreen reads, each declared by its descriptor.

A descriptor names its kind under `deepgreen:package` (a Data Package
profile of ours); the tables it holds and the verbs that read it follow from
that one value, defined here.  A descriptor without the key is read as a
replication package when it holds one of the replication tables (packages
written before the key existed), and otherwise as a foreign Frictionless
data package, which only `validate` reads, through frictionless itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import TABLES

#: The descriptor key that declares the kind of package.
KIND_KEY = "deepgreen:package"


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    #: the resources (and `schemas/<name>.json`) a package of this kind holds, in writing order
    tables: tuple[str, ...]
    verbs: tuple[str, ...]
    #: verbs that do not apply to this kind, each with the verb that does what was meant
    instead: dict[str, str] = field(default_factory=dict)


REPLICATION = Kind("replication", "replication package", TABLES,
                   verbs=("validate", "audit", "restore", "export", "render", "paper", "compare"),
                   instead={"api-audit": "audit"})
API_PROFILES = Kind("api-profiles", "API-level package", ("api_calls", "api_samples"),
                    verbs=("validate", "api-audit", "export"), instead={"audit": "api-audit"})
#: Anyone's CodeCarbon emissions.csv rows (`deepgreen import codecarbon`), audited for what
#: the study learned about such logs (deepgreen_audit.codecarbon).
CODECARBON_LOG = Kind("codecarbon-log", "CodeCarbon-log package", ("codecarbon_log",),
                      verbs=("validate", "audit", "export"), instead={"api-audit": "audit"})
FOREIGN = Kind("foreign", "Frictionless data package not written by deepgreen", (),
               verbs=("validate",))
#: The kinds a descriptor can declare, by the value of its KIND_KEY.
DECLARABLE = {kind.name: kind for kind in (REPLICATION, API_PROFILES, CODECARBON_LOG)}
#: What each verb that some kind refuses does, for the message that refuses it.
VERB_PURPOSE = {
    "audit": "audits a campaign's runs against the experiment specification",
    "api-audit": "audits the calls of an API-level package",
    "restore": "writes a campaign's run directories, one per run",
    "export": "writes deepgreen's tables as typed Parquet files",
    "render": "computes the paper's numbers from a campaign",
    "paper": "builds the paper from a campaign",
    "compare": "compares two campaigns against a control group",
}


def kind_of(descriptor: dict, path: str | Path) -> Kind:
    """The kind `descriptor` (read from `path`) declares, or the kind its resources imply."""
    declared = descriptor.get(KIND_KEY)
    if declared is None:
        # (a name that is not text, a JSON list say, names no table: the validator refuses it)
        names = {r.get("name") for r in descriptor.get("resources", [])
                 if isinstance(r, dict) and isinstance(r.get("name"), str)}
        return REPLICATION if names & set(REPLICATION.tables) else FOREIGN
    if not isinstance(declared, str) or declared not in DECLARABLE:
        raise UserError(f"declares {KIND_KEY} = {repr(declared)[:80]}, a kind of package deepgreen does not "
                        f"know (known: {', '.join(DECLARABLE)})", path=path, code="unknown-kind")
    return DECLARABLE[declared]


def require_verb(kind: Kind, verb: str, path: str | Path) -> None:
    """A UserError, naming the kind and the verb to use instead, when `verb` does not apply."""
    if verb in kind.verbs:
        return
    readers = [_with_article(k.title) for k in (*DECLARABLE.values(), FOREIGN) if verb in k.verbs]
    declared = (f"{KIND_KEY} = {kind.name!r}, tables {', '.join(kind.tables)}" if kind.tables
                else f"no {KIND_KEY} and none of deepgreen's tables")
    instead = f"; use 'deepgreen {kind.instead[verb]}' instead" if verb in kind.instead else ""
    raise UserError(f"is {_with_article(kind.title)} ({declared}), and 'deepgreen {verb}' "
                    f"{VERB_PURPOSE[verb]}: it reads {' or '.join(readers)} only{instead}",
                    path=path, code="wrong-kind")


def _with_article(title: str) -> str:
    return ("an " if title[0] in "AEIOUaeiou" else "a ") + title
