"""Numeric conventions shared by every stack, stated once.

The specification (collect/experiment.toml) owns the recipe; these are the
conventions beneath it where frameworks ship different defaults under one
name.  All are PyTorch's (the canonical weights are PyTorch's layout), and
every other stack is set to them explicitly:

* BatchNorm: epsilon 1e-5; running statistics updated with PyTorch momentum
  0.1, i.e. ``running = 0.9 * running + 0.1 * batch`` (Keras and Flax call the
  same rule "momentum 0.9"; their defaults, 0.99 and eps 1e-3 in Keras, differ);
  the batch variance that normalises is biased, the one that updates the
  running variance is unbiased (n / (n - 1)), as in PyTorch.
* Adam: betas (0.9, 0.999), epsilon 1e-8 added to sqrt(v_hat) (Keras' default
  is 1e-7 and adds it to sqrt(v) before the bias correction; the TF stack
  therefore uses its own Adam update with PyTorch's formula).
* VGG-16 has no BatchNorm (torchvision ``vgg16``, the configuration the
  specification's parameter counts describe); its classifier keeps dropout 0.5
  and the 7x7 adaptive average pool.
"""

BATCHNORM_EPSILON = 1e-5
#: PyTorch's momentum: weight of the new batch statistic in the running average.
BATCHNORM_TORCH_MOMENTUM = 0.1
#: The same rule in Keras/Flax terms: weight of the old running value.
BATCHNORM_DECAY = 1.0 - BATCHNORM_TORCH_MOMENTUM
#: The architectures with BatchNorm layers (VGG-16, torchvision's plain ``vgg16``, has none).
BATCHNORM_ARCHITECTURES = ("resnet18",)

ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPSILON = 1e-8

VGG_DROPOUT = 0.5
VGG_POOL_SIDE = 7

#: Channel-first (PyTorch) names of the architectures' stages.
RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))
VGG16_FEATURES = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                  512, 512, 512, "M")
VGG16_HIDDEN = 4096


def adaptive_pool_bins(size_in: int, size_out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive average pooling windows [start, end) along one axis."""
    return [((i * size_in) // size_out, -(-((i + 1) * size_in) // size_out)) for i in range(size_out)]
