"""The canonical initial weights: one seeded export per (architecture, classes, seed).

Format: a safetensors file (framework-neutral: a JSON header and raw
little-endian float32 tensors) in PyTorch's layout and names, with a
manifest beside it (``<stem>.manifest.json``: names, shapes, dtypes, the
SHA-256 of every tensor and of the file, the parameter count, the
initialisers).  The SHA-256 of the safetensors file is what a run records as
``initial_weights_sha256``.  The export is drawn once, by
`models_torch.canonical_init_` from a seeded generator; every stack loads
it (TensorFlow and Flax through `to_channels_last`), none re-initialises.

The initialiser trial (collect/initialiser-trial.toml) draws the same way from
another initialiser (`models_torch.INITIALISERS`: "glorot", "xavier"): its
export is named ``<stem>-<initialiser>`` and its safetensors metadata and
manifest name the initialiser, so its hash is its own; "he" is the canonical
export itself (same file, same hash).

Layout: convolution kernels OIHW (PyTorch) -> HWIO (TensorFlow, Flax); dense
kernels [out, in] -> [in, out]; vectors unchanged.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic
from deepgreen_audit.package.checksums import sha256_bytes, sha256_file
from deepgreen_audit.trial import CANONICAL_INITIALISER

FORMAT = "deepgreen-initial-weights/1"
#: Every tensor of an export is float32, little-endian (its TorchScript module holds the same).
TENSOR_DTYPE = "<f4"




def export_stem(architecture: str, classes: int, seed: int,
                initialiser: str = CANONICAL_INITIALISER) -> str:
    stem = f"{architecture}-c{classes}-s{seed}"
    return stem if initialiser == CANONICAL_INITIALISER else f"{stem}-{initialiser}"


def weights_dir(data_dir: Path) -> Path:
    """Where a plan's exports live: <data_dir>/weights/."""
    return Path(data_dir) / "weights"


@dataclass(frozen=True)
class Export:
    path: Path            # the .safetensors file
    manifest_path: Path
    sha256: str           # of the safetensors file
    torchscript_path: Path

    @classmethod
    def at(cls, directory: Path, architecture: str, classes: int, seed: int,
           initialiser: str = CANONICAL_INITIALISER) -> Export:
        stem = Path(directory) / export_stem(architecture, classes, seed, initialiser)
        path = stem.with_suffix(".safetensors")
        return cls(path, stem.with_suffix(".manifest.json"), "", stem.with_suffix(".torchscript.pt"))


def canonical_tensors(architecture: str, classes: int, seed: int,
                      initialiser: str = CANONICAL_INITIALISER) -> dict[str, np.ndarray]:
    """Draw the initial state (PyTorch layout) from `seed` with `initialiser` (default: the
    canonical one)."""
    import torch

    from deepgreen_audit.stacks import models_torch

    if initialiser not in models_torch.INITIALISERS:
        raise UserError(f"no initialiser {initialiser!r} (known: "
                        f"{', '.join(models_torch.INITIALISERS)})", code="bad-weights")
    model = models_torch.build(architecture, classes)
    models_torch.INITIALISERS[initialiser](model, torch.Generator().manual_seed(int(seed)))
    return {k: v.numpy() for k, v in models_torch.state(model).items()}


def manifest_for(tensors: dict[str, np.ndarray], architecture: str, classes: int, seed: int,
                 file_sha256: str, initialiser: str = CANONICAL_INITIALISER) -> dict:
    from deepgreen_audit.stacks.models_torch import INITIALISERS

    trainable = sum(a.size for k, a in tensors.items() if not k.endswith(("running_mean", "running_var")))
    return {
        "format": FORMAT, "architecture": architecture, "classes": classes, "seed": seed,
        "layout": "PyTorch: conv OIHW, dense [out, in]; names as torchvision",
        "initialiser": initialiser,
        "initialisers": " ".join((INITIALISERS[initialiser].__doc__ or "").split()),
        "file_sha256": file_sha256, "trainable_parameters": int(trainable),
        "tensors": [{"name": k, "dtype": str(a.dtype), "shape": list(a.shape),
                     "sha256": sha256_bytes(np.ascontiguousarray(a).tobytes())}
                    for k, a in sorted(tensors.items())],
    }


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """The safetensors encoding with a deterministic header (sorted names, no whitespace),
    so that one (architecture, classes, seed) always gives the same file hash; the
    `safetensors` library's own writer orders its header from a hash map."""
    header: dict[str, object] = {"__metadata__": dict(sorted(metadata.items()))}
    offset, parts = 0, []
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype=TENSOR_DTYPE).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        parts.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(parts)


def canonical_export_bytes(architecture: str, classes: int, seed: int,
                           initialiser: str = CANONICAL_INITIALISER) -> tuple[dict[str, np.ndarray], bytes]:
    """The tensors and the exact bytes of their safetensors file (the canonical export's
    metadata names no initialiser, so its bytes and hash are those it always had)."""
    tensors = canonical_tensors(architecture, classes, seed, initialiser)
    metadata = {"format": FORMAT, "architecture": architecture, "classes": str(classes),
                "seed": str(seed)}
    if initialiser != CANONICAL_INITIALISER:
        metadata["initialiser"] = initialiser
    return tensors, safetensors_bytes(tensors, metadata=metadata)


def export(directory: Path, architecture: str, classes: int, seed: int, torchscript: bool = True,
           initialiser: str = CANONICAL_INITIALISER) -> Export:
    """Write the export (and, for the LibTorch stacks, its TorchScript module); idempotent."""
    target = Export.at(directory, architecture, classes, seed, initialiser)
    if target.path.is_file() and target.manifest_path.is_file() \
            and (target.torchscript_path.is_file() or not torchscript):
        return verified(target.path)
    tensors, blob = canonical_export_bytes(architecture, classes, seed, initialiser)
    file_sha = sha256_bytes(blob)
    manifest = manifest_for(tensors, architecture, classes, seed, file_sha, initialiser)
    Path(directory).mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(target.path, blob)
    atomic.write_text(target.manifest_path, json.dumps(manifest, indent=1) + "\n")
    if torchscript:
        write_torchscript(target.torchscript_path, architecture, classes, tensors)
    return verified(target.path)


def write_torchscript(path: Path, architecture: str, classes: int, tensors: dict[str, np.ndarray]) -> None:
    """The TorchScript module of the PyTorch model holding the canonical weights."""
    import io

    import torch

    from deepgreen_audit.stacks import models_torch

    model = models_torch.build(architecture, classes)
    models_torch.load_state(model, tensors)
    buffer = io.BytesIO()
    with warnings.catch_warnings():   # deprecated in torch 2.13, still LibTorch's format (models_torch.scripted)
        warnings.filterwarnings("ignore", message=".*torch.jit.*deprecated", category=DeprecationWarning)
        torch.jit.save(models_torch.scripted(model), buffer)
    atomic.write_bytes(path, buffer.getvalue())


def verified(path: Path) -> Export:
    """Check a file against its manifest (file hash, names, shapes); returns the Export."""
    path = Path(path)
    manifest_path = path.with_suffix(".manifest.json")
    if not path.is_file():
        raise UserError("the canonical weight export is missing (write it with "
                        "'deepgreen data weights')", path=path, code="missing-input")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"the export's manifest is unreadable: {exc}", path=manifest_path,
                        code="bad-weights") from None
    actual = sha256_file(path)
    if actual != manifest.get("file_sha256"):
        raise UserError(f"SHA-256 {actual} does not match the manifest's {manifest.get('file_sha256')}",
                        path=path, code="bad-weights")
    return Export(path, manifest_path, actual, path.with_suffix(".torchscript.pt"))


def read_safetensors(blob: bytes, path: Path | None = None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors and metadata of a safetensors file (F32 and I64 only, which is all the stacks write)."""
    dtypes = {"F32": "<f4", "I64": "<i8"}
    try:
        size = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8:8 + size])
        body = memoryview(blob)[8 + size:]
        tensors = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            if info["dtype"] not in dtypes or end > len(body):
                raise ValueError(f"{name}: dtype {info['dtype']} or offsets {begin}..{end} not readable")
            tensors[name] = np.frombuffer(body[begin:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"]).copy()
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"is not a readable safetensors file: {exc}", path=path, code="bad-weights") from None
    return tensors, header.get("__metadata__", {})


def load(path: Path) -> tuple[dict[str, np.ndarray], str]:
    """The canonical tensors (PyTorch layout) and the file's SHA-256, after verification."""
    exp = verified(path)
    tensors, _ = read_safetensors(exp.path.read_bytes(), exp.path)
    manifest = json.loads(exp.manifest_path.read_text(encoding="utf-8"))
    listed = {t["name"]: tuple(t["shape"]) for t in manifest["tensors"]}
    if listed != {k: tuple(v.shape) for k, v in tensors.items()}:
        raise UserError("tensor names or shapes differ from the manifest", path=exp.path, code="bad-weights")
    return tensors, exp.sha256


def ensure(data_dir: Path, architecture: str, classes: int, seed: int,
           initialiser: str = CANONICAL_INITIALISER) -> tuple[dict[str, np.ndarray], str]:
    """The run's export: read from <data_dir>/weights/ when prepared, else drawn in memory
    (the same bytes `export` would write, so the same SHA-256; nothing is written)."""
    exp = Export.at(weights_dir(data_dir), architecture, classes, seed, initialiser)
    if exp.path.is_file():
        return load(exp.path)
    tensors, blob = canonical_export_bytes(architecture, classes, seed, initialiser)
    return tensors, sha256_bytes(blob)


def to_channels_last(array: np.ndarray) -> np.ndarray:
    """PyTorch layout -> TensorFlow/Flax layout: OIHW -> HWIO, [out, in] -> [in, out]."""
    return _transposed(array, (2, 3, 1, 0))


def to_channels_first(array: np.ndarray) -> np.ndarray:
    """The inverse of `to_channels_last`."""
    return _transposed(array, (3, 2, 0, 1))


def _transposed(array: np.ndarray, kernel_axes: tuple[int, ...]) -> np.ndarray:
    """A convolution kernel with its axes in `kernel_axes` order, a dense matrix transposed,
    anything else (biases, BatchNorm vectors) as it is."""
    if array.ndim == 4:
        return np.ascontiguousarray(array.transpose(kernel_axes))
    if array.ndim == 2:
        return np.ascontiguousarray(array.T)
    return array
