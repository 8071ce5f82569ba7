"""The Python/TensorFlow stack: one run of one configuration under the DeepGreen harness.

The runner imports this program and calls `check(job)` then `run(harness, job)`;
`sync()` is called before every counter read.  Model: `models_tf` (Keras,
PyTorch's padding and BatchNorm arithmetic), loaded from the run's canonical
weight export.  Data: the canonical store through tf.data (shuffled with the
run's seed each epoch, the spec's loader workers as parallel map calls and
prefetch, scaled to [0, 1]).  Optimiser: Adam with PyTorch's update rule and
constants (`conventions`; Keras' Adam places epsilon differently).  Precision
policy: float32, TF32 off (set below, before any op runs).  oneDNN's CPU
kernels are switched on explicitly (TF_ENABLE_ONEDNN_OPTS=1, TensorFlow's own
default on x86 Linux, which this wheel leaves off): without them one
ResNet-18 step at batch 128 takes ~6 s instead of ~1.6 s on a 2-core CPU;
they stay float32 (parity holds, see deepgreen parity).  The recipe's
numbers come from the job, i.e. from collect/experiment.toml.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")   # see the docstring: oneDNN kernels on x86 CPUs

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from deepgreen_audit.stacks import (  # noqa: E402
    conventions as conv,  # noqa: E402
    models_tf,
    runtime,
)
from deepgreen_audit.stacks.data import unit_interval  # noqa: E402

FRAMEWORK = "tensorflow"


def set_precision_policy() -> None:
    """fp32 everywhere, TF32 off (the specification's S4 precision policy)."""
    tf.config.experimental.enable_tensor_float_32_execution(False)
    tf.keras.backend.set_floatx("float32")


def device() -> runtime.DeviceReport:
    """Where TensorFlow places an op of this process (soft placement puts it on GPU:0 when TF
    sees a GPU, on the CPU otherwise, without an error), with the GPU's details; cuDNN runs
    TF's GPU convolutions when TF was built with CUDA; TF32 as the precision policy left it."""
    placed = tf.DeviceSpec.from_string(tf.identity(tf.constant(0.0)).device)
    on_gpu = placed.device_type == "GPU"
    name = f"/device:{placed.device_type}:{placed.device_index}"
    if on_gpu:
        details = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[placed.device_index])
        name += "".join(f" {details[k]}" for k in ("device_name",) if details.get(k))
        if details.get("compute_capability"):
            name += " (compute capability {}.{})".format(*details["compute_capability"])
    return runtime.DeviceReport(
        device="cuda" if on_gpu else "cpu", device_name=name,
        cudnn_enabled=on_gpu and tf.test.is_built_with_cuda(),
        tf32_enabled=on_gpu and tf.config.experimental.tensor_float_32_execution_enabled())


def sync() -> None:
    """Wait for queued device work before a counter read."""
    if tf.config.list_logical_devices("GPU"):
        tf.test.experimental.sync_devices()


class TorchAdam:
    """Adam with PyTorch's update (epsilon added to sqrt(v) / sqrt(1 - beta2^t)), L2 as PyTorch's weight_decay."""

    def __init__(self, variables, learning_rate: float, weight_decay: float):
        self.variables, self.lr, self.wd = variables, learning_rate, weight_decay
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.step = tf.Variable(0.0, trainable=False)

    def apply(self, grads) -> None:
        self.step.assign_add(1.0)
        bc1 = 1.0 - conv.ADAM_BETA1 ** self.step
        bc2_sqrt = tf.sqrt(1.0 - conv.ADAM_BETA2 ** self.step)
        for g, var, m, v in zip(grads, self.variables, self.m, self.v):
            if self.wd:
                g = g + self.wd * var
            m.assign(conv.ADAM_BETA1 * m + (1.0 - conv.ADAM_BETA1) * g)
            v.assign(conv.ADAM_BETA2 * v + (1.0 - conv.ADAM_BETA2) * tf.square(g))
            var.assign_sub(self.lr / bc1 * m / (tf.sqrt(v) / bc2_sqrt + conv.ADAM_EPSILON))


def loss_fn(logits, labels):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def _scale(x, y):
    return tf.cast(x, tf.float32) / 255.0, y


def train_batches(x, y, batch_size: int, workers: int, seed: int) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).map(_scale, num_parallel_calls=workers).prefetch(workers)


def eval_batches(x, y, batch_size: int, workers: int = 1) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).map(
        _scale, num_parallel_calls=workers).prefetch(workers)


def check(job) -> None:
    runtime.check_job(job, models_tf.ARCHITECTURES)


def run(harness, job) -> None:
    set_precision_policy()
    tf.keras.utils.set_random_seed(job.seed)
    r = job.recipe
    inputs = runtime.run_inputs(job)
    store = inputs.store
    model = models_tf.build(job.architecture, job.classes, side=store.side_px)
    models_tf.load_state(model, inputs.tensors)
    optimizer = TorchAdam(model.trainable_variables, r["learning_rate"], r["weight_decay"])
    build = tf.sysconfig.get_build_info()
    runtime.report(harness, job, inputs, device(), framework=FRAMEWORK, framework_version=tf.__version__,
                   framework_backend=f"cuda-{build['cuda_version']}" if build.get("is_cuda_build") else "cpu",
                   cudnn_available=bool(tf.config.list_logical_devices("GPU")) and tf.test.is_built_with_cuda())

    @tf.function(reduce_retracing=True)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(model(x, training=True), y)
        optimizer.apply(tape.gradient(loss, model.trainable_variables))
        return loss

    @tf.function(reduce_retracing=True)
    def eval_step(x, y):
        logits = model(x, training=False)
        return loss_fn(logits, y), tf.reduce_sum(tf.cast(tf.argmax(logits, 1) == y, tf.int64))

    train = train_batches(store.x_train, store.y_train, r["batch_size"], r["loader_workers"], job.seed)
    test = eval_batches(store.x_test, store.y_test, r["eval_batch_size"], r["loader_workers"])
    for epoch in range(1, job.epochs + 1):
        with harness.block(epoch, "train") as block:
            tally = runtime.PhaseTally()
            for x, y in runtime.limited(train, job.max_train_batches):
                tally.add(len(y), float(train_step(x, y)))
            tally.report(block)
        with harness.block(epoch, "eval") as block:
            tally = runtime.PhaseTally()
            for x, y in runtime.limited(test, job.max_eval_batches):
                loss, right = eval_step(x, y)
                tally.add(len(y), float(loss), int(right))
            tally.report(block, accuracy=True)


def probe(architecture: str, classes: int, tensors: dict, x_uint8: np.ndarray, y: np.ndarray,
          train: bool) -> dict:
    """One forward pass of this stack's model on canonical weights (parity hook, see runtime)."""
    set_precision_policy()
    model = models_tf.build(architecture, classes, side=x_uint8.shape[1], dropout=0.0)
    models_tf.load_state(model, tensors)
    logits = model(unit_interval(x_uint8), training=train)
    return {"logits": logits.numpy(), "loss": float(loss_fn(logits, tf.constant(y))),
            "state": models_tf.state(model)}
