// NumPy's .npz (a ZIP of .npy files, read with libzip: stored or deflated entries, ZIP64)
// and .npy (parsed here: format versions 1 to 3, C order, the little-endian dtypes below).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deepgreen {

struct NpyArray {
  std::string descr;              // NumPy's dtype string: "|u1", "<i8", ...
  std::vector<int64_t> shape;
  std::string bytes;              // C-order data, count(shape) * itemsize bytes
};

// The bytes per element of a dtype this reader knows (|u1 |i1 |b1 <u2 <i2 <f2 <u4 <i4 <f4
// <u8 <i8 <f8), or 0.
size_t npy_itemsize(const std::string& descr);

// The array in the .npy file `npy`; `what` names it in errors.
NpyArray parse_npy(const std::string& npy, const std::string& what);

// The arrays of the .npz file at `path`, by name without ".npy".
std::map<std::string, NpyArray> read_npz(const std::string& path);

}  // namespace deepgreen
