#include "safetensors.hpp"

#include <stdexcept>

#include "json.hpp"

namespace deepgreen {

namespace {
constexpr size_t kLengthBytes = 8;  // not-recipe: the safetensors length prefix
constexpr int kBitsPerByte = 8;     // not-recipe: byte width

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

size_t offset(const Json& value, const std::string& what) {
  if (!value.is_number_unsigned()) fail(what + ": data_offsets must be non-negative integers");
  return value.get<size_t>();
}
}  // namespace

SafetensorsLayout parse_safetensors(const std::string& bytes, const std::string& path) {
  if (bytes.size() < kLengthBytes) fail(path + ": not a safetensors file");
  uint64_t n = 0;
  for (int i = int(kLengthBytes) - 1; i >= 0; --i) n = (n << kBitsPerByte) | uint8_t(bytes[size_t(i)]);
  if (n > bytes.size() - kLengthBytes) fail(path + ": truncated safetensors header");
  const Json header = parse_json(bytes.substr(kLengthBytes, size_t(n)), path);
  if (!header.is_object()) fail(path + ": the safetensors header is not a JSON object");
  SafetensorsLayout layout;
  layout.data_start = kLengthBytes + size_t(n);
  const size_t data_size = bytes.size() - layout.data_start;
  for (const auto& [name, info] : header.items()) {
    const std::string what = path + ": " + name;
    if (name == "__metadata__") {
      if (!info.is_object()) fail(what + " is not an object");
      for (const auto& [key, value] : info.items())
        if (value.is_string()) layout.metadata[key] = value.get<std::string>();
      continue;
    }
    TensorEntry entry;
    entry.name = name;
    entry.dtype = json_string(info, "dtype", what);
    const Json& shape = json_at(info, "shape", what);
    if (!shape.is_array()) fail(what + ": shape is not a list");
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) fail(what + ": shape must hold non-negative integers");
      entry.shape.push_back(d.get<int64_t>());
    }
    const Json& offsets = json_at(info, "data_offsets", what);
    if (!offsets.is_array() || offsets.size() != 2) fail(what + ": data_offsets is not [begin, end]");
    entry.begin = offset(offsets[0], what);
    entry.end = offset(offsets[1], what);
    if (entry.begin > entry.end) fail(what + ": data_offsets end before they begin");
    if (entry.end > data_size) fail(what + " lies past the end of the file");
    layout.entries.push_back(std::move(entry));
  }
  return layout;
}

std::string safetensors_header(const std::vector<TensorEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  header["__metadata__"] = Json::object();
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  for (const auto& entry : entries) {
    Json info = Json::object();
    info["dtype"] = entry.dtype;
    info["shape"] = Json::array();
    for (int64_t d : entry.shape) info["shape"].push_back(d);
    info["data_offsets"] = Json::array({entry.begin, entry.end});
    header[entry.name] = std::move(info);
  }
  std::string text = header.dump();
  while (text.size() % kLengthBytes) text += ' ';
  std::string out;
  const uint64_t n = text.size();
  for (size_t i = 0; i < kLengthBytes; ++i) out += char((n >> (kBitsPerByte * i)) & 0xFF);
  return out + text;
}

}  // namespace deepgreen
