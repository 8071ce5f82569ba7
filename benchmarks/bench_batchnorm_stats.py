"""Why a short digits run's evaluation accuracy is near chance: BatchNorm's running statistics.

Trains ResNet-18 on the digits smoke store exactly as the Python/PyTorch stack does (its
canonical initial weights, Adam at the specification's learning rate, batch size and loader
order) and, after every epoch, evaluates the same weights three ways:

* ``running``: eval mode, BatchNorm normalising with its running statistics (what every
  stack reports as test accuracy);
* ``batch``: BatchNorm normalising each evaluation batch with that batch's own statistics
  (train-mode BatchNorm on a copy, so nothing is updated);
* ``recalibrated``: the running statistics recomputed as the plain average over one pass of
  the training set at the current weights (no gradient step), then eval mode.

When ``batch`` and ``recalibrated`` score high while ``running`` is at chance, the weights
are fine and only the running statistics lag behind them (PyTorch momentum 0.1: the running
value is an average over roughly the last 1 / 0.1 = 10 steps of weights that moved).

    .venv/bin/python benchmarks/bench_batchnorm_stats.py --data-dir /tmp/d --seed 1058281272 --epochs 10
"""

from __future__ import annotations

import argparse
import copy
import math
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from deepgreen_audit.spec import load_spec
from deepgreen_audit.stacks import data, models_torch, weights


def tensors(x, y) -> TensorDataset:
    """uint8 NHWC -> float NCHW in [0, 1], as the PyTorch stack feeds them."""
    return TensorDataset(torch.from_numpy(x).permute(0, 3, 1, 2).float().div_(255.0), torch.from_numpy(y))


def accuracy(model: nn.Module, test: DataLoader) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `model` as it stands (train or eval mode)."""
    loss_sum, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in test:
            out = model(x)
            loss_sum += float(nn.functional.cross_entropy(out, y, reduction="sum"))
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
    return loss_sum / n, correct / n


def with_batch_statistics(model: nn.Module) -> nn.Module:
    """A copy whose BatchNorm layers normalise with each batch's statistics."""
    twin = copy.deepcopy(model).eval()
    for module in twin.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.train()
    return twin


def recalibrated(model: nn.Module, train_images: torch.Tensor, batch_size: int) -> nn.Module:
    """A copy whose running statistics are the average over one pass of the training set."""
    twin = copy.deepcopy(model).train()
    for module in twin.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None          # cumulative average
    with torch.no_grad():
        for start in range(0, len(train_images), batch_size):
            twin(train_images[start:start + batch_size])
    return twin.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True,
                        help="where 'deepgreen data prepare' wrote digits/ and weights/")
    parser.add_argument("--seed", type=int, required=True, help="the run's seed (names its initial-weight export)")
    parser.add_argument("--epochs", type=int, default=10, help="epochs to train (default 10)")
    args = parser.parse_args()
    spec = load_spec()
    batch_size = spec["S2_optimisation"]["batch_size"]
    torch.manual_seed(args.seed)
    store = data.ensure_store(args.data_dir, "digits")
    model = models_torch.build("resnet18", 10)
    models_torch.load_state(model, weights.ensure(args.data_dir, "resnet18", 10, args.seed)[0])
    optimizer = torch.optim.Adam(model.parameters(), lr=spec["S2_optimisation"]["learning_rate"])
    train_set = tensors(store.x_train, store.y_train)
    train = DataLoader(train_set, batch_size=batch_size, shuffle=True,
                       generator=torch.Generator().manual_seed(args.seed))
    test = DataLoader(tensors(store.x_test, store.y_test), batch_size=spec["S3_data"]["eval_batch_size"])
    steps_per_epoch = math.ceil(len(train_set) / batch_size)
    print("epoch steps train_loss | running: loss acc | batch: loss acc | recalibrated: loss acc")
    for epoch in range(1, args.epochs + 1):
        model.train()
        loss_sum, n = 0.0, 0
        for x, y in train:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum, n = loss_sum + loss.item() * len(y), n + len(y)
        model.eval()
        figures = [accuracy(model, test), accuracy(with_batch_statistics(model), test),
                   accuracy(recalibrated(model, train_set.tensors[0], batch_size), test)]
        print(f"{epoch:5d} {epoch * steps_per_epoch:5d} {loss_sum / n:10.3f} | "
              + " | ".join(f"{loss:.3f} {acc:6.1%}" for loss, acc in figures), flush=True)


if __name__ == "__main__":
    main()
