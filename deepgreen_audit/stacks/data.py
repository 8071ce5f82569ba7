"""The canonical data store: official archives converted once, offline, to uint8 pixels.

Users download the archives themselves; `convert` takes their paths, checks
each file's published MD5 (the checksum the publishers give) before reading
it, and refuses a wrong or corrupt file with a `UserError` naming it.  The
store, one folder per dataset::

    <data_dir>/<dataset>/train.npz     x: uint8 N x S x S x 3 (NHWC), y: int64
    <data_dir>/<dataset>/test.npz
    <data_dir>/<dataset>/manifest.json  sources and their checksums, filter, counts, fingerprint

S is the specification's ``S3_data.input_resolution_px`` (32), or
``S3_data.contrast_cell.input_resolution_px`` for the contrast cell (Imagenette).  Every image is resized
once, here, with `RESIZE_FILTER` (Pillow's bilinear filter, which widens its
support when downscaling, i.e. it antialiases); a non-square image is first
scaled so its shorter side is S, then centre-cropped.  Grey images are
replicated to three channels.  The test split is the official one (Tiny
ImageNet's "val", Imagenette's "val").

The fingerprint a run records (``data_fingerprint_sha256``) is the SHA-256 of
train x, train y, test x, test y, in that order, as raw bytes (x uint8 C-order
NHWC, y little-endian int64); every stack computes it from the pixels it
actually read.

scikit-learn's bundled digits (8x8, 0..16) go through the same path
(`convert_digits`: scaled to 0..255, resized, a fixed stratified 80/20 split)
and are the smoke set on machines without the archives.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np

from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.package import atomic
from deepgreen_audit.package.checksums import sha256_bytes, sha256_chunks, sha256_file
from deepgreen_audit.spec import load_spec

FORMAT = "deepgreen-data-store/1"
RESIZE_FILTER = "PIL.Image.Resampling.BILINEAR"
SPLITS = ("train", "test")

#: The publishers' MD5 checksums of the official files (the Fashion-MNIST README,
#: the CIFAR page, the Tiny ImageNet distribution, fast.ai's Imagenette as listed by torchvision).
PUBLISHED_MD5 = {
    "fashion-mnist": {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    },
    "cifar100": {"cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"},
    "tiny-imagenet": {"tiny-imagenet-200.zip": "90528d7ca1a48142e341f4ef8d21d0de"},
    "imagenette": {
        "imagenette2.tgz": "fe2fc210e6bb7c5664d602c3cd71e612",
        "imagenette2-320.tgz": "3df6f0d01a2c9592104656642f5e78a3",
        "imagenette2-160.tgz": "e793b78cc4c9e9a4ccc0c1155377a412",
    },
}
CONVERTIBLE = (*PUBLISHED_MD5, "digits")


def side_px(dataset: str) -> int:
    """The side a dataset is stored at: the contrast cell's (S3_data.contrast_cell) for its
    dataset, the specification's input resolution for every other."""
    s3 = load_spec()["S3_data"]
    contrast = s3["contrast_cell"]
    return int(contrast["input_resolution_px"] if dataset == contrast["dataset"]
               else s3["input_resolution_px"])


# ---------------------------------------------------------------- pixels


def resize_one(image: np.ndarray, side: int) -> np.ndarray:
    """One uint8 image (H x W or H x W x 3) -> side x side x 3, with the documented filter."""
    from PIL import Image

    pil = Image.fromarray(image)
    pil = pil.convert("RGB") if pil.mode != "RGB" else pil
    w, h = pil.size
    if (w, h) != (side, side):
        scale = side / min(w, h)
        size = (max(side, round(w * scale)), max(side, round(h * scale)))
        pil = pil.resize(size, Image.Resampling.BILINEAR)
        left, top = (size[0] - side) // 2, (size[1] - side) // 2
        pil = pil.crop((left, top, left + side, top + side))
    return np.asarray(pil, dtype=np.uint8)


def resize_all(images, side: int) -> np.ndarray:
    out = np.empty((len(images), side, side, 3), dtype=np.uint8)
    for i, image in enumerate(images):
        out[i] = resize_one(image, side)
    return out


def fingerprint(x_train, y_train, x_test, y_test) -> str:
    """SHA-256 over the pixels and labels (see the module docstring for the byte order)."""
    return sha256_chunks(chunk for x, y in ((x_train, y_train), (x_test, y_test))
                         for chunk in (np.ascontiguousarray(x, dtype=np.uint8).tobytes(),
                                       np.ascontiguousarray(y, dtype="<i8").tobytes()))


# ---------------------------------------------------------------- checksums


def _digests(path: Path) -> tuple[str, str]:
    """The file's MD5 (what the datasets publish) and its SHA-256 (what the manifest records)."""
    with open(path, "rb") as fh:
        md5 = hashlib.file_digest(fh, "md5").hexdigest()
    return md5, sha256_file(path)


def check_inputs(dataset: str, paths: list[Path], checksums: dict[str, str] | None) -> list[dict]:
    """Match the given files to the dataset's official names and check their MD5s."""
    expected = dict(checksums if checksums is not None else PUBLISHED_MD5[dataset])
    by_name = {}
    for path in map(Path, paths):
        if path.name not in PUBLISHED_MD5[dataset]:
            raise UserError(f"is not a file of {dataset} (expected one of: "
                            f"{', '.join(PUBLISHED_MD5[dataset])})", path=path, code="unknown-file")
        if not path.is_file():
            raise UserError("no such file", path=path, code="missing-input")
        by_name[path.name] = path
    needed = list(PUBLISHED_MD5[dataset]) if dataset == "fashion-mnist" else []
    missing = [n for n in needed if n not in by_name]
    if missing or not by_name:
        raise UserError(f"{dataset} needs the file(s) {', '.join(missing or PUBLISHED_MD5[dataset])}",
                        code="missing-input")
    if dataset != "fashion-mnist" and len(by_name) != 1:
        raise UserError(f"{dataset} is converted from one archive, got {len(by_name)}", code="missing-input")
    sources = []
    for name, path in sorted(by_name.items()):
        md5, sha = _digests(path)
        if md5 != expected.get(name):
            raise UserError(f"MD5 {md5} is not the published {expected.get(name)}: a wrong, truncated "
                            "or modified download; download it again", path=path, code="checksum-mismatch")
        sources.append({"file": name, "bytes": path.stat().st_size, "md5": md5, "sha256": sha,
                        "path": path})
    return sources


class _Corrupt(Exception):
    """An archive that passed its checksum but cannot be read as its format."""


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    """The bytes of a regular file of the archive (a link or a folder of that name is corrupt)."""
    fileobj = tar.extractfile(member)
    if fileobj is None:
        raise _Corrupt(f"{member.name} is not a regular file")
    return fileobj


# ---------------------------------------------------------------- readers


def read_idx(data: bytes, dims: int) -> np.ndarray:
    """An IDX array (big-endian header: 0, 0, type 0x08 = uint8, number of dimensions)."""
    if len(data) < 4 + 4 * dims or data[:4] != bytes([0, 0, 8, dims]):
        raise _Corrupt(f"not an IDX uint8 file with {dims} dimension(s) (magic {data[:4].hex()})")
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    body = data[4 + 4 * dims:]
    if len(body) != int(np.prod(shape)):
        raise _Corrupt(f"IDX header says {shape} but holds {len(body)} bytes")
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def read_fashion_mnist(files: dict[str, Path]):
    def idx(name, dims):
        try:
            return read_idx(gzip.decompress(files[name].read_bytes()), dims)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise _Corrupt(f"{name}: {exc}") from None
        except _Corrupt as exc:
            raise _Corrupt(f"{name}: {exc}") from None

    parts = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x, y = idx(f"{prefix}-images-idx3-ubyte.gz", 3), idx(f"{prefix}-labels-idx1-ubyte.gz", 1)
        if len(x) != len(y):
            raise _Corrupt(f"{prefix}: {len(x)} images but {len(y)} labels")
        parts[split] = (x, y.astype(np.int64))
    return parts, [str(i) for i in range(10)]


def read_cifar100(archive: Path):
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = {m.name: m for m in tar.getmembers()}

            def batch(name):
                member = members.get(f"cifar-100-python/{name}")
                if member is None:
                    raise _Corrupt(f"cifar-100-python/{name} is not in the archive")
                return pickle.load(_extract(tar, member), encoding="bytes")

            meta = batch("meta")
            parts = {}
            for split in SPLITS:
                d = batch(split)
                x = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
                parts[split] = (x, np.asarray(d[b"fine_labels"], dtype=np.int64))
            names = [n.decode() for n in meta[b"fine_label_names"]]
    except (tarfile.TarError, OSError, EOFError, pickle.UnpicklingError, KeyError, ValueError) as exc:
        raise _Corrupt(f"{type(exc).__name__}: {exc}") from None
    return parts, names


def _decode(data: bytes, what: str) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise _Corrupt(f"{what}: {exc}") from None


def read_tiny_imagenet(archive: Path, side: int):
    """train/<wnid>/images/*.JPEG; the official "val" split (val_annotations.txt) is the test set."""
    try:
        with zipfile.ZipFile(archive) as z:
            root = "tiny-imagenet-200/"
            wnids = sorted(z.read(root + "wnids.txt").decode().split())
            index = {w: i for i, w in enumerate(wnids)}
            names = sorted(n for n in z.namelist() if n.startswith(root + "train/") and n.endswith(".JPEG"))
            train = [(n, index[PurePosixPath(n).parts[2]]) for n in names]
            val = []
            for line in z.read(root + "val/val_annotations.txt").decode().splitlines():
                if line.strip():
                    file, wnid = line.split("\t")[:2]
                    val.append((f"{root}val/images/{file}", index[wnid]))
            val.sort()
            parts = {split: (resize_all([_decode(z.read(n), n) for n, _ in items], side),
                             np.asarray([label for _, label in items], dtype=np.int64))
                     for split, items in (("train", train), ("test", val))}
    except (zipfile.BadZipFile, OSError, KeyError, ValueError, EOFError) as exc:
        raise _Corrupt(f"{type(exc).__name__}: {exc}") from None
    return parts, wnids


def read_imagenette(archive: Path, side: int):
    """<root>/{train,val}/<wnid>/*.JPEG; classes in sorted wnid order; "val" is the test set."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            items: dict[str, list[tuple[str, str, tarfile.TarInfo]]] = {"train": [], "val": []}
            for m in tar.getmembers():
                parts = PurePosixPath(m.name).parts
                if m.isfile() and len(parts) == 4 and parts[1] in items and parts[3].upper().endswith(".JPEG"):
                    items[parts[1]].append((m.name, parts[2], m))
            wnids = sorted({w for split in items.values() for _, w, _ in split})
            index = {w: i for i, w in enumerate(wnids)}
            out = {}
            for split, key in (("train", "train"), ("test", "val")):
                chosen = sorted(items[key], key=lambda t: t[0])
                x = resize_all([_decode(_extract(tar, m).read(), n) for n, _, m in chosen], side)
                out[split] = (x, np.asarray([index[w] for _, w, _ in chosen], dtype=np.int64))
    except (tarfile.TarError, OSError, EOFError, KeyError) as exc:
        raise _Corrupt(f"{type(exc).__name__}: {exc}") from None
    return out, wnids


# ---------------------------------------------------------------- the store


@dataclass(frozen=True)
class Store:
    dataset: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    fingerprint: str
    manifest: dict

    @property
    def side_px(self) -> int:
        return int(self.x_train.shape[1])


def _npz_bytes(x: np.ndarray, y: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ascontiguousarray(x, dtype=np.uint8), y=np.ascontiguousarray(y, dtype="<i8"))
    return buffer.getvalue()


def store_manifest(dataset: str, parts: dict, class_names: list[str], sources: list[dict]) -> dict:
    """The manifest of a store (checks the labels against the specification's classes)."""
    from PIL import __version__ as pillow_version

    classes = int(load_spec()["S3_data"]["classes"][dataset])
    for split in SPLITS:
        x, y = parts[split]
        if len(x) == 0 or len(x) != len(y):
            raise UserError(f"{split}: {len(x)} images and {len(y)} labels", code="corrupt-archive")
        if y.min() < 0 or y.max() >= classes:
            raise UserError(f"{split}: labels outside 0..{classes - 1} (the specification's {classes} "
                            f"classes of {dataset})", code="corrupt-archive")
    manifest = {
        "format": FORMAT, "dataset": dataset, "side_px": int(parts["train"][0].shape[1]), "channels": 3,
        "classes": classes, "class_names": class_names,
        "samples": {split: int(len(parts[split][1])) for split in SPLITS},
        "resize": f"{RESIZE_FILTER} (Pillow {pillow_version}; antialiased when downscaling); "
                  "shorter side to the target, centre crop; grey replicated to RGB",
        "fingerprint_sha256": fingerprint(*parts["train"], *parts["test"]),
        "fingerprint_definition": "sha256(train.x uint8 NHWC, train.y <i8, test.x, test.y)",
        "sources": [{k: v for k, v in s.items() if k != "path"} for s in sources],
    }
    return manifest


def write_store(out: Path, dataset: str, parts: dict, class_names: list[str], sources: list[dict],
                overwrite: bool = False) -> Path:
    """Write <out>/<dataset>/ atomically (the whole folder appears at once)."""
    manifest = store_manifest(dataset, parts, class_names, sources)
    with atomic.StagedDirectory(Path(out) / dataset, overwrite=overwrite) as staged:
        for split in SPLITS:
            (staged.path / f"{split}.npz").write_bytes(_npz_bytes(*parts[split]))
        (staged.path / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return Path(out) / dataset


def convert(dataset: str, paths: list[Path], out: Path, checksums: dict[str, str] | None = None,
            overwrite: bool = False) -> Path:
    """Official archive(s) -> <out>/<dataset>/; `checksums` replaces the published MD5s (mirrors, tests)."""
    if dataset == "digits":
        return convert_digits(out, overwrite=overwrite)
    if dataset not in PUBLISHED_MD5:
        refuse_unknown([dataset], list(CONVERTIBLE), "a dataset with a converter",
                       code="unknown-dataset")
    atomic.check_output(Path(out) / dataset, overwrite)
    sources = check_inputs(dataset, paths, checksums)
    files = {s["file"]: s["path"] for s in sources}
    side = side_px(dataset)
    try:
        if dataset == "fashion-mnist":
            raw, names = read_fashion_mnist(files)
            parts = {split: (resize_all(x, side), y) for split, (x, y) in raw.items()}
        elif dataset == "cifar100":
            raw, names = read_cifar100(next(iter(files.values())))
            parts = {split: (resize_all(x, side) if x.shape[1] != side else x, y) for split, (x, y) in raw.items()}
        elif dataset == "tiny-imagenet":
            parts, names = read_tiny_imagenet(next(iter(files.values())), side)
        else:
            parts, names = read_imagenette(next(iter(files.values())), side)
    except _Corrupt as exc:
        raise UserError(f"cannot be read as the official {dataset} format: {exc}",
                        path=sources[0]["path"] if len(sources) == 1 else sources[0]["path"].parent,
                        code="corrupt-archive") from None
    if checksums is None and dataset in load_spec()["S3_data"].get("train_samples", {}):
        for split, key in (("train", "train_samples"), ("test", "eval_samples")):
            want = int(load_spec()["S3_data"][key][dataset])
            if len(parts[split][1]) != want:
                raise UserError(f"{split} has {len(parts[split][1])} images, the specification "
                                f"{want}", path=sources[0]["path"], code="corrupt-archive")
    return write_store(out, dataset, parts, names, sources, overwrite=overwrite)


def digits_parts() -> tuple[dict, list[str], list[dict]]:
    """scikit-learn's digits through the converter path: 0..16 -> 0..255, resized, 80/20 stratified."""
    import sklearn
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.rint(digits.images * (255 / 16)).astype(np.uint8)
    images = resize_all(pixels, side_px("digits"))
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(images, labels, test_size=0.2, random_state=0,
                                                        stratify=labels)
    source = {"file": "sklearn.datasets.load_digits", "bytes": int(digits.images.nbytes),
              "md5": hashlib.md5(digits.images.tobytes()).hexdigest(),
              "sha256": sha256_bytes(digits.images.tobytes()),
              "version": f"scikit-learn {sklearn.__version__}"}
    return {"train": (x_train, y_train), "test": (x_test, y_test)}, [str(i) for i in range(10)], [source]


def convert_digits(out: Path, overwrite: bool = False) -> Path:
    parts, names, sources = digits_parts()
    return write_store(out, "digits", parts, names, sources, overwrite=overwrite)


def load_store(data_dir: Path, dataset: str) -> Store:
    """Read <data_dir>/<dataset>/ and check its fingerprint against its manifest."""
    folder = Path(data_dir) / dataset
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        arrays = []
        for split in SPLITS:
            with np.load(folder / f"{split}.npz") as npz:
                arrays += [npz["x"], npz["y"].astype(np.int64)]
    except FileNotFoundError as exc:
        raise UserError(f"the dataset store is incomplete ({Path(exc.filename).name} missing); convert it "
                        f"with 'deepgreen data convert {dataset} ...'", path=folder, code="missing-input") from None
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
        raise UserError(f"the dataset store is unreadable: {exc}", path=folder, code="corrupt-store") from None
    actual = fingerprint(*arrays)
    if actual != manifest.get("fingerprint_sha256"):
        raise UserError(f"pixels and labels have fingerprint {actual}, the manifest says "
                        f"{manifest.get('fingerprint_sha256')}: the store was modified", path=folder,
                        code="corrupt-store")
    x_train, y_train, x_test, y_test = arrays
    return Store(dataset, x_train, y_train, x_test, y_test, fingerprint=actual, manifest=manifest)


def ensure_store(data_dir: Path, dataset: str) -> Store:
    """The run's store; the digits smoke set, when not converted, is converted in memory
    (same pixels, same fingerprint, nothing written); other datasets must be converted."""
    if dataset == "digits" and not (Path(data_dir) / dataset / "manifest.json").is_file():
        parts, names, sources = digits_parts()
        manifest = store_manifest(dataset, parts, names, sources)
        (x_train, y_train), (x_test, y_test) = parts["train"], parts["test"]
        return Store(dataset, x_train, y_train, x_test, y_test,
                     fingerprint=manifest["fingerprint_sha256"], manifest=manifest)
    return load_store(data_dir, dataset)


def unit_interval(x_uint8: np.ndarray) -> np.ndarray:
    """The specification's input scaling: float32 pixel / 255, no mean/std normalisation."""
    return x_uint8.astype(np.float32) / np.float32(255.0)
