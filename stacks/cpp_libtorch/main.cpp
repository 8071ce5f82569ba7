// The C++/LibTorch stack of DeepGreen Audit.
//
//   deepgreen-libtorch train
//       one run under the harness: connects to 127.0.0.1:$DEEPGREEN_HARNESS_PORT,
//       speaks the line protocol (deepgreen_audit/collect/protocol.py, version 1),
//       takes its job (architecture, seed, recipe, data_dir...) from the HELLO reply.
//   deepgreen-libtorch probe --model TS --weights W --data DIR --dataset D --count N --out FILE
//       the parity hook: one eval-mode and one train-mode forward pass on the first N
//       test images, written as safetensors (deepgreen_audit/stacks/parity.py reads it).
//
// Inputs, all written by the Python side (`deepgreen data prepare`):
//   <data_dir>/<dataset>/{train,test}.npz, manifest.json     the canonical uint8 store
//   <data_dir>/weights/<arch>-c<classes>-s<seed>.torchscript.pt  the PyTorch model, scripted
//   <data_dir>/weights/<arch>-c<classes>-s<seed>.safetensors     the canonical initial weights
// The canonical weights are copied into the TorchScript module by name (every name must
// match), and their file's SHA-256 is what the run reports.  Precision policy: float32,
// TF32 off (set below).  Adam's betas and epsilon are PyTorch's (LibTorch's defaults,
// deepgreen_audit/stacks/conventions.py); every recipe number comes from the harness.

#include <torch/script.h>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

// ------------------------------------------------------------------ SHA-256

class Sha256 {
 public:
  void update(const uint8_t* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      block_[used_++] = data[i];
      if (used_ == 64) { compress(); used_ = 0; }
    }
    length_ += n;
  }
  std::string hex() {
    uint64_t bits = length_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (used_ != 56) update(&zero, 1);
    for (int i = 7; i >= 0; --i) { uint8_t b = uint8_t(bits >> (8 * i)); update(&b, 1); }
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (uint32_t word : h_)
      for (int i = 28; i >= 0; i -= 4) out += digits[(word >> i) & 0xF];
    return out;
  }

 private:
  static constexpr int kWordBits = 32;  // not-recipe: SHA-256 word size
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (kWordBits - n)); }
  void compress() {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(block_[4 * i]) << 24 | uint32_t(block_[4 * i + 1]) << 16 |
             uint32_t(block_[4 * i + 2]) << 8 | uint32_t(block_[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d; h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += h;
  }
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64];
  size_t used_ = 0;
  uint64_t length_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": cannot be opened (prepare it with 'deepgreen data prepare')");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 sha;
  sha.update(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return sha.hex();
}

// ------------------------------------------------------------------ minimal JSON

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;
  const Json& at(const std::string& key) const {
    for (const auto& f : fields)
      if (f.first == key) return f.second;
    fail("JSON object has no key " + key);
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse() { Json v = value(); space(); if (i_ != s_.size()) fail("trailing JSON text"); return v; }

 private:
  void space() { while (i_ < s_.size() && isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  char peek() { space(); if (i_ >= s_.size()) fail("truncated JSON"); return s_[i_]; }
  Json value() {
    Json v;
    char c = peek();
    if (c == '{') {
      v.kind = Json::Object; ++i_;
      if (peek() == '}') { ++i_; return v; }
      while (true) {
        std::string key = string();
        if (peek() != ':') fail("JSON: expected ':'");
        ++i_;
        v.fields.emplace_back(key, value());
        char d = peek(); ++i_;
        if (d == '}') return v;
        if (d != ',') fail("JSON: expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Json::Array; ++i_;
      if (peek() == ']') { ++i_; return v; }
      while (true) {
        v.items.push_back(value());
        char d = peek(); ++i_;
        if (d == ']') return v;
        if (d != ',') fail("JSON: expected ',' or ']'");
      }
    }
    if (c == '"') { v.kind = Json::String; v.text = string(); return v; }
    if (s_.compare(i_, 4, "true") == 0) { v.kind = Json::Bool; v.number = 1; i_ += 4; return v; }
    if (s_.compare(i_, 5, "false") == 0) { v.kind = Json::Bool; i_ += 5; return v; }
    if (s_.compare(i_, 4, "null") == 0) { i_ += 4; return v; }
    size_t end = i_;
    while (end < s_.size() && strchr("+-.0123456789eE", s_[end])) ++end;
    if (end == i_) fail("JSON: unexpected character");
    v.kind = Json::Number; v.number = std::stod(s_.substr(i_, end - i_)); i_ = end;
    return v;
  }
  std::string string() {
    if (peek() != '"') fail("JSON: expected a string");
    std::string out;
    for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_) {
      if (s_[i_] == '\\') {
        char e = s_[++i_];
        if (e == 'u') { out += '?'; i_ += 4; }  // names and hashes here are ASCII
        else out += (e == 'n' ? '\n' : e == 't' ? '\t' : e);
      } else {
        out += s_[i_];
      }
    }
    ++i_;
    return out;
  }
  const std::string& s_;
  size_t i_ = 0;
};

// ------------------------------------------------------------------ safetensors

struct NamedTensors {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::string sha256;
};

NamedTensors read_safetensors(const std::string& path) {
  std::string bytes = read_file(path);
  if (bytes.size() < 8) fail(path + ": not a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  if (8 + n > bytes.size()) fail(path + ": truncated safetensors header");
  Json header = JsonParser(bytes.substr(8, n)).parse();
  NamedTensors out;
  out.sha256 = sha256_hex(bytes);
  for (const auto& [name, info] : header.fields) {
    if (name == "__metadata__") continue;
    if (info.at("dtype").text != "F32") fail(path + ": " + name + " is not F32");
    std::vector<int64_t> shape;
    for (const auto& d : info.at("shape").items) shape.push_back(int64_t(d.number));
    size_t begin = size_t(info.at("data_offsets").items.at(0).number);
    size_t end = size_t(info.at("data_offsets").items.at(1).number);
    if (8 + n + end > bytes.size()) fail(path + ": " + name + " lies past the end of the file");
    auto t = torch::empty(shape, torch::kFloat32);
    if (size_t(t.numel()) * 4 != end - begin) fail(path + ": " + name + " has the wrong byte count");
    std::memcpy(t.data_ptr<float>(), bytes.data() + 8 + n + begin, end - begin);
    out.tensors.emplace_back(name, t);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [k, v] : metadata) {
    header += (first ? "" : ",") + std::string("\"") + k + "\":\"" + v + "\"";
    first = false;
  }
  header += "}";
  size_t offset = 0;
  std::string body;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().to(torch::kCPU).to(torch::kFloat32).contiguous();
    size_t bytes = size_t(t.numel()) * 4;
    header += ",\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) header += (d ? "," : "") + std::to_string(t.size(d));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    body.append(reinterpret_cast<const char*>(t.data_ptr<float>()), bytes);
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(char((n >> (8 * i)) & 0xFF));
  out << header << body;
  if (!out) fail(path + ": cannot be written");
}

// ------------------------------------------------------------------ the canonical store (npz)

struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::string bytes;
};

// np.savez writes an uncompressed ZIP (stored entries); each entry is a .npy file.
std::map<std::string, Array> read_npz(const std::string& path) {
  constexpr size_t kLocalHeader = 30;  // not-recipe: bytes of a ZIP local file header
  std::string z = read_file(path);
  std::map<std::string, Array> out;
  size_t pos = 0;
  auto u16 = [&](size_t p) { return uint32_t(uint8_t(z[p])) | uint32_t(uint8_t(z[p + 1])) << 8; };
  auto u32 = [&](size_t p) { return u16(p) | u16(p + 2) << 16; };
  while (pos + kLocalHeader <= z.size() && z.compare(pos, 4, "PK\x03\x04") == 0) {
    if (u16(pos + 8) != 0) fail(path + ": compressed npz entries are not supported (write it with np.savez)");
    uint32_t flags = u16(pos + 6), name_len = u16(pos + 26), extra_len = u16(pos + 28);
    std::string name = z.substr(pos + kLocalHeader, name_len);
    size_t p = pos + kLocalHeader + name_len + extra_len;
    if (z.compare(p, 6, "\x93NUMPY") != 0) fail(path + ": " + name + " is not a .npy entry");
    int major = uint8_t(z[p + 6]);
    size_t hlen = major == 1 ? u16(p + 8) : u32(p + 8);
    size_t hstart = p + (major == 1 ? 10 : 12);
    std::string h = z.substr(hstart, hlen);
    Array a;
    size_t d = h.find("'descr': '") + 10;
    a.descr = h.substr(d, h.find('\'', d) - d);
    if (h.find("'fortran_order': False") == std::string::npos) fail(path + ": Fortran-ordered array");
    size_t s = h.find("'shape': (") + 10, e = h.find(')', s);
    std::stringstream dims(h.substr(s, e - s));
    std::string dim;
    int64_t count = 1;
    while (std::getline(dims, dim, ','))
      if (dim.find_first_not_of(' ') != std::string::npos) { a.shape.push_back(std::stoll(dim)); count *= a.shape.back(); }
    size_t item = a.descr == "|u1" ? 1 : (a.descr == "<i8" ? 8 : 0);
    if (!item) fail(path + ": " + name + " has dtype " + a.descr + " (expected |u1 or <i8)");
    size_t data = hstart + hlen;
    if (data + count * item > z.size()) fail(path + ": " + name + " is truncated");
    a.bytes = z.substr(data, count * item);
    pos = data + count * item;
    if (flags & 8) {  // a data descriptor follows the data
      if (z.compare(pos, 4, "PK\x07\x08") == 0) pos += 4;
      pos += 4 + 16;  // crc + zip64 sizes (np.savez forces zip64)
    }
    out[name.substr(0, name.size() - 4)] = std::move(a);
  }
  if (!out.count("x") || !out.count("y")) fail(path + ": needs arrays x and y");
  return out;
}

struct Split {
  torch::Tensor x;  // uint8 N x H x W x 3
  torch::Tensor y;  // int64 N
};

struct Store {
  Split train, test;
  std::string fingerprint;
};

Store load_store(const std::string& data_dir, const std::string& dataset) {
  std::string folder = data_dir + "/" + dataset;
  Json manifest = JsonParser(read_file(folder + "/manifest.json")).parse();
  Store store;
  Sha256 sha;
  for (auto [name, split] : {std::pair<std::string, Split*>{"train", &store.train}, {"test", &store.test}}) {
    auto arrays = read_npz(folder + "/" + name + ".npz");
    Array& x = arrays["x"];
    Array& y = arrays["y"];
    sha.update(reinterpret_cast<const uint8_t*>(x.bytes.data()), x.bytes.size());
    sha.update(reinterpret_cast<const uint8_t*>(y.bytes.data()), y.bytes.size());
    split->x = torch::empty(x.shape, torch::kUInt8);
    std::memcpy(split->x.data_ptr<uint8_t>(), x.bytes.data(), x.bytes.size());
    split->y = torch::empty(y.shape, torch::kInt64);
    std::memcpy(split->y.data_ptr<int64_t>(), y.bytes.data(), y.bytes.size());
  }
  store.fingerprint = sha.hex();
  if (store.fingerprint != manifest.at("fingerprint_sha256").text)
    fail(folder + ": pixels and labels have fingerprint " + store.fingerprint + ", the manifest says " +
         manifest.at("fingerprint_sha256").text);
  return store;
}

// uint8 NHWC -> float32 NCHW in [0, 1] (the specification: divided by 255, no mean/std).
torch::Tensor unit_interval(const torch::Tensor& x_uint8) {
  return x_uint8.permute({0, 3, 1, 2}).to(torch::kFloat32).div(255.0).contiguous();
}

// ------------------------------------------------------------------ the model

void load_canonical(torch::jit::script::Module& module, const NamedTensors& weights) {
  std::map<std::string, torch::Tensor> own;
  for (const auto& p : module.named_parameters(true)) own[p.name] = p.value;
  for (const auto& b : module.named_buffers(true))
    if (b.name.find("num_batches_tracked") == std::string::npos) own[b.name] = b.value;
  if (own.size() != weights.tensors.size())
    fail("the TorchScript module has " + std::to_string(own.size()) + " tensors, the export " +
         std::to_string(weights.tensors.size()));
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : weights.tensors) {
    auto it = own.find(name);
    if (it == own.end()) fail("the TorchScript module has no tensor " + name);
    if (it->second.sizes() != tensor.sizes()) fail(name + ": shape differs from the export");
    it->second.copy_(tensor);
  }
}

// Train mode with dropout off (the parity probe: each framework draws its own masks).
void train_without_dropout(torch::jit::script::Module& module) {
  module.train(true);
  for (auto m : module.named_modules()) {
    auto type_name = m.value.type()->name();
    if (type_name && type_name->qualifiedName().find("Dropout") != std::string::npos) m.value.train(false);
  }
}

std::string weights_stem(const std::string& data_dir, const std::string& arch, const std::string& classes,
                         const std::string& seed) {
  return data_dir + "/weights/" + arch + "-c" + classes + "-s" + seed;
}

// ------------------------------------------------------------------ the line protocol

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string percent_encode(const std::string& s) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') out += char(c);
    else { out += '%'; out += digits[c >> 4]; out += digits[c & 15]; }
  }
  return out;
}

// Python's repr() of a float: the canonical number form of the package.
std::string python_repr(double value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  bool negative = mantissa[0] == '-';
  if (negative) mantissa = mantissa.substr(1);
  std::string digits;
  for (char c : mantissa) if (c != '.') digits += c;
  std::string out;
  if (exponent >= -5 + 1 && exponent < 16) {
    if (exponent >= 0) {
      if (int(digits.size()) <= exponent + 1) out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
      else out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    } else {
      out = "0." + std::string(-exponent - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char exp[8];
    snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return (negative ? "-" : "") + out;
}

class HarnessClient {
 public:
  explicit HarnessClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      fail("cannot connect to the harness on port " + std::to_string(port));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~HarnessClient() { if (fd_ >= 0) close(fd_); }

  // Send one request; return the reply after "OK " or throw with the harness's error.
  std::string request(const std::string& line) {
    std::string out = line + "\n";
    if (send(fd_, out.data(), out.size(), 0) != ssize_t(out.size())) fail("the harness went away");
    std::string reply;
    char c;
    while (true) {
      ssize_t n = recv(fd_, &c, 1, 0);
      if (n <= 0) fail("the harness closed the connection");
      if (c == '\n') break;
      reply += c;
    }
    if (reply.rfind("OK ", 0) != 0) fail("harness: " + reply + " (for: " + line.substr(0, 80) + ")");
    return reply.substr(3);
  }

 private:
  int fd_ = -1;
};

std::map<std::string, std::string> hello(HarnessClient& client) {
  std::string reply = client.request("HELLO 1 cpp-libtorch");
  std::map<std::string, std::string> params;
  std::stringstream tokens(reply);
  std::string token;
  tokens >> token >> token;  // "HELLO" "1"
  while (tokens >> token) {
    size_t eq = token.find('=');
    params[token.substr(0, eq)] = percent_decode(token.substr(eq + 1));
  }
  return params;
}

const std::string& param(const std::map<std::string, std::string>& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) fail("the harness's HELLO carries no " + key);
  return it->second;
}

struct Batch {
  torch::Tensor x, y;
};

// Batches prepared by `workers` threads ahead of the training loop (the spec's loader workers).
class Loader {
 public:
  Loader(const Split& split, int64_t batch_size, int workers, torch::Tensor order, int64_t limit)
      : split_(split), batch_size_(batch_size), workers_(std::max(1, workers)), order_(std::move(order)) {
    batches_ = (split.y.size(0) + batch_size - 1) / batch_size;
    if (limit > 0) batches_ = std::min(batches_, limit);
    for (int64_t i = 0; i < std::min<int64_t>(workers_, batches_); ++i) schedule();
  }
  bool next(Batch& batch) {
    if (pending_.empty()) return false;
    batch = pending_.front().get();
    pending_.erase(pending_.begin());
    if (scheduled_ < batches_) schedule();
    return true;
  }

 private:
  void schedule() {
    int64_t start = scheduled_++ * batch_size_;
    int64_t end = std::min(start + batch_size_, split_.y.size(0));
    torch::Tensor idx = order_.slice(0, start, end);
    pending_.push_back(std::async(std::launch::async, [this, idx] {
      return Batch{unit_interval(split_.x.index_select(0, idx)), split_.y.index_select(0, idx)};
    }));
  }
  const Split& split_;
  int64_t batch_size_;
  int workers_;
  torch::Tensor order_;
  int64_t batches_ = 0, scheduled_ = 0;
  std::vector<std::future<Batch>> pending_;
};

void set_precision_policy() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

// Where LibTorch places this stack's model and batches, and its cuDNN and TF32 state (the runs
// columns device, device_name, cudnn_enabled, tf32_enabled), as the SET tokens of the protocol;
// `deepgreen-libtorch device` prints them for preflight before a campaign's first run.
std::string device_tokens(const torch::Device& device) {
  const bool cuda = device.is_cuda();
  const bool cudnn = cuda && at::globalContext().userEnabledCuDNN() && torch::cuda::cudnn_is_available();
  const bool tf32 = cuda && (at::globalContext().allowTF32CuBLAS() || at::globalContext().allowTF32CuDNN());
  return std::string("device=") + (cuda ? "cuda" : "cpu") + " device_name=" + percent_encode(device.str()) +
         " cudnn_enabled=" + (cudnn ? "true" : "false") + " tf32_enabled=" + (tf32 ? "true" : "false");
}

torch::Device run_device() { return torch::cuda::is_available() ? torch::kCUDA : torch::kCPU; }

int device_report() {
  set_precision_policy();
  std::cout << device_tokens(run_device()) << std::endl;
  return 0;
}

int train() {
  const char* port = std::getenv("DEEPGREEN_HARNESS_PORT");
  if (!port) fail("DEEPGREEN_HARNESS_PORT is not set: run this stack under the DeepGreen runner");
  HarnessClient client(std::stoi(port));
  auto job = hello(client);
  if (param(job, "optimizer") != "adam" || param(job, "lr_schedule") != "none" ||
      param(job, "input_scaling") != "unit-interval" || param(job, "input_normalisation") != "none")
    fail("this stack implements Adam, no schedule, unit-interval inputs without normalisation only");
  set_precision_policy();
  const std::string data_dir = param(job, "data_dir");
  const int64_t seed = std::stoll(param(job, "seed"));
  torch::manual_seed(uint64_t(seed));
  torch::Device device = run_device();
  Store store = load_store(data_dir, param(job, "dataset"));
  std::string stem = weights_stem(data_dir, param(job, "architecture"), param(job, "classes"), param(job, "seed"));
  auto module = torch::jit::load(stem + ".torchscript.pt");
  NamedTensors weights = read_safetensors(stem + ".safetensors");
  load_canonical(module, weights);
  module.to(device);
  std::vector<torch::Tensor> params;
  for (const auto& p : module.parameters()) params.push_back(p);
  const double lr = std::stod(param(job, "learning_rate"));
  const double weight_decay = std::stod(param(job, "weight_decay"));
  torch::optim::Adam optimizer(params, torch::optim::AdamOptions(lr).weight_decay(weight_decay));
  const int64_t batch_size = std::stoll(param(job, "batch_size"));
  const int64_t eval_batch_size = std::stoll(param(job, "eval_batch_size"));
  const int workers = std::stoi(param(job, "loader_workers"));
  const int epochs = std::stoi(param(job, "epochs"));
  const int64_t max_train = job.count("max_train_batches") ? std::stoll(job["max_train_batches"]) : 0;
  const int64_t max_eval = job.count("max_eval_batches") ? std::stoll(job["max_eval_batches"]) : 0;

  std::string set = "SET";
  for (const char* key : {"optimizer", "learning_rate", "batch_size", "lr_schedule", "weight_decay",
                          "input_scaling", "input_normalisation", "loader_workers", "eval_batch_size",
                          "precision_policy"})
    set += std::string(" ") + key + "=" + percent_encode(param(job, key));
  set += " input_resolution_px=" + std::to_string(store.train.x.size(1));
  set += " initial_weights_sha256=" + weights.sha256 + " data_fingerprint_sha256=" + store.fingerprint;
  set += " framework=libtorch framework_version=" + percent_encode(TORCH_VERSION);
  set += std::string(" cudnn_available=") + (torch::cuda::cudnn_is_available() ? "true" : "false");
  set += " " + device_tokens(device);
  client.request(set);

  auto sync = [&] { if (device.is_cuda()) torch::cuda::synchronize(); };
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    std::string e = std::to_string(epoch);
    sync();
    client.request("BEGIN " + e + " train");
    module.train(true);
    Loader train(store.train, batch_size, workers, torch::randperm(store.train.y.size(0)), max_train);
    double total = 0;
    int64_t seen = 0;
    Batch b;
    while (train.next(b)) {
      optimizer.zero_grad();
      auto logits = module.forward({b.x.to(device)}).toTensor();
      auto loss = torch::nn::functional::cross_entropy(logits, b.y.to(device));
      loss.backward();
      optimizer.step();
      total += loss.item<double>() * double(b.y.size(0));
      seen += b.y.size(0);
    }
    sync();
    client.request("END " + e + " train samples=" + std::to_string(seen) + " loss=" + python_repr(total / double(seen)));
    client.request("BEGIN " + e + " eval");
    module.eval();
    Loader test(store.test, eval_batch_size, workers, torch::arange(store.test.y.size(0)), max_eval);
    total = 0;
    seen = 0;
    int64_t correct = 0;
    {
      torch::NoGradGuard no_grad;
      while (test.next(b)) {
        auto y = b.y.to(device);
        auto logits = module.forward({b.x.to(device)}).toTensor();
        total += torch::nn::functional::cross_entropy(logits, y).item<double>() * double(b.y.size(0));
        correct += logits.argmax(1).eq(y).sum().item<int64_t>();
        seen += b.y.size(0);
      }
    }
    sync();
    client.request("END " + e + " eval samples=" + std::to_string(seen) + " loss=" + python_repr(total / double(seen)) +
                   " accuracy=" + python_repr(double(correct) / double(seen)));
  }
  client.request("BYE");
  return 0;
}

int probe(const std::map<std::string, std::string>& args) {
  set_precision_policy();
  for (const char* key : {"--model", "--weights", "--data", "--dataset", "--count", "--out"})
    if (!args.count(key)) fail(std::string("probe needs ") + key);
  Store store = load_store(args.at("--data"), args.at("--dataset"));
  int64_t count = std::stoll(args.at("--count"));
  Loader loader(store.test, count, 1, torch::arange(store.test.y.size(0)), 1);
  Batch b;
  loader.next(b);
  auto module = torch::jit::load(args.at("--model"));
  NamedTensors weights = read_safetensors(args.at("--weights"));
  load_canonical(module, weights);
  std::vector<std::pair<std::string, torch::Tensor>> out{{"input", b.x}, {"labels", b.y.to(torch::kFloat32)}};
  for (const auto& p : module.named_parameters(true)) out.emplace_back("loaded." + p.name, p.value.clone());
  for (const auto& p : module.named_buffers(true))
    if (p.name.find("num_batches_tracked") == std::string::npos) out.emplace_back("loaded." + p.name, p.value.clone());
  torch::NoGradGuard no_grad;
  module.eval();
  auto logits = module.forward({b.x}).toTensor();
  out.emplace_back("eval.logits", logits);
  out.emplace_back("eval.loss", torch::nn::functional::cross_entropy(logits, b.y).reshape({1}));
  train_without_dropout(module);
  logits = module.forward({b.x}).toTensor();
  out.emplace_back("train.logits", logits);
  out.emplace_back("train.loss", torch::nn::functional::cross_entropy(logits, b.y).reshape({1}));
  for (const auto& p : module.named_parameters(true)) out.emplace_back("state." + p.name, p.value);
  for (const auto& p : module.named_buffers(true))
    if (p.name.find("num_batches_tracked") == std::string::npos) out.emplace_back("state." + p.name, p.value);
  write_safetensors(args.at("--out"), out,
                    {{"weights_sha256", weights.sha256}, {"data_fingerprint_sha256", store.fingerprint},
                     {"framework_version", TORCH_VERSION}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "train") return train();
    if (mode == "device") return device_report();
    if (mode == "probe") {
      std::map<std::string, std::string> args;
      for (int i = 2; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
      return probe(args);
    }
    std::cerr << "usage: deepgreen-libtorch train   (under the DeepGreen runner)\n"
                 "       deepgreen-libtorch device  (the device it would use here, one line)\n"
                 "       deepgreen-libtorch probe --model TS --weights W --data DIR --dataset D --count N --out FILE\n";
    return 2;
  } catch (const std::exception& exc) {
    std::cerr << "deepgreen-libtorch: error: " << exc.what() << "\n";
    return 1;
  }
}
