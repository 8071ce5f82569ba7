"""The Python/PyTorch stack: one run of one configuration under the DeepGreen harness.

The runner (deepgreen_audit.collect.runner) imports this program and calls
`check(job)` then `run(harness, job)`; `sync()` is the device-synchronisation
hook the harness calls before every counter read.  The recipe comes from the
job (itself from collect/experiment.toml): Adam, constant learning rate, no
weight decay, inputs scaled to [0,1] without mean/std normalisation, the
spec's loader workers and batch sizes, TF32 off.

Datasets: `digits` (scikit-learn's bundled 8x8 digits, written as 32x32x3
uint8 images: values 0..16 scaled to 0..255, each pixel repeated 4x4, grey
replicated to three channels; a fixed stratified 80/20 split) is the smoke set
and needs no download.  The campaign's datasets are read from
<data_dir>/<dataset>/{train,test}.npz (arrays x: uint8 N x 32 x 32 x 3, y:
int64), written once, offline, by the dataset preparation step.

The network is ResNet-18 in torchvision's layout (7x7 stem, max-pool, four
stages of two basic blocks, 64..512 channels), written out here so that no
torchvision is needed.  The canonical seeded weight export shared by all
stacks is not part of this stack yet: weights are initialised from the run's
seed and their SHA256 is reported as what the run actually loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PRECISION_POLICY = "fp32-tf32-off"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync() -> None:
    """Wait for queued device work, so a block's window closes over finished work."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------ data


def digits_32x32x3() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 32x32x3 images and a fixed stratified split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.rint(digits.images * (255 / 16)).astype(np.uint8)          # N x 8 x 8
    pixels = pixels.repeat(4, axis=1).repeat(4, axis=2)                     # N x 32 x 32
    images = np.repeat(pixels[..., None], 3, axis=3)                         # N x 32 x 32 x 3
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=0, stratify=labels)
    return x_train, y_train, x_test, y_test


def load_data(job):
    if job.dataset == "digits":
        return digits_32x32x3()
    base = Path(job.data_dir) / job.dataset
    parts = []
    for split in ("train", "test"):
        with np.load(base / f"{split}.npz") as data:
            parts += [data["x"], data["y"].astype(np.int64)]
    return tuple(parts)


def fingerprint(*arrays: np.ndarray) -> str:
    digest = hashlib.sha256()
    for a in arrays:
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()


def to_tensors(x: np.ndarray, y: np.ndarray) -> TensorDataset:
    """uint8 NHWC -> float NCHW in [0, 1] (divided by 255; no mean/std normalisation)."""
    return TensorDataset(torch.from_numpy(x).permute(0, 3, 1, 2).float().div_(255.0),
                         torch.from_numpy(y))


# ------------------------------------------------------------------ model


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


ARCHITECTURES = {"resnet18": ResNet18}


def weights_sha256(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# ------------------------------------------------------------------ the run


def check(job) -> None:
    """Raise, naming what is missing, unless this job can run."""
    if job.architecture not in ARCHITECTURES:
        raise RuntimeError(f"architecture {job.architecture!r} is not implemented by this stack "
                           f"(has: {', '.join(ARCHITECTURES)})")
    if job.dataset != "digits":
        for split in ("train", "test"):
            path = Path(job.data_dir) / job.dataset / f"{split}.npz"
            if not path.is_file():
                raise FileNotFoundError(f"dataset file {path} is missing; prepare the dataset first")


def _batches(loader, limit):
    for i, batch in enumerate(loader):
        if limit is not None and i >= limit:
            return
        yield batch


def run(harness, job) -> None:
    r = job.recipe
    torch.manual_seed(job.seed)
    np.random.seed(job.seed % 2**32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x_train, y_train, x_test, y_test = load_data(job)
    if r["optimizer"] != "adam" or r["lr_schedule"] != "none" or r["input_normalisation"] != "none" \
            or r["input_scaling"] != "unit-interval" or r["precision_policy"] != PRECISION_POLICY:
        raise RuntimeError(f"this stack implements the specification's recipe only, not {r}")
    model = ARCHITECTURES[job.architecture](job.classes).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=r["learning_rate"], weight_decay=r["weight_decay"])
    generator = torch.Generator().manual_seed(job.seed)
    train = DataLoader(to_tensors(x_train, y_train), batch_size=r["batch_size"], shuffle=True,
                       num_workers=r["loader_workers"], generator=generator)
    test = DataLoader(to_tensors(x_test, y_test), batch_size=r["eval_batch_size"], shuffle=False,
                      num_workers=r["loader_workers"])
    harness.report(**{k: r[k] for k in ("optimizer", "learning_rate", "batch_size", "lr_schedule",
                                        "weight_decay", "input_scaling", "input_normalisation",
                                        "loader_workers", "eval_batch_size", "precision_policy")},
                   input_resolution_px=int(x_train.shape[1]),
                   initial_weights_sha256=weights_sha256(model),
                   data_fingerprint_sha256=fingerprint(x_train, y_train, x_test, y_test),
                   framework="torch", framework_version=torch.__version__,
                   **({"cuda_version": torch.version.cuda} if DEVICE.type == "cuda" else {}))
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, job.epochs + 1):
        with harness.block(epoch, "train") as block:
            model.train()
            seen, total = 0, 0.0
            for x, y in _batches(train, job.max_train_batches):
                x, y = x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                total += loss.item() * len(y)
                seen += len(y)
            block.samples_processed, block.loss = seen, total / seen
        with harness.block(epoch, "eval") as block:
            model.eval()
            seen, total, correct = 0, 0.0, 0
            with torch.no_grad():
                for x, y in _batches(test, job.max_eval_batches):
                    x, y = x.to(DEVICE), y.to(DEVICE)
                    out = model(x)
                    total += loss_fn(out, y).item() * len(y)
                    correct += int((out.argmax(1) == y).sum())
                    seen += len(y)
            block.samples_processed, block.loss, block.test_accuracy = seen, total / seen, correct / seen
