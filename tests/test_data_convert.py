"""Dataset converters on small files written in the official formats, and their refusals."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deepgreen_audit.cli import main
from deepgreen_audit.errors import OutputExists, UserError
from deepgreen_audit.stacks import data


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def idx_bytes(array: np.ndarray) -> bytes:
    head = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return head + array.astype(np.uint8).tobytes()


def write_fashion_mnist(folder: Path, train: int = 6, test: int = 4) -> list[Path]:
    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    x_train = rng.integers(0, 256, (train, 28, 28), dtype=np.uint8)
    x_train[0] = 77                                   # a constant image stays constant
    files = {"train-images-idx3-ubyte.gz": x_train,
             "train-labels-idx1-ubyte.gz": np.arange(train) % 10,
             "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (test, 28, 28), dtype=np.uint8),
             "t10k-labels-idx1-ubyte.gz": np.arange(test) % 10}
    paths = []
    for name, array in files.items():
        (folder / name).write_bytes(gzip.compress(idx_bytes(np.asarray(array)), mtime=0))
        paths.append(folder / name)
    return paths


def write_cifar100(path: Path) -> np.ndarray:
    rng = np.random.default_rng(2)
    rows = {"train": rng.integers(0, 256, (5, 3072), dtype=np.uint8),
            "test": rng.integers(0, 256, (3, 3072), dtype=np.uint8)}
    with tarfile.open(path, "w:gz") as tar:
        def add(name, obj):
            blob = pickle.dumps(obj)
            info = tarfile.TarInfo(f"cifar-100-python/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
        add("meta", {b"fine_label_names": [f"class{i}".encode() for i in range(100)]})
        for split, x in rows.items():
            add(split, {b"data": x, b"fine_labels": list(range(len(x))), b"coarse_labels": [0] * len(x)})
    return rows["train"]


def jpeg(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def write_tiny_imagenet(path: Path) -> None:
    rng = np.random.default_rng(3)
    wnids = ["n02", "n01"]
    with zipfile.ZipFile(path, "w") as z:
        root = "tiny-imagenet-200/"
        z.writestr(root + "wnids.txt", "\n".join(wnids) + "\n")
        for w in wnids:
            z.writestr(f"{root}train/{w}/{w}_boxes.txt", "")
            for i in range(2):
                z.writestr(f"{root}train/{w}/images/{w}_{i}.JPEG",
                           jpeg(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)))
        z.writestr(root + "val/images/val_0.JPEG", jpeg(rng.integers(0, 256, (64, 64), dtype=np.uint8)))  # grey
        z.writestr(root + "val/images/val_1.JPEG", jpeg(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)))
        z.writestr(root + "val/val_annotations.txt", "val_0.JPEG\tn02\t0\t0\t5\t5\nval_1.JPEG\tn01\t0\t0\t5\t5\n")


def write_imagenette(path: Path) -> None:
    rng = np.random.default_rng(4)
    with tarfile.open(path, "w:gz") as tar:
        for split, n in (("train", 2), ("val", 1)):
            for w in ("n03000684", "n01440764"):
                for i in range(n):
                    blob = jpeg(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8))   # not square
                    info = tarfile.TarInfo(f"imagenette2-320/{split}/{w}/{w}_{i}.JPEG")
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))


def converted(tmp_path, dataset, paths):
    folder = data.convert(dataset, paths, tmp_path / "store", checksums={p.name: md5(p) for p in paths})
    return data.load_store(folder.parent, dataset)


def test_fashion_mnist_idx_gz_to_32x32x3(tmp_path):
    paths = write_fashion_mnist(tmp_path / "raw")
    store = converted(tmp_path, "fashion-mnist", paths)
    assert store.x_train.shape == (6, 32, 32, 3) and store.x_test.shape == (4, 32, 32, 3)
    assert store.x_train.dtype == np.uint8 and store.y_train.tolist() == [0, 1, 2, 3, 4, 5]
    assert (store.x_train[0] == 77).all()                       # bilinear keeps a constant image
    assert (store.x_train[..., 0] == store.x_train[..., 2]).all()   # grey replicated to RGB
    manifest = json.loads((tmp_path / "store" / "fashion-mnist" / "manifest.json").read_text())
    assert manifest["fingerprint_sha256"] == data.fingerprint(store.x_train, store.y_train,
                                                              store.x_test, store.y_test)
    assert "BILINEAR" in manifest["resize"] and {s["file"] for s in manifest["sources"]} == {p.name for p in paths}


def test_cifar100_keeps_its_pixels_in_nhwc(tmp_path):
    rows = write_cifar100(tmp_path / "cifar-100-python.tar.gz")
    store = converted(tmp_path, "cifar100", [tmp_path / "cifar-100-python.tar.gz"])
    assert store.x_train.shape == (5, 32, 32, 3)
    # the official row holds 1024 red, then 1024 green, then 1024 blue values
    assert store.x_train[1, 3, 4].tolist() == [rows[1][3 * 32 + 4], rows[1][1024 + 3 * 32 + 4],
                                               rows[1][2048 + 3 * 32 + 4]]
    assert store.manifest["class_names"][:2] == ["class0", "class1"] and store.y_test.tolist() == [0, 1, 2]


def test_tiny_imagenet_zip_with_val_as_test_and_grey_images(tmp_path):
    path = tmp_path / "tiny-imagenet-200.zip"
    write_tiny_imagenet(path)
    store = converted(tmp_path, "tiny-imagenet", [path])
    assert store.x_train.shape == (4, 32, 32, 3) and store.x_test.shape == (2, 32, 32, 3)
    assert store.manifest["class_names"] == ["n01", "n02"]          # sorted wnids
    assert store.y_train.tolist() == [0, 0, 1, 1] and store.y_test.tolist() == [1, 0]
    grey = store.x_test[0]
    assert (grey[..., 0] == grey[..., 1]).all()


def test_imagenette_tgz_to_224_centre_crop(tmp_path):
    path = tmp_path / "imagenette2-320.tgz"
    write_imagenette(path)
    store = converted(tmp_path, "imagenette", [path])
    assert store.x_train.shape == (4, 224, 224, 3) and store.x_test.shape == (2, 224, 224, 3)
    assert store.side_px == data.side_px("imagenette") == 224 and sorted(store.y_train.tolist()) == [0, 0, 1, 1]


def test_wrong_checksum_is_refused_before_reading(tmp_path):
    paths = write_fashion_mnist(tmp_path / "raw")
    with pytest.raises(UserError) as err:
        data.convert("fashion-mnist", paths, tmp_path / "store")      # the published MD5s
    assert err.value.code == "checksum-mismatch" and err.value.path.endswith("-ubyte.gz")
    assert "published" in err.value.message and not (tmp_path / "store").exists()


@pytest.mark.parametrize("dataset,name,writer", [
    ("cifar100", "cifar-100-python.tar.gz", write_cifar100),
    ("tiny-imagenet", "tiny-imagenet-200.zip", write_tiny_imagenet),
    ("imagenette", "imagenette2.tgz", write_imagenette),
])
def test_corrupt_archive_with_matching_checksum_is_refused_clearly(tmp_path, dataset, name, writer):
    path = tmp_path / name
    writer(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])     # truncated download
    with pytest.raises(UserError) as err:
        data.convert(dataset, [path], tmp_path / "store", checksums={name: md5(path)})
    assert err.value.code == "corrupt-archive" and err.value.path == str(path)
    assert f"official {dataset} format" in err.value.message and not (tmp_path / "store" / dataset).exists()


def test_corrupt_idx_header_is_named(tmp_path):
    paths = write_fashion_mnist(tmp_path / "raw")
    labels = tmp_path / "raw" / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x09" + bytes(4)))   # says 9, holds 4
    with pytest.raises(UserError) as err:
        data.convert("fashion-mnist", paths, tmp_path / "store", checksums={p.name: md5(p) for p in paths})
    assert err.value.code == "corrupt-archive" and "t10k-labels-idx1-ubyte.gz" in err.value.message


def test_unknown_file_and_missing_member_are_named(tmp_path):
    stray = tmp_path / "train-images.gz"
    stray.write_bytes(b"x")
    with pytest.raises(UserError, match="is not a file of fashion-mnist"):
        data.convert("fashion-mnist", [stray], tmp_path / "store")
    paths = write_fashion_mnist(tmp_path / "raw")
    with pytest.raises(UserError, match="t10k-labels-idx1-ubyte.gz"):
        data.convert("fashion-mnist", paths[:3], tmp_path / "store")


def test_cli_refuses_a_wrong_checksum_in_one_line(tmp_path, capsys):
    write_cifar100(tmp_path / "cifar-100-python.tar.gz")
    code = main(["data", "convert", "cifar100", str(tmp_path / "cifar-100-python.tar.gz"),
                 "--out", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 2 and "cifar-100-python.tar.gz" in err and "MD5" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_store_is_not_overwritten_and_a_modified_store_is_refused(tmp_path):
    paths = write_fashion_mnist(tmp_path / "raw")
    sums = {p.name: md5(p) for p in paths}
    folder = data.convert("fashion-mnist", paths, tmp_path / "store", checksums=sums)
    with pytest.raises(OutputExists):
        data.convert("fashion-mnist", paths, tmp_path / "store", checksums=sums)
    with np.load(folder / "test.npz") as npz:
        x, y = npz["x"].copy(), npz["y"]
    x[0, 0, 0, 0] ^= 1
    np.savez(folder / "test.npz", x=x, y=y)
    with pytest.raises(UserError) as err:
        data.load_store(folder.parent, "fashion-mnist")
    assert err.value.code == "corrupt-store" and "modified" in err.value.message


def test_digits_go_through_the_converter_path(tmp_path):
    in_memory = data.ensure_store(tmp_path, "digits")
    assert not (tmp_path / "digits").exists()                     # deriving writes nothing
    folder = data.convert("digits", [], tmp_path)
    on_disk = data.load_store(tmp_path, "digits")
    assert folder == tmp_path / "digits" and on_disk.fingerprint == in_memory.fingerprint
    assert on_disk.x_train.shape == (1437, 32, 32, 3) and on_disk.x_test.shape == (360, 32, 32, 3)
    assert sorted(np.bincount(on_disk.y_test).tolist())[0] >= 35   # stratified split
    assert on_disk.manifest["sources"][0]["version"].startswith("scikit-learn")
