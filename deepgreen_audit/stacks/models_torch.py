"""ResNet-18 and VGG-16 in PyTorch, in torchvision's layout and parameter names.

The names (``conv1.weight``, ``layer1.0.bn1.running_mean``, ``features.0.weight``,
``classifier.6.bias``...) are the canonical names of the weight export; the
TensorFlow and Flax definitions map onto them one to one.  Written out here so
that no torchvision is needed; ``scripted(model)`` is the TorchScript module
the LibTorch stacks (C++, Rust) load.

ResNet-18: 7x7/2 stem (padding 3), BatchNorm, ReLU, 3x3/2 max-pool (padding 1),
four stages of two basic blocks (3x3 convolutions, padding 1, no bias; the
first block of stages 2-4 strides 2 and has a 1x1/2 projection with
BatchNorm), global average pool, one linear layer.  VGG-16: thirteen 3x3
convolutions (padding 1, bias, ReLU, no BatchNorm) with five 2x2/2 max-pools,
7x7 adaptive average pool, flatten in channel-major order, classifier
25088-4096-4096-classes with ReLU and dropout 0.5.
"""

from __future__ import annotations

import warnings
from typing import Dict

import numpy as np
import torch
from torch import nn

from deepgreen_audit.stacks import conventions as conv
from deepgreen_audit.trial import CANONICAL_INITIALISER


class LibTorchHooks(nn.Module):
    """Methods the TorchScript export carries for the LibTorch stacks whose bindings list a
    module's parameters but not its buffers or submodules (Rust's tch): they read and set
    the running statistics by name, and switch dropout alone (the parity probe's train-mode
    pass with dropout off)."""

    @torch.jit.export
    def state_buffers(self) -> Dict[str, torch.Tensor]:
        """Every buffer by its full name; the tensors are the module's own (aliases)."""
        out: Dict[str, torch.Tensor] = {}
        for prefix, module in self.named_modules():
            for name, buffer in module.named_buffers():
                out[prefix + "." + name if prefix else name] = buffer
        return out

    @torch.jit.export
    def set_dropout(self, enabled: bool) -> None:
        """Dropout layers in training mode (enabled) or not, the rest of the model untouched."""
        # TorchScript cannot test for a module type the model lacks, so dropout layers are
        # selected by name: `dropout_modules`, their comma-joined names, set by `scripted`.
        # set by `scripted`; nn.Module.__getattr__ types an attribute Tensor | Module
        names = self.dropout_modules.split(",")  # type: ignore[operator]
        for name, module in self.named_modules():
            if name in names:
                module.training = enabled


def batchnorm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=conv.BATCHNORM_EPSILON, momentum=conv.BATCHNORM_TORCH_MOMENTUM)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = batchnorm(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = batchnorm(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), batchnorm(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(LibTorchHooks):
    def __init__(self, classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = batchnorm(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (cout, stride) in enumerate(conv.RESNET18_STAGES, 1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        # layer1..4 are set with setattr: nn.Module.__getattr__ types them Tensor | Module
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # type: ignore[operator]
        return self.fc(torch.flatten(self.avgpool(x), 1))


class VGG16(LibTorchHooks):
    def __init__(self, classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in conv.VGG16_FEATURES:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                assert isinstance(item, int)  # a layer's output channels
                layers += [nn.Conv2d(cin, item, 3, 1, 1), nn.ReLU(inplace=True)]
                cin = item
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(conv.VGG_POOL_SIDE)
        hidden = conv.VGG16_HIDDEN
        self.classifier = nn.Sequential(
            nn.Linear(cin * conv.VGG_POOL_SIDE ** 2, hidden), nn.ReLU(True), nn.Dropout(conv.VGG_DROPOUT),
            nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(conv.VGG_DROPOUT),
            nn.Linear(hidden, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


ARCHITECTURES = {"resnet18": ResNet18, "vgg16": VGG16}


def build(architecture: str, classes: int) -> nn.Module:
    """The architecture with uninitialised (framework-default) weights; load the canonical ones."""
    try:
        return ARCHITECTURES[architecture](classes)
    except KeyError:
        raise ValueError(f"unknown architecture {architecture!r} (known: {', '.join(ARCHITECTURES)})") from None


def canonical_init_(model: nn.Module, generator: torch.Generator) -> None:
    """torchvision's initialisers, drawn from one seeded generator in module order.

    Convolutions: Kaiming normal (fan_out, ReLU gain), bias 0; BatchNorm: weight 1,
    bias 0; ResNet's linear layer: PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for weight and bias; VGG's linear layers: N(0, 0.01), bias 0.
    """
    vgg = isinstance(model, VGG16)
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            if vgg:
                nn.init.normal_(module.weight, 0.0, 0.01, generator=generator)
                nn.init.zeros_(module.bias)
            else:
                bound = module.in_features ** -0.5
                nn.init.uniform_(module.weight, -bound, bound, generator=generator)
                nn.init.uniform_(module.bias, -bound, bound, generator=generator)


def glorot_init_(model: nn.Module, generator: torch.Generator) -> None:
    """Keras's (TensorFlow's) default: Glorot uniform kernels of every convolution and linear
    layer, U(-sqrt(6 / (fan_in + fan_out)), +sqrt(...)), biases 0; BatchNorm weight 1, bias 0."""
    _fan_average_init_(model, generator, nn.init.xavier_uniform_)


def xavier_init_(model: nn.Module, generator: torch.Generator) -> None:
    """DL4J's WeightInit.XAVIER: Xavier normal kernels of every convolution and linear layer,
    N(0, 2 / (fan_in + fan_out)), biases 0; BatchNorm weight 1, bias 0."""
    _fan_average_init_(model, generator, nn.init.xavier_normal_)


def _fan_average_init_(model: nn.Module, generator: torch.Generator, kernel_init) -> None:
    """Kernels drawn by `kernel_init` from one seeded generator in module order, biases 0."""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            kernel_init(module.weight, generator=generator)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


#: The initialisers an export may be drawn with (S1_model.initialisers describes each; "he",
#: torchvision's, is the canonical export's): what frameworks apply under one architecture name.
INITIALISERS = {CANONICAL_INITIALISER: canonical_init_, "glorot": glorot_init_, "xavier": xavier_init_}


def state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The exported state: parameters and running statistics (not num_batches_tracked,
    which no other framework has and which momentum-based updates never read)."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}


def load_state(model: nn.Module, tensors: dict[str, np.ndarray]) -> None:
    """Copy canonical tensors (PyTorch layout already) into the model; names must match exactly."""
    expected = state(model)
    if set(expected) != set(tensors):
        missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
        raise ValueError(f"weight names differ: missing {missing[:5]}, unexpected {extra[:5]}")
    own = model.state_dict()
    with torch.no_grad():
        for name, array in tensors.items():
            if tuple(own[name].shape) != tuple(array.shape):
                raise ValueError(f"{name}: shape {tuple(array.shape)} != {tuple(own[name].shape)}")
            own[name].copy_(torch.from_numpy(np.ascontiguousarray(array)))


def scripted(model: nn.Module) -> torch.jit.ScriptModule:
    """The TorchScript module the LibTorch stacks load (C++ here; Rust/tch likewise).

    TorchScript is what the specification (S1, S6 control group) names and what
    LibTorch's C++ API loads; torch 2.13 marks it deprecated, which is noted, not hidden,
    in stacks/README.md.
    """
    model.dropout_modules = ",".join(  # type: ignore[assignment]  # a TorchScript string attribute
        name for name, m in model.named_modules() if isinstance(m, nn.Dropout))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.*deprecated", category=DeprecationWarning)
        return torch.jit.script(model)
