"""ResNet-18 and VGG-16 in Flax (linen), layer for layer as `models_torch`.

NHWC tensors, HWIO kernels, explicit symmetric padding (as PyTorch), PyTorch's
BatchNorm arithmetic (`TorchBatchNorm`: the epsilon and momentum of
`conventions`, unbiased running variance; Flax's own BatchNorm defaults to
momentum 0.99 and a biased running variance), PyTorch's adaptive-pool windows
and channel-major flattening before VGG's classifier.

Module names are the PyTorch module paths with "." written "_"
(``layer1_0``/``downsample_0``); parameters are ``kernel``/``bias`` for
convolutions and dense layers, ``weight``/``bias`` for BatchNorm, whose
running statistics live in the ``batch_stats`` collection.  `state` and
`load_state` translate to and from the canonical names.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from deepgreen_audit.stacks import conventions as conv
from deepgreen_audit.stacks.weights import to_channels_first, to_channels_last

BN_EPSILON = conv.BATCHNORM_EPSILON
BN_DECAY = conv.BATCHNORM_DECAY


class TorchBatchNorm(nn.Module):
    epsilon: float
    decay: float

    @nn.compact
    def __call__(self, x, train: bool):
        c = x.shape[-1]
        weight = self.param("weight", nn.initializers.ones, (c,))
        bias = self.param("bias", nn.initializers.zeros, (c,))
        running_mean = self.variable("batch_stats", "running_mean", lambda: jnp.zeros((c,), jnp.float32))
        running_var = self.variable("batch_stats", "running_var", lambda: jnp.ones((c,), jnp.float32))
        if train:
            mean = jnp.mean(x, axis=(0, 1, 2))
            var = jnp.mean(jnp.square(x - mean), axis=(0, 1, 2))
            n = x.size // c
            if not self.is_initializing():
                running_mean.value = self.decay * running_mean.value + (1 - self.decay) * mean
                running_var.value = self.decay * running_var.value + (1 - self.decay) * var * n / (n - 1)
        else:
            mean, var = running_mean.value, running_var.value
        return (x - mean) / jnp.sqrt(var + self.epsilon) * weight + bias


def _conv(features, kernel, stride, padding, bias, name):
    return nn.Conv(features, (kernel, kernel), (stride, stride), padding=[(padding, padding)] * 2,
                   use_bias=bias, name=name)


def _bn(name):
    return TorchBatchNorm(BN_EPSILON, BN_DECAY, name=name)


class BasicBlock(nn.Module):
    cin: int
    cout: int
    stride: int

    @nn.compact
    def __call__(self, x, train: bool):
        identity = x
        if self.stride != 1 or self.cin != self.cout:
            identity = _bn("downsample_1")(_conv(self.cout, 1, self.stride, 0, False, "downsample_0")(x), train)
        out = nn.relu(_bn("bn1")(_conv(self.cout, 3, self.stride, 1, False, "conv1")(x), train))
        out = _bn("bn2")(_conv(self.cout, 3, 1, 1, False, "conv2")(out), train)
        return nn.relu(out + identity)


class ResNet18(nn.Module):
    classes: int
    dropout: float = conv.VGG_DROPOUT   # unused: ResNet-18 has no dropout

    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.relu(_bn("bn1")(_conv(64, 7, 2, 3, False, "conv1")(x), train))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=[(1, 1), (1, 1)])
        cin = 64
        for i, (cout, stride) in enumerate(conv.RESNET18_STAGES, 1):
            x = BasicBlock(cin, cout, stride, name=f"layer{i}_0")(x, train)
            x = BasicBlock(cout, cout, 1, name=f"layer{i}_1")(x, train)
            cin = cout
        return nn.Dense(self.classes, name="fc")(jnp.mean(x, axis=(1, 2)))


def adaptive_avg_pool(x, side: int):
    rows = []
    for h0, h1 in conv.adaptive_pool_bins(x.shape[1], side):
        rows.append(jnp.stack([jnp.mean(x[:, h0:h1, w0:w1, :], axis=(1, 2))
                               for w0, w1 in conv.adaptive_pool_bins(x.shape[2], side)], axis=1))
    return jnp.stack(rows, axis=1)


class VGG16(nn.Module):
    classes: int
    dropout: float = conv.VGG_DROPOUT

    @nn.compact
    def __call__(self, x, train: bool):
        index = 0
        for item in conv.VGG16_FEATURES:
            if item == "M":
                x = nn.max_pool(x, (2, 2), (2, 2))
                index += 1
            else:
                x = nn.relu(_conv(item, 3, 1, 1, True, f"features_{index}")(x))
                index += 2
        x = adaptive_avg_pool(x, conv.VGG_POOL_SIDE)
        x = jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)   # channel-major, as torch.flatten
        for i in (0, 3):
            x = nn.relu(nn.Dense(conv.VGG16_HIDDEN, name=f"classifier_{i}")(x))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.classes, name="classifier_6")(x)


ARCHITECTURES = {"resnet18": ResNet18, "vgg16": VGG16}


def build(architecture: str, classes: int, dropout: float = conv.VGG_DROPOUT) -> nn.Module:
    return ARCHITECTURES[architecture](classes, dropout)


_TO_CANONICAL = {"kernel": "weight"}


def _canonical_name(path: tuple[str, ...]) -> str:
    *modules, leaf = path
    return ".".join([m.replace("_", ".") for m in modules] + [_TO_CANONICAL.get(leaf, leaf)])


def state(variables: dict) -> dict[str, np.ndarray]:
    """{'params': ..., 'batch_stats': ...} under the canonical names, in PyTorch layout."""
    out = {}
    for collection in ("params", "batch_stats"):
        flat = jax.tree_util.tree_flatten_with_path(variables.get(collection, {}))[0]
        for keys, value in flat:
            out[_canonical_name(tuple(k.key for k in keys))] = to_channels_first(np.asarray(value))
    return out


def load_state(template: dict, tensors: dict[str, np.ndarray]) -> dict:
    """New variables shaped like `template` (from `init`) holding the canonical tensors."""
    names = set(state(template))
    if names != set(tensors):
        raise ValueError(f"weight names differ: missing {sorted(names - set(tensors))[:5]}, "
                         f"unexpected {sorted(set(tensors) - names)[:5]}")

    def fill(keys, leaf):
        value = to_channels_last(tensors[_canonical_name(tuple(k.key for k in keys))])
        if value.shape != leaf.shape:
            raise ValueError(f"{_canonical_name(tuple(k.key for k in keys))}: shape {value.shape} != {leaf.shape}")
        return jnp.asarray(value)

    return {c: jax.tree_util.tree_map_with_path(fill, template[c]) for c in ("params", "batch_stats")
            if c in template}


def init_template(model: nn.Module, side: int = 32) -> dict:
    """The variable tree's shapes (abstractly: no initialiser runs, nothing is drawn)."""
    return jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, side, side, 3)), train=False))
