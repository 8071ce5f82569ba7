// SHA-256 through OpenSSL's EVP interface: the initial weights' file hash and the canonical
// store's fingerprint (the pixels and labels of train then test, hashed in one stream).
#pragma once

#include <cstddef>
#include <string>

struct evp_md_ctx_st;

namespace deepgreen {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(const std::string& bytes) { update(bytes.data(), bytes.size()); }
  // The digest of everything updated so far, as 64 lower-case hex digits; ends the stream.
  std::string hex();

 private:
  evp_md_ctx_st* ctx_;
  bool finished_ = false;
};

std::string sha256_hex(const std::string& bytes);

}  // namespace deepgreen
