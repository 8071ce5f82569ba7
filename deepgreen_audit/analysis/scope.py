"""What a campaign's declared scope leaves out of the full design, and why.

A campaign declares its scope in its plan (`[scope]`), and the package's descriptor carries it
(`scope`).  The audit, the analysis and the paper treat that scope as the design; this module
says, value by value, how it differs from the specification's full design, so the paper can
state it: the labels left out (with the specification's known reason, e.g. R/torch, or the
scope's own `reason`), the labels added (the contrast cell's dataset), and the numbers changed
(repetitions, epochs, batch size, input resolution, device).
"""

from __future__ import annotations

from dataclasses import dataclass

from deepgreen_audit.spec import SCOPED_VALUES, load_spec


@dataclass(frozen=True)
class Narrowing:
    """One value of the design the scope changes: the full design's value and the declared one;
    for label lists, the labels left out (each with its known reason, or None) and added."""

    key: str
    full: object
    declared: object
    left_out: tuple[tuple[str, str | None], ...] = ()
    added: tuple[str, ...] = ()

    @property
    def is_list(self) -> bool:
        return isinstance(self.full, list)


def known_omissions(spec: dict | None = None) -> dict[str, str]:
    """{label: why a campaign may have to leave it out} (S6_replication.known_omissions)."""
    spec = spec or load_spec()
    return dict(spec["S6_replication"].get("known_omissions", {}))


def narrowings(scope: dict | None, spec: dict | None = None) -> tuple[Narrowing, ...]:
    """How `scope` differs from the full design of `spec` (unscoped), in SCOPED_VALUES order;
    empty when it does not differ."""
    spec = spec or load_spec()
    reasons = known_omissions(spec)
    found = []
    for key, (section, name) in SCOPED_VALUES.items():
        if not scope or key not in scope or scope[key] == spec[section][name]:
            continue
        full, declared = spec[section][name], scope[key]
        if isinstance(full, list):
            found.append(Narrowing(key, list(full), list(declared),
                                   left_out=tuple((v, reasons.get(v)) for v in full
                                                  if v not in declared),
                                   added=tuple(v for v in declared if v not in full)))
        else:
            found.append(Narrowing(key, full, declared))
    return tuple(found)
