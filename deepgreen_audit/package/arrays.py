"""pyarrow arrays as numpy, read straight from their buffers.

pyarrow's `to_numpy`, `pa.array` and its conversion of Python scalars import pandas
(0.4 s, more than reading and hashing a package) only to ask whether their argument is
a pandas object.  Validation needs neither, so it reads and builds the few arrays it
needs here: fixed-width values, validity and boolean bitmaps, dictionary codes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    encoded = pc.dictionary_encode(arr)
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
