"""Writes the C++ stack's test fixtures (tests/fixtures/), deterministically:

  repr_vectors.txt   doubles (their IEEE-754 bits in hex) and Python's repr() of each: edge
                     cases, a few thousand random bit patterns and random values in the
                     ranges a loss or an accuracy takes (test_repr.cpp)
  *.npz              small archives written by NumPy: np.savez (as `deepgreen data prepare`
                     writes the store), np.savez_compressed, a Fortran-ordered array, a
                     damaged CRC and a file that is no ZIP (test_npz.cpp)

    python3 stacks/cpp_libtorch/tests/make_fixtures.py     (needs NumPy)

The numbers below are written as strings where they could look like a recipe value to the
audit's source scan (deepgreen_audit/stacks/sources.py).
"""

from __future__ import annotations

import io
import math
import random
import struct
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED = 20261204
RANDOM_BIT_PATTERNS = 3000
RANDOM_VALUES = 1000

EDGE_CASES = [
    "0.0", "-0.0", "1.0", "-1.0", "0.5", "0.1", "0.2", "0.3", "1e-4", "1e-5", "9.9999e-5", "0.00015",
    "1e-05", "1.5e-7", "2e-4", "0.0002", "2.302585092994046", "3.0", "10.0", "100.0", "1e15",
    "999999999999999.9", "9999999999999998.0", "1e16", "1.2345678901234567e16", "123456789012345.6",
    "1e22", "1e23", "1e100", "1e-100", "1e308", "1.7976931348623157e308", "2.2250738585072014e-308",
    "2.225073858507201e-308", "5e-324", "-5e-324", "4.9406564584124654e-324", "0.30000000000000004",
    "1.0000000000000002", "0.9999999999999999", "4.35", "4.605170185988091", "6.931471805599453",
    "0.6931471805599453", "0.01", "0.001", "0.0009999999999999998", "12345.678", "1e-4", "1.25e-4",
    "inf", "-inf", "nan",
]


def bits(value: float) -> str:
    return struct.pack(">d", value).hex()


def repr_vectors() -> list[str]:
    rng = random.Random(SEED)
    values = [float(text) for text in EDGE_CASES]
    values += [struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0] for _ in range(RANDOM_BIT_PATTERNS)]
    for _ in range(RANDOM_VALUES // 4):
        values.append(rng.uniform(0.0, 10.0))                 # a loss
        values.append(rng.randrange(0, 10001) / 10000)        # an accuracy
        values.append(rng.randrange(1, 100001) / rng.choice([10 ** k for k in range(1, 8)]))
        values.append(math.ldexp(rng.random(), rng.randrange(-60, 70)))
    lines = []
    for value in values:
        text = "nan" if math.isnan(value) else repr(value)   # every NaN payload prints as nan
        lines.append(f"{bits(value)} {text}")
    return lines


def npz_bytes(writer, **arrays) -> bytes:
    buffer = io.BytesIO()
    writer(buffer, **arrays)
    return buffer.getvalue()


def main() -> int:
    FIXTURES.mkdir(exist_ok=True)
    (FIXTURES / "repr_vectors.txt").write_text("\n".join(repr_vectors()) + "\n", encoding="ascii")
    # the store's layout, as deepgreen_audit/stacks/data.py writes it
    x = np.arange(2 * 3 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3, 3)
    y = np.array([7, -1], dtype="<i8")
    store = npz_bytes(np.savez, x=x, y=y)
    (FIXTURES / "store.npz").write_bytes(store)
    (FIXTURES / "compressed.npz").write_bytes(npz_bytes(
        np.savez_compressed,
        f32=np.array([[0.5, -2.0, 3.25]], dtype="<f4"),
        f64=np.array([1.0, 2.5], dtype="<f8"),
        i16=np.array([-2, 3, 300], dtype="<i2"),
        scalar=np.array(42, dtype=np.uint8),
        empty=np.zeros((0, 3), dtype="<i8")))
    (FIXTURES / "fortran.npz").write_bytes(npz_bytes(np.savez, f=np.asfortranarray(np.ones((2, 3), dtype="<f8"))))
    (FIXTURES / "bigendian.npz").write_bytes(npz_bytes(np.savez, b=np.array([1, 2], dtype=">i4")))
    damaged = bytearray(store)
    at = bytes(damaged).index(bytes(x.tobytes()[:8]))     # the first pixels, inside x.npy's data
    damaged[at + 5] ^= 0xFF
    (FIXTURES / "damaged_crc.npz").write_bytes(bytes(damaged))
    (FIXTURES / "not_a_zip.npz").write_bytes(b"this is not a ZIP archive\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
