#include "sha256.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace deepgreen {

namespace {
[[noreturn]] void openssl_failed(const char* what) {
  throw std::runtime_error(std::string("SHA-256: OpenSSL's ") + what + " failed");
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) openssl_failed("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    openssl_failed("EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t size) {
  if (finished_) throw std::logic_error("SHA-256: update after hex()");
  if (size && EVP_DigestUpdate(ctx_, data, size) != 1) openssl_failed("EVP_DigestUpdate");
}

std::string Sha256::hex() {
  if (finished_) throw std::logic_error("SHA-256: hex() twice");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &size) != 1) openssl_failed("EVP_DigestFinal_ex");
  finished_ = true;
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 sha;
  sha.update(bytes);
  return sha.hex();
}

}  // namespace deepgreen
