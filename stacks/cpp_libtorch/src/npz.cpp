#include "npz.hpp"

#include <zip.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace deepgreen {

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;   // not-recipe: the .npy magic string
constexpr size_t kPreludeV1 = 10;   // not-recipe: magic, version, 2-byte header length
constexpr size_t kPreludeV2 = 12;   // not-recipe: magic, version, 4-byte header length

uint32_t le(const std::string& s, size_t at, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | uint8_t(s[at + i]);  // not-recipe: byte shift
  return v;
}

// The text after `'key':` in a .npy header dict, up to (not including) the next top-level
// ',' or '}' (a tuple's or a list's commas are inside its brackets).
std::string dict_value(const std::string& header, const std::string& key, const std::string& what) {
  const std::string quoted = "'" + key + "'";
  size_t at = header.find(quoted);
  if (at == std::string::npos) fail(what + ": the .npy header has no " + quoted);
  at = header.find(':', at + quoted.size());
  if (at == std::string::npos) fail(what + ": the .npy header has no value for " + quoted);
  size_t end = ++at;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(' || c == '[') ++depth;
    else if (c == ')' || c == ']') --depth;
    else if ((c == ',' || c == '}') && depth == 0) break;
  }
  std::string value = header.substr(at, end - at);
  const size_t first = value.find_first_not_of(' ');
  const size_t last = value.find_last_not_of(' ');
  return first == std::string::npos ? "" : value.substr(first, last - first + 1);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& what) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    fail(what + ": the .npy shape " + text + " is not a tuple");
  std::vector<int64_t> shape;
  std::string inner = text.substr(1, text.size() - 2);
  size_t pos = 0;
  while (pos <= inner.size()) {
    size_t comma = inner.find(',', pos);
    if (comma == std::string::npos) comma = inner.size();
    std::string dim = inner.substr(pos, comma - pos);
    const size_t first = dim.find_first_not_of(' ');
    if (first != std::string::npos) {
      dim = dim.substr(first, dim.find_last_not_of(' ') - first + 1);
      if (dim.empty() || dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 18)
        fail(what + ": the .npy shape " + text + " is not a tuple of sizes");
      shape.push_back(std::stoll(dim));
    }
    pos = comma + 1;
  }
  return shape;
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct EntryCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

}  // namespace

size_t npy_itemsize(const std::string& descr) {
  static const std::map<std::string, size_t> sizes = {
      {"|u1", 1}, {"|i1", 1}, {"|b1", 1}, {"<u2", 2}, {"<i2", 2}, {"<f2", 2},
      {"<u4", 4}, {"<i4", 4}, {"<f4", 4}, {"<u8", 8}, {"<i8", 8}, {"<f8", 8}};
  auto it = sizes.find(descr);
  return it == sizes.end() ? 0 : it->second;
}

NpyArray parse_npy(const std::string& npy, const std::string& what) {
  if (npy.size() < kPreludeV1 || npy.compare(0, kMagicBytes, kMagic, kMagicBytes) != 0)
    fail(what + " is not a .npy entry");
  const int major = uint8_t(npy[kMagicBytes]);
  if (major < 1 || major > 3) fail(what + ": .npy format version " + std::to_string(major) + " is not supported");
  const size_t prelude = major == 1 ? kPreludeV1 : kPreludeV2;
  if (npy.size() < prelude) fail(what + ": truncated .npy header");
  const size_t header_len = le(npy, kMagicBytes + 2, prelude - kMagicBytes - 2);
  if (header_len > npy.size() - prelude) fail(what + ": truncated .npy header");
  const std::string header = npy.substr(prelude, header_len);
  NpyArray a;
  const std::string descr = dict_value(header, "descr", what);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    fail(what + ": the .npy dtype " + descr + " is not a simple dtype");
  a.descr = descr.substr(1, descr.size() - 2);
  const size_t item = npy_itemsize(a.descr);
  if (!item) fail(what + " has dtype " + a.descr + ", which this reader does not know");
  if (dict_value(header, "fortran_order", what) != "False") fail(what + ": Fortran-ordered array");
  a.shape = parse_shape(dict_value(header, "shape", what), what);
  size_t count = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / item / size_t(d))
      fail(what + ": the .npy shape is too large");
    count *= size_t(d);
  }
  const size_t data = prelude + header_len;
  if (npy.size() - data != count * item)
    fail(what + " has " + std::to_string(npy.size() - data) + " bytes of data, its shape and dtype need " +
         std::to_string(count * item) + (npy.size() - data < count * item ? " (truncated)" : ""));
  a.bytes = npy.substr(data);
  return a;
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  int error = 0;
  std::unique_ptr<zip_t, ZipCloser> archive(zip_open(path.c_str(), ZIP_RDONLY, &error));
  if (!archive) {
    if (error == ZIP_ER_NOENT || error == ZIP_ER_OPEN)
      fail(path + ": cannot be opened (prepare it with 'deepgreen data prepare')");
    zip_error_t z;
    zip_error_init_with_code(&z, error);
    std::string message = zip_error_strerror(&z);
    zip_error_fini(&z);
    fail(path + ": not a readable npz (ZIP) file: " + message);
  }
  std::map<std::string, NpyArray> out;
  const zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), zip_uint64_t(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        !(st.valid & ZIP_STAT_NAME))
      fail(path + ": entry " + std::to_string(i) + " cannot be read: " + zip_strerror(archive.get()));
    const std::string name = st.name;
    const std::string what = path + ": " + name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) fail(what + " is not a .npy entry");
    std::unique_ptr<zip_file_t, EntryCloser> entry(zip_fopen_index(archive.get(), zip_uint64_t(i), 0));
    if (!entry) fail(what + " cannot be opened: " + zip_strerror(archive.get()));
    std::string bytes(size_t(st.size), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const zip_int64_t n = zip_fread(entry.get(), &bytes[got], bytes.size() - got);
      if (n < 0) fail(what + " cannot be read: " + zip_file_strerror(entry.get()));
      if (n == 0) break;
      got += size_t(n);
    }
    if (got != bytes.size()) fail(what + " is truncated");
    char probe;
    if (zip_fread(entry.get(), &probe, 1) < 0)  // the CRC is checked at the end of the entry
      fail(what + " cannot be read: " + zip_file_strerror(entry.get()));
    out[name.substr(0, name.size() - 4)] = parse_npy(bytes, what);
  }
  return out;
}

}  // namespace deepgreen
