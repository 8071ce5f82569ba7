"""Collection: the measurement contract (docs/design.md, "Measurement contract"), made hard to break quietly.

Layers, bottom up:

* device layer, one module per hardware interface, each trivially faked:
  `nvml` (pynvml's total-energy counter), `rapl` (powercap sysfs),
  `codecarbon_tracker` (CodeCarbon 3.x, pinned configuration), `sampler` (1 Hz);
* `instruments`: the counters a host has, or the reasons it lacks them;
* `harness`: blocks (one phase of one epoch) bracketed by synchronised counter
  reads; Python stacks import it; `protocol` serves it to other languages;
* `record`: a finished run as a run directory (the format of package.rundirs);
* `plan`, `preflight`, `runner` (one process a run), `staging` (one run from its work folder
  into the campaign tree), `driver` (the local executor), `slurm` (the Slurm executor: a job
  array, a task per run) with `slurm_accounting` (what Slurm says about a task).
"""
