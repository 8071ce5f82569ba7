"""The synthetic campaign: a full-size replication package drawn from a documented model.

`generate` draws the four tables, the planted truth and the descriptor
metadata from one seed (by default the specification's master seed); `write_synthetic` writes them as a package (the
truth beside the tables as ``synth-truth.json``).  The generative model is
documented in `deepgreen_audit.synth.model`, the plantable defects in
`deepgreen_audit.synth.defects`.  A synthetic package says so in its
descriptor (``"synthetic": true``); its numbers are not measurements.
"""

import importlib

#: What the package offers, and the module of each: imported on first use, so that a command
#: naming the defects (the command line's help) does not pay for the generator.
_EXPORTS = {"DEFECTS": "defects", "TRUTH_FILE": "generate", "SynthResult": "generate",
            "generate": "generate", "truth_bytes": "generate", "write_synthetic": "generate",
            "SynthModel": "model"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
