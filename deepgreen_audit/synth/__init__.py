"""The synthetic campaign: a full-size replication package drawn from a documented model.

`generate` draws the four tables, the planted truth and the descriptor
metadata from one seed (by default the specification's master seed); `write_synthetic` writes them as a package (the
truth beside the tables as ``synth-truth.json``).  The generative model is
documented in `deepgreen_audit.synth.model`, the plantable defects in
`deepgreen_audit.synth.defects`.  A synthetic package says so in its
descriptor (``"synthetic": true``); its numbers are not measurements.
"""

from deepgreen_audit.synth.defects import DEFECTS
from deepgreen_audit.synth.generate import TRUTH_FILE, SynthResult, generate, truth_bytes, write_synthetic
from deepgreen_audit.synth.model import SynthModel

__all__ = ["DEFECTS", "TRUTH_FILE", "SynthModel", "SynthResult", "generate",
           "truth_bytes", "write_synthetic"]
