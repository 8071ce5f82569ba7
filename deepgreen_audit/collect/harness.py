"""The harness: measurement blocks bracketed by synchronised counter reads.

A block is one phase (train, eval) of one epoch.  At each boundary the harness
calls the stack's `sync` hook (e.g. `torch.cuda.synchronize`: the window must
not close over unfinished device work), reads the counters with the monotonic
and the UTC clock, and starts or stops CodeCarbon; CodeCarbon's task nests
inside the counter window.  Python stacks use it directly::

    harness = Harness(instruments, sync=torch.cuda.synchronize)
    harness.report(optimizer="adam", learning_rate=1e-4, ...)   # what the run used
    with harness.block(epoch, "train") as block:
        ...train...
        block.samples_processed, block.loss = n, mean_loss
    with harness.block(epoch, "eval") as block:
        ...evaluate...
        block.samples_processed, block.loss, block.test_accuracy = n, loss, acc

Other languages reach the same object through the line protocol
(`protocol.py`, docs/protocol.md).  Every ordering mistake (an end before its
begin, an epoch going backwards, a phase repeated) raises `ProtocolViolation`
with a stable code and changes nothing.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass

from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonBlock
from deepgreen_audit.collect.instruments import CounterReading
from deepgreen_audit.device.errors import ProtocolViolation
from deepgreen_audit.device.rapl import wraps_between
from deepgreen_audit.package.canonical import format_value, is_canonical, parse_value
from deepgreen_audit.package.schema import load_schema, phases
from deepgreen_audit.spec import recipe

#: Phases in their order within an epoch, from the blocks schema.
PHASES: tuple[str, ...] = phases()
#: Where the framework actually placed the run's work, and its cuDNN and TF32 state (runs
#: columns): asked of the framework during the run, so the audit can fail a silent CPU fallback.
DEVICE_KEYS: tuple[str, ...] = ("device", "device_name", "cudnn_enabled", "tf32_enabled")
#: Run facts a stack reports (runs and environment columns), from the schemas.
RUN_KEYS: tuple[str, ...] = (*recipe().keys(), *DEVICE_KEYS, "initial_weights_sha256",
                             "data_fingerprint_sha256")
ENVIRONMENT_KEYS: tuple[str, ...] = ("framework", "framework_version", "framework_backend", "cudnn_available",
                                      "cuda_version")


@dataclass(frozen=True)
class BlockRecord:
    """One finished block: raw readings at both boundaries, duration, CodeCarbon, metrics.

    `rapl_wraps`: the wraps of each RAPL domain observed between the two readings (by every
    read of the counters in between, the sampler's included; `rapl.py`)."""

    epoch: int
    phase: str
    started_at_utc: _dt.datetime
    duration_s: float
    nvml_start_mj: tuple[int, ...] | None
    nvml_end_mj: tuple[int, ...] | None
    rapl_start_uj: tuple[int, ...] | None
    rapl_end_uj: tuple[int, ...] | None
    rapl_wraps: tuple[int, ...] | None
    codecarbon: CodeCarbonBlock | None
    codecarbon_missing_reason: str | None
    samples_processed: int
    loss: float | None
    test_accuracy: float | None


@dataclass(frozen=True)
class Boundary:
    """The reads at one block boundary: both clocks and the counters."""

    #: the monotonic clock, seconds (only differences mean anything)
    monotonic_s: float
    at_utc: _dt.datetime
    counters: CounterReading


@dataclass(frozen=True)
class OpenBlock:
    """The block begun and not yet ended: which it is and the reads that opened it."""

    epoch: int
    phase: str
    start: Boundary


class BlockMetrics:
    """What the stack tells about a block before it closes."""

    samples_processed: int | None = None
    loss: float | None = None
    test_accuracy: float | None = None


def _field(name: str):
    for table in ("runs", "environment"):
        schema = load_schema(table)
        if name in schema.field_names:
            return schema.field(name)
    raise KeyError(name)


def _field_type(name: str) -> str:
    return _field(name).type


def check_enum(key: str, value) -> None:
    """Refuse a value outside its column's enum (a device other than cuda or cpu)."""
    allowed = _field(key).enum
    if allowed and value not in allowed:
        raise ProtocolViolation("bad-value", f"{key}={value!r} is not one of {', '.join(allowed)}")


class Harness:
    """The block clock of one run."""

    def __init__(self, instruments, sync=None, clock=time.monotonic):
        self.instruments = instruments
        self.sync = sync or (lambda: None)
        self.clock = clock
        self.blocks: list[BlockRecord] = []
        self.values: dict[str, object] = {}
        self._open: OpenBlock | None = None
        self._done: set[tuple[int, str]] = set()

    @property
    def open_block(self) -> tuple[int, str] | None:
        """(epoch, phase) of the block begun and not yet ended, or None."""
        return (self._open.epoch, self._open.phase) if self._open else None

    # ------------------------------------------------------------ run facts

    def report(self, **values) -> None:
        """Record what the run actually used (recipe values, device, hashes, framework): all
        the values or, when one is not valid, none."""
        parsed = {}
        for key, value in values.items():
            if key not in RUN_KEYS + ENVIRONMENT_KEYS:
                raise ProtocolViolation("bad-key", f"{key!r} is not a run value "
                                        f"(known: {', '.join(RUN_KEYS + ENVIRONMENT_KEYS)})")
            type_ = _field_type(key)
            try:
                text = format_value(value, type_)
            except (ValueError, TypeError):
                text = None
            if not text or not is_canonical(text, type_) or (key.endswith("_sha256") and (
                    len(text) != 64 or any(c not in "0123456789abcdef" for c in text))):
                raise ProtocolViolation("bad-value", f"{key}={value!r} is not a valid {type_}")
            parsed[key] = parse_value(text, type_)
            check_enum(key, parsed[key])
        self.values.update(parsed)

    # ------------------------------------------------------------ boundaries

    def _boundary(self) -> Boundary:
        """Wait for the device's work, then read the counters and both clocks."""
        self.sync()
        counters = self.instruments.read()
        return Boundary(monotonic_s=self.clock(), at_utc=_dt.datetime.now(_dt.UTC),
                        counters=counters)

    def begin(self, epoch: int, phase: str) -> _dt.datetime:
        """Open a block; returns the UTC time of its opening counter read."""
        if self._open:
            raise ProtocolViolation("block-open", f"block (epoch {self._open.epoch}, {self._open.phase}) "
                                    "is still open; end it first")
        if phase not in PHASES:
            raise ProtocolViolation("bad-value", f"phase {phase!r} is not one of {', '.join(PHASES)}")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise ProtocolViolation("bad-value", f"epoch {epoch!r} is not an integer >= 1")
        last = max((e for e, _ in self._done), default=0)
        if epoch < last:
            raise ProtocolViolation("epoch-backwards", f"epoch {epoch} after epoch {last}")
        if (epoch, phase) in self._done:
            raise ProtocolViolation("block-repeated", f"epoch {epoch} {phase} was already measured")
        later = [p for p in PHASES[PHASES.index(phase) + 1:] if (epoch, p) in self._done]
        if later:
            raise ProtocolViolation("phase-backwards", f"{phase} after {later[0]} in epoch {epoch}")
        start = self._boundary()
        cc = self.instruments.codecarbon
        if cc is not None:
            cc.start_block(f"epoch-{epoch}-{phase}")
        self._open = OpenBlock(epoch=epoch, phase=phase, start=start)
        return start.at_utc

    def end(self, epoch: int, phase: str, *, samples_processed: int | None, loss: float | None,
            test_accuracy: float | None = None) -> BlockRecord:
        """Close the open block (which must be (epoch, phase)) and record it."""
        if not self._open:
            raise ProtocolViolation("no-open-block", f"end of epoch {epoch} {phase} without its begin")
        if (epoch, phase) != (self._open.epoch, self._open.phase):
            raise ProtocolViolation("block-mismatch", f"end of epoch {epoch} {phase} while epoch "
                                    f"{self._open.epoch} {self._open.phase} is open")
        _check_metrics(phase, samples_processed, loss, test_accuracy)
        assert samples_processed is not None  # _check_metrics refuses anything but an int >= 0
        cc = self.instruments.codecarbon
        reading = cc.stop_block() if cc is not None else None
        end = self._boundary()
        start = self._open.start
        nvml0, rapl0 = start.counters.nvml_mj, start.counters.rapl
        nvml, rapl = end.counters.nvml_mj, end.counters.rapl
        record = BlockRecord(
            epoch=epoch, phase=phase, started_at_utc=start.at_utc,
            duration_s=end.monotonic_s - start.monotonic_s,
            nvml_start_mj=nvml0, nvml_end_mj=nvml,
            rapl_start_uj=rapl0.energy_uj if rapl0 is not None else None,
            rapl_end_uj=rapl.energy_uj if rapl is not None else None,
            rapl_wraps=wraps_between(rapl0, rapl) if rapl0 is not None and rapl is not None else None,
            codecarbon=reading,
            codecarbon_missing_reason=None if cc is not None else "CodeCarbon was not run for this block",
            samples_processed=samples_processed, loss=loss, test_accuracy=test_accuracy)
        self._open = None
        self._done.add((epoch, phase))
        self.blocks.append(record)
        return record

    @contextmanager
    def block(self, epoch: int, phase: str):
        """Begin a block, let the stack fill its metrics, end it; an exception leaves it open."""
        self.begin(epoch, phase)
        metrics = BlockMetrics()
        yield metrics
        self.end(epoch, phase, samples_processed=metrics.samples_processed, loss=metrics.loss,
                 test_accuracy=metrics.test_accuracy)


def _check_metrics(phase, samples_processed, loss, test_accuracy) -> None:
    if isinstance(samples_processed, bool) or not isinstance(samples_processed, int) \
            or samples_processed < 0:
        raise ProtocolViolation("bad-value", f"samples {samples_processed!r} is not an integer >= 0")
    if loss is not None and (not isinstance(loss, (int, float)) or not math.isfinite(loss) or loss < 0):
        raise ProtocolViolation("bad-value", f"loss {loss!r} is not a finite number >= 0")
    if test_accuracy is not None:
        if phase != "eval":
            raise ProtocolViolation("bad-value", "test accuracy belongs to eval blocks only")
        if not isinstance(test_accuracy, (int, float)) or not 0 <= test_accuracy <= 1:
            raise ProtocolViolation("bad-value", f"accuracy {test_accuracy!r} is not in [0, 1]")
