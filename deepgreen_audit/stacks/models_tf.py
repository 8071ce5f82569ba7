"""ResNet-18 and VGG-16 in TensorFlow/Keras, layer for layer as `models_torch`.

Channels-last (NHWC) tensors, HWIO kernels.  Keras' own conventions are
overridden where they differ from PyTorch's:

* padding: explicit symmetric zero padding + ``valid`` convolutions (Keras'
  ``same`` pads asymmetrically for stride 2 on even sizes: 2 + 3 instead of 3 + 3);
  the stem's max-pool pads with zeros, which equals PyTorch's -inf padding
  because its input is a ReLU output (>= 0);
* BatchNorm: `TorchBatchNorm` (epsilon, momentum and the unbiased running
  variance of `conventions`; Keras' BatchNormalization defaults to eps 1e-3,
  momentum 0.99 and a biased running variance);
* VGG's adaptive pool: PyTorch's windows (`conventions.adaptive_pool_bins`),
  then the features are flattened channel-major (as ``torch.flatten`` on NCHW),
  so the canonical dense kernels need only a transpose.

Every weight-carrying layer is named by its PyTorch module path
(``layer1.0.conv1``), so `load_state` maps the canonical names one to one.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")   # as the TF stack (stacks/python_tensorflow/train.py)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from deepgreen_audit.stacks import conventions as conv
from deepgreen_audit.stacks.weights import to_channels_first, to_channels_last

keras = tf.keras
BN_EPSILON = conv.BATCHNORM_EPSILON
BN_DECAY = conv.BATCHNORM_DECAY


class TorchBatchNorm(keras.layers.Layer):
    """BatchNorm with PyTorch's arithmetic (biased variance to normalise, unbiased to track)."""

    def __init__(self, epsilon: float, decay: float, **kwargs):
        super().__init__(**kwargs)
        self.epsilon, self.decay = epsilon, decay

    def build(self, input_shape):
        channels = input_shape[-1]
        self.gamma = self.add_weight(shape=(channels,), initializer="ones", name="weight")
        self.beta = self.add_weight(shape=(channels,), initializer="zeros", name="bias")
        self.moving_mean = self.add_weight(shape=(channels,), initializer="zeros", trainable=False,
                                           name="running_mean")
        self.moving_var = self.add_weight(shape=(channels,), initializer="ones", trainable=False,
                                          name="running_var")

    def call(self, x, training=False):
        if training:
            mean = tf.reduce_mean(x, axis=[0, 1, 2])
            var = tf.reduce_mean(tf.square(x - mean), axis=[0, 1, 2])
            n = tf.cast(tf.size(x) // tf.shape(x)[-1], x.dtype)
            self.moving_mean.assign(self.decay * self.moving_mean + (1 - self.decay) * mean)
            self.moving_var.assign(self.decay * self.moving_var + (1 - self.decay) * var * n / (n - 1))
        else:
            mean, var = self.moving_mean, self.moving_var
        return (x - mean) / tf.sqrt(var + self.epsilon) * self.gamma + self.beta


class AdaptiveAvgPool(keras.layers.Layer):
    """PyTorch's AdaptiveAvgPool2d for a static input size (NHWC)."""

    def __init__(self, side: int, **kwargs):
        super().__init__(**kwargs)
        self.side = side

    def call(self, x):
        rows = []
        for h0, h1 in conv.adaptive_pool_bins(x.shape[1], self.side):
            cols = [tf.reduce_mean(x[:, h0:h1, w0:w1, :], axis=[1, 2])
                    for w0, w1 in conv.adaptive_pool_bins(x.shape[2], self.side)]
            rows.append(tf.stack(cols, axis=1))
        return tf.stack(rows, axis=1)


def _conv(x, filters, kernel, stride, padding, bias, name):
    if padding:
        x = keras.layers.ZeroPadding2D(padding)(x)
    return keras.layers.Conv2D(filters, kernel, stride, padding="valid", use_bias=bias, name=name)(x)


def _bn(x, name):
    return TorchBatchNorm(BN_EPSILON, BN_DECAY, name=name)(x)


def _basic_block(x, cin, cout, stride, path):
    identity = x
    if stride != 1 or cin != cout:
        identity = _bn(_conv(x, cout, 1, stride, 0, False, f"{path}.downsample.0"), f"{path}.downsample.1")
    out = keras.layers.ReLU()(_bn(_conv(x, cout, 3, stride, 1, False, f"{path}.conv1"), f"{path}.bn1"))
    out = _bn(_conv(out, cout, 3, 1, 1, False, f"{path}.conv2"), f"{path}.bn2")
    return keras.layers.ReLU()(keras.layers.Add()([out, identity]))


def resnet18(classes: int, side: int, dropout: float) -> keras.Model:
    inputs = keras.Input((side, side, 3))
    x = keras.layers.ReLU()(_bn(_conv(inputs, 64, 7, 2, 3, False, "conv1"), "bn1"))
    x = keras.layers.MaxPooling2D(3, 2)(keras.layers.ZeroPadding2D(1)(x))
    cin = 64
    for i, (cout, stride) in enumerate(conv.RESNET18_STAGES, 1):
        x = _basic_block(x, cin, cout, stride, f"layer{i}.0")
        x = _basic_block(x, cout, cout, 1, f"layer{i}.1")
        cin = cout
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(classes, name="fc")(x), name="resnet18")


def vgg16(classes: int, side: int, dropout: float) -> keras.Model:
    inputs = keras.Input((side, side, 3))
    x, index = inputs, 0
    for item in conv.VGG16_FEATURES:
        if item == "M":
            x = keras.layers.MaxPooling2D(2, 2)(x)
            index += 1
        else:
            x = keras.layers.ReLU()(_conv(x, item, 3, 1, 1, True, f"features.{index}"))
            index += 2
    x = AdaptiveAvgPool(conv.VGG_POOL_SIDE)(x)
    x = keras.layers.Flatten()(keras.layers.Permute((3, 1, 2))(x))   # channel-major, as torch.flatten
    for i, width in ((0, conv.VGG16_HIDDEN), (3, conv.VGG16_HIDDEN)):
        x = keras.layers.Dropout(dropout)(keras.layers.ReLU()(keras.layers.Dense(width, name=f"classifier.{i}")(x)))
    return keras.Model(inputs, keras.layers.Dense(classes, name="classifier.6")(x), name="vgg16")


ARCHITECTURES = {"resnet18": resnet18, "vgg16": vgg16}


def build(architecture: str, classes: int, side: int = 32, dropout: float = conv.VGG_DROPOUT) -> keras.Model:
    return ARCHITECTURES[architecture](classes, side, dropout)


#: Keras weight name -> canonical suffix, per layer kind (in each layer's weight order).
_SUFFIXES = {keras.layers.Conv2D: ("weight", "bias"), keras.layers.Dense: ("weight", "bias"),
             TorchBatchNorm: ("weight", "bias", "running_mean", "running_var")}


def _named_layers(model):
    for layer in model.layers:
        for kind, suffixes in _SUFFIXES.items():
            if isinstance(layer, kind):
                yield layer, suffixes[:len(layer.weights)]


def state(model: keras.Model) -> dict[str, np.ndarray]:
    """The model's weights under the canonical names, in PyTorch layout."""
    out = {}
    for layer, suffixes in _named_layers(model):
        for suffix, value in zip(suffixes, layer.get_weights()):
            out[f"{layer.name}.{suffix}"] = to_channels_first(value)
    return out


def load_state(model: keras.Model, tensors: dict[str, np.ndarray]) -> None:
    """Set every weight from the canonical tensors; names and shapes must match exactly."""
    names = set(state(model))
    if names != set(tensors):
        raise ValueError(f"weight names differ: missing {sorted(names - set(tensors))[:5]}, "
                         f"unexpected {sorted(set(tensors) - names)[:5]}")
    for layer, suffixes in _named_layers(model):
        layer.set_weights([to_channels_last(tensors[f"{layer.name}.{s}"]) for s in suffixes])
