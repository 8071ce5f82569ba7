"""What every stack shares: the canonical data store, the three model definitions,
the canonical initial weights, and the parity checks that prove them equal.

* `conventions`: the numeric conventions the specification leaves to "the
  PyTorch defaults" (BatchNorm epsilon and momentum, Adam betas and epsilon,
  the canonical initialisers), written down once so that no stack inherits
  its framework's own defaults silently;
* `data`: official archives -> one canonical uint8 store (npz), fingerprinted;
* `models_torch`, `models_tf`, `models_flax`: ResNet-18 and VGG-16, layer for layer;
* `weights`: one seeded export per (architecture, classes, seed) in
  safetensors with a manifest, and its loaders for each framework;
* `runtime`: what the Python stack programs share around their framework code
  (recipe guard, run inputs, reporting, batch limits, prefetching);
* `prepare`: a plan's stores and weight exports written before collection;
* `cpp`: building the C++/LibTorch stack with CMake;
* `parity`: the checks (names/shapes/counts, logits and loss, pixels, recipe);
* `cli`: the verbs `deepgreen data` and `deepgreen parity`.
"""
