"""Display names of the tables' normalised labels, for the manuscript.

The labels themselves (and their allowed values) come from the Table
Schemas; this is only how a reader sees them.  A label without a display
name stops the render rather than printing the raw label.
"""

from __future__ import annotations

from deepgreen_audit.analysis import MissingValue
from deepgreen_audit.safe import latex_text

DISPLAY = {
    "python-pytorch": "Python/PyTorch", "python-tensorflow": "Python/TensorFlow",
    "python-jax": "Python/JAX+Flax", "cpp-libtorch": "C++/LibTorch", "java-dl4j": "Java/DL4J",
    "r-torch": "R/torch", "rust-tch": "Rust/tch", "matlab": "MATLAB",
    "resnet18": "ResNet-18", "vgg16": "VGG-16",
    "fashion-mnist": "Fashion-MNIST", "cifar100": "CIFAR-100", "tiny-imagenet": "Tiny ImageNet",
    "imagenette": "Imagenette", "digits": "digits",
    "train": "training", "eval": "evaluation",
    "he": "He", "glorot": "Glorot", "xavier": "Xavier",
}


def display(label: str) -> str:
    """The display name of a label, LaTeX-escaped (C++ is written with a thin-space-free ++)."""
    if label not in DISPLAY:
        raise MissingValue(f"label {label!r} has no display name; add one to "
                           "deepgreen_audit/analysis/labels.py")
    return latex_text(DISPLAY[label])
