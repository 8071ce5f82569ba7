// The safetensors layout (the canonical initial weights; the parity probe's output): an
// 8-byte little-endian header length, a JSON header, then the tensors' bytes.  Tensors
// themselves are the training code's (training.cpp); this is the layout only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deepgreen {

struct TensorEntry {
  std::string name;
  std::string dtype;              // "F32", ...
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;      // data_offsets, relative to the end of the header
};

struct SafetensorsLayout {
  size_t data_start = 0;          // where the tensors' bytes begin in the file
  std::vector<TensorEntry> entries;               // in the header's order
  std::map<std::string, std::string> metadata;    // __metadata__
};

// The layout of the safetensors file `bytes` (named `path` in errors): every entry's
// offsets lie inside the file.
SafetensorsLayout parse_safetensors(const std::string& bytes, const std::string& path);

// The length prefix and header of a file holding `entries` (their offsets as given) and
// `metadata`, the header padded with spaces to a multiple of 8 bytes.
std::string safetensors_header(const std::vector<TensorEntry>& entries,
                               const std::map<std::string, std::string>& metadata);

}  // namespace deepgreen
