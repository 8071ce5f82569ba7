"""pyarrow arrays as numpy, read straight from their buffers, and pyarrow without pandas.

pyarrow's `to_numpy`, `pa.array`, its compute functions' conversion of Python scalars and
more import pandas (0.2-0.4 s, more than reading and hashing a package) only to ask whether
their argument is a pandas object (apache/arrow#34994).  Validation hands pyarrow no pandas
object, so it reads and builds the few arrays it needs here (fixed-width values, validity and
boolean bitmaps, dictionary codes), and the `validate` and `audit` programs, which use no
pandas, run with pandas hidden (`pandas_hidden`).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from deepgreen_audit.package import compute

_DTYPES = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float64(): np.float64}


def _bits(buffer, arr: pa.Array) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
    return bits[arr.offset: arr.offset + len(arr)].astype(bool)


def valid(arr: pa.Array) -> np.ndarray:
    """True where `arr` holds a value (not null)."""
    bitmap = arr.buffers()[0]
    return np.ones(len(arr), dtype=bool) if bitmap is None or len(arr) == 0 else _bits(bitmap, arr)


def mask(arr: pa.BooleanArray) -> np.ndarray:
    """A boolean array as numpy; a null counts as False."""
    if len(arr) == 0:
        return np.zeros(0, dtype=bool)
    return _bits(arr.buffers()[1], arr) & valid(arr)


def values(arr: pa.Array) -> np.ndarray:
    """The values of a fixed-width numeric or timestamp array (timestamps as integers
    in their unit); a null's slot holds an arbitrary value, so pair this with `valid`."""
    dtype = np.int64 if pa.types.is_timestamp(arr.type) else _DTYPES[arr.type]
    if len(arr) == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset: arr.offset + len(arr)]


def from_mask(flags: np.ndarray) -> pa.BooleanArray:
    """A numpy boolean mask as a pyarrow boolean array."""
    packed = np.packbits(flags.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(packed.tobytes())])


def codes(arr: pa.Array) -> tuple[np.ndarray, list]:
    """Each cell's index into the distinct values of `arr` (-1 for a null), and those values."""
    encoded = compute.dictionary_encode(arr)
    index = values(encoded.indices).astype(np.int64)
    index[~valid(encoded.indices)] = -1
    return index, encoded.dictionary.to_pylist()


def repeats(index: np.ndarray) -> np.ndarray:
    """True where a code equals one in an earlier row (nulls, -1, never repeat)."""
    seen = np.ones(len(index), dtype=bool)
    seen[np.unique(index, return_index=True)[1]] = False
    return seen & (index >= 0)


def strings(texts: list[str]) -> pa.StringArray:
    """A pyarrow string array of `texts` (no nulls), built from its buffers."""
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded))])


def from_codes(index: np.ndarray, dictionary: list[str]) -> pa.DictionaryArray:
    """A dictionary array of codes `index` (no nulls) into the texts `dictionary`."""
    codes = np.ascontiguousarray(index, dtype=np.int32)
    indices = pa.Array.from_buffers(pa.int32(), len(codes), [None, pa.py_buffer(codes.tobytes())])
    return pa.DictionaryArray.from_arrays(indices, strings(dictionary))


class _HidePandas(importlib.abc.MetaPathFinder):
    """An import finder under which pandas cannot be imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"{name} is hidden: this program does not use it",
                                      name=name)
        return None


@contextlib.contextmanager
def pandas_hidden() -> Iterator[None]:
    """Run the block with pandas unimportable (where it is not imported already), so that
    pyarrow, finding no pandas, does not import it.

    pyarrow remembers the answer for the rest of the process: it then takes a pandas object
    handed to `pa.array` for a plain sequence (a categorical becomes text) until a call that
    needs pandas (`to_pandas`, `from_pandas`) imports it.  So only a process that ends after
    the block may use this (`deepgreen validate` and `deepgreen audit` as the program:
    `cli.main(owns_process=True)`)."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _HidePandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
