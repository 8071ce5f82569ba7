"""The Python/JAX+Flax stack: one run of one configuration under the DeepGreen harness.

The runner imports this program and calls `check(job)` then `run(harness, job)`;
`sync()` is called before every counter read.  Model: `models_flax` (linen,
PyTorch's padding and BatchNorm arithmetic), loaded from the run's canonical
weight export.  Data: the canonical store, shuffled each epoch by a NumPy
generator seeded from the run's seed, batches scaled to [0, 1] by the spec's
number of loader threads ahead of the device.  Optimiser: optax Adam with
PyTorch's constants (`conventions`; optax's update rule is PyTorch's) and
weight decay as PyTorch's L2 term.  Precision policy: float32, matmuls and
convolutions at "highest" precision (no TF32 or bf16 passes).  The recipe's
numbers come from the job, i.e. from collect/experiment.toml.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from deepgreen_audit.stacks import conventions as conv, models_flax, runtime
from deepgreen_audit.stacks.data import unit_interval

FRAMEWORK = "jax"


def set_precision_policy() -> None:
    """fp32 everywhere, no reduced-precision matmul passes (the specification's S4 policy)."""
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_enable_x64", False)


#: JAX's platform names -> the runs schema's devices (a TPU or ROCm platform has none).
PLATFORM_DEVICES = {"gpu": "cuda", "cuda": "cuda", "cpu": "cpu"}
#: Default matmul precisions that keep float32 passes on the GPU (the others allow TF32).
FP32_PRECISIONS = ("highest", "float32")


def device() -> runtime.DeviceReport:
    """JAX's default device (where jit places params and batches), named by its device_kind;
    XLA runs GPU convolutions through cuDNN; TF32 unless the default matmul precision is
    "highest" (set by the precision policy)."""
    first = jax.devices()[0]
    if first.platform not in PLATFORM_DEVICES:
        raise RuntimeError(f"JAX runs on {first.platform!r}, which is none of "
                           f"{', '.join(sorted(set(PLATFORM_DEVICES.values())))}")
    on_cuda = PLATFORM_DEVICES[first.platform] == "cuda"
    precision = str(jax.config.jax_default_matmul_precision or "default").lower()
    return runtime.DeviceReport(device=PLATFORM_DEVICES[first.platform], device_name=first.device_kind,
                                cudnn_enabled=on_cuda,
                                tf32_enabled=on_cuda and precision not in FP32_PRECISIONS)


def sync() -> None:
    """Wait for dispatched device work before a counter read (the stack also blocks on its results)."""
    jax.effects_barrier()


def loss_fn(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def eval_batches(x, y, batch_size: int, workers: int = 1):
    def prepare(idx):
        return jnp.asarray(unit_interval(x[idx])), jnp.asarray(y[idx])

    return runtime.prefetch(prepare, runtime.batch_indices(len(y), batch_size), workers)


def check(job) -> None:
    runtime.check_job(job, models_flax.ARCHITECTURES)


def run(harness, job) -> None:
    set_precision_policy()
    r = job.recipe
    inputs = runtime.run_inputs(job)
    store = inputs.store
    model = models_flax.build(job.architecture, job.classes)
    variables = models_flax.load_state(models_flax.init_template(model, store.side_px), inputs.tensors)
    params, stats = variables["params"], variables.get("batch_stats", {})
    tx = optax.chain(optax.add_decayed_weights(r["weight_decay"]),
                     optax.adam(r["learning_rate"], b1=conv.ADAM_BETA1, b2=conv.ADAM_BETA2, eps=conv.ADAM_EPSILON))
    opt_state = tx.init(params)
    runtime.report(harness, job, inputs, device(), framework=FRAMEWORK, framework_version=jax.__version__,
                   framework_backend=jax.default_backend(),      # the platform jax loaded: cpu, gpu
                   cudnn_available=jax.default_backend() == "gpu")   # jaxlib's CUDA plugin brings cuDNN

    @jax.jit
    def train_step(params, stats, opt_state, x, y, key):
        def objective(p):
            logits, updated = model.apply({"params": p, "batch_stats": stats}, x, train=True,
                                          mutable=["batch_stats"], rngs={"dropout": key})
            return loss_fn(logits, y), updated.get("batch_stats", {})

        (loss, stats), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), stats, opt_state, loss

    @jax.jit
    def eval_step(params, stats, x, y):
        logits = model.apply({"params": params, "batch_stats": stats}, x, train=False)
        return loss_fn(logits, y), jnp.sum(jnp.argmax(logits, 1) == y)

    def prepare(idx):
        return jnp.asarray(unit_interval(store.x_train[idx])), jnp.asarray(store.y_train[idx])

    key = jax.random.PRNGKey(job.seed)
    order_rng = np.random.default_rng(job.seed)
    for epoch in range(1, job.epochs + 1):
        with harness.block(epoch, "train") as block:
            tally = runtime.PhaseTally()
            batches = runtime.batch_indices(len(store.y_train), r["batch_size"],
                                            order_rng.permutation(len(store.y_train)))
            for x, y in runtime.limited(runtime.prefetch(prepare, batches, r["loader_workers"]),
                                        job.max_train_batches):
                key, step_key = jax.random.split(key)
                params, stats, opt_state, loss = train_step(params, stats, opt_state, x, y, step_key)
                tally.add(len(y), float(loss))
            jax.block_until_ready((params, stats, opt_state))
            tally.report(block)
        with harness.block(epoch, "eval") as block:
            tally = runtime.PhaseTally()
            for x, y in runtime.limited(eval_batches(store.x_test, store.y_test, r["eval_batch_size"],
                                                     r["loader_workers"]), job.max_eval_batches):
                loss, right = eval_step(params, stats, x, y)
                tally.add(len(y), float(loss), int(right))
            tally.report(block, accuracy=True)


def probe(architecture: str, classes: int, tensors: dict, x_uint8: np.ndarray, y: np.ndarray,
          train: bool) -> dict:
    """One forward pass of this stack's model on canonical weights (parity hook, see runtime)."""
    set_precision_policy()
    model = models_flax.build(architecture, classes, dropout=0.0)
    variables = models_flax.load_state(models_flax.init_template(model, x_uint8.shape[1]), tensors)
    x = jnp.asarray(unit_interval(x_uint8))
    if train:
        logits, updated = model.apply(variables, x, train=True, mutable=["batch_stats"])
        variables = {**variables, **updated}
    else:
        logits = model.apply(variables, x, train=False)
    return {"logits": np.asarray(logits), "loss": float(loss_fn(logits, jnp.asarray(y))),
            "state": models_flax.state(variables)}
