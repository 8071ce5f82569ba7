"""The Python/PyTorch stack: one run of one configuration under the DeepGreen harness.

The runner (deepgreen_audit.collect.runner) imports this program and calls
`check(job)` then `run(harness, job)`; `sync()` is the device-synchronisation
hook the harness calls before every counter read.  The recipe comes from the
job (itself from collect/experiment.toml): Adam (PyTorch's, the reference
update rule), constant learning rate, the spec's weight decay, inputs scaled
to [0,1] without mean/std normalisation, the spec's loader workers and batch
sizes.  Precision policy: float32, TF32 off (set below).

Model: `deepgreen_audit.stacks.models_torch` (torchvision's ResNet-18 and
VGG-16 layouts and names), loaded from the run's canonical weight export
(`deepgreen_audit.stacks.weights`), whose SHA-256 the run reports.  Data: the
canonical store (`deepgreen_audit.stacks.data`; the digits smoke set is
derived in memory when not converted), whose fingerprint the run reports.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from deepgreen_audit.stacks import models_torch, runtime

FRAMEWORK = "torch"
INPUT_LAYOUT = "NCHW"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_precision_policy() -> None:
    """fp32 everywhere, TF32 off (the specification's S4 precision policy)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def device() -> runtime.DeviceReport:
    """Where this stack places model and data (DEVICE), under the precision policy set: the
    GPU's name, cuDNN as torch will use it for convolutions, the TF32 flags as they stand."""
    on_cuda = DEVICE.type == "cuda"
    return runtime.DeviceReport(
        device=DEVICE.type,
        device_name=torch.cuda.get_device_name(DEVICE) if on_cuda else str(DEVICE),
        cudnn_enabled=on_cuda and torch.backends.cudnn.enabled and torch.backends.cudnn.is_available(),
        tf32_enabled=on_cuda and (torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32))


def sync() -> None:
    """Wait for queued device work, so a block's window closes over finished work."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def to_tensors(x: np.ndarray, y: np.ndarray) -> TensorDataset:
    """uint8 NHWC -> float NCHW in [0, 1] (divided by 255; no mean/std normalisation)."""
    return TensorDataset(torch.from_numpy(x).permute(0, 3, 1, 2).float().div_(255.0), torch.from_numpy(y))


def eval_batches(x: np.ndarray, y: np.ndarray, batch_size: int, workers: int = 0) -> DataLoader:
    return DataLoader(to_tensors(x, y), batch_size=batch_size, shuffle=False, num_workers=workers)


def check(job) -> None:
    """Raise, naming what is missing, unless this job can run."""
    runtime.check_job(job, models_torch.ARCHITECTURES)


def run(harness, job) -> None:
    r = job.recipe
    set_precision_policy()
    torch.manual_seed(job.seed)
    inputs = runtime.run_inputs(job)
    store = inputs.store
    model = models_torch.build(job.architecture, job.classes)
    models_torch.load_state(model, inputs.tensors)
    model.to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=r["learning_rate"], weight_decay=r["weight_decay"])
    generator = torch.Generator().manual_seed(job.seed)
    train = DataLoader(to_tensors(store.x_train, store.y_train), batch_size=r["batch_size"], shuffle=True,
                       num_workers=r["loader_workers"], generator=generator)
    test = eval_batches(store.x_test, store.y_test, r["eval_batch_size"], r["loader_workers"])
    runtime.report(harness, job, inputs, device(), framework=FRAMEWORK, framework_version=torch.__version__,
                   framework_backend=f"cuda-{torch.version.cuda}" if torch.version.cuda else "cpu",
                   cudnn_available=DEVICE.type == "cuda" and torch.backends.cudnn.is_available(),
                   **({"cuda_version": torch.version.cuda} if DEVICE.type == "cuda" else {}))
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, job.epochs + 1):
        with harness.block(epoch, "train") as block:
            model.train()
            tally = runtime.PhaseTally()
            for x, y in runtime.limited(train, job.max_train_batches):
                x, y = x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                tally.add(len(y), loss.item())
            tally.report(block)
        with harness.block(epoch, "eval") as block:
            model.eval()
            tally = runtime.PhaseTally()
            with torch.no_grad():
                for x, y in runtime.limited(test, job.max_eval_batches):
                    x, y = x.to(DEVICE), y.to(DEVICE)
                    out = model(x)
                    tally.add(len(y), loss_fn(out, y).item(), int((out.argmax(1) == y).sum()))
            tally.report(block, accuracy=True)


def probe(architecture: str, classes: int, tensors: dict, x_uint8: np.ndarray, y: np.ndarray,
          train: bool) -> dict:
    """One forward pass of this stack's model on canonical weights (parity hook, see runtime)."""
    set_precision_policy()
    model = models_torch.build(architecture, classes)
    models_torch.load_state(model, tensors)
    model.train(train)
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.eval()          # dropout off: each framework draws its own masks
    x = to_tensors(x_uint8, np.asarray(y, dtype=np.int64)).tensors[0]
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, torch.from_numpy(np.asarray(y, dtype=np.int64)))
    return {"logits": logits.numpy(), "loss": float(loss), "state": {k: v.numpy() for k, v in
                                                                     models_torch.state(model).items()}}
