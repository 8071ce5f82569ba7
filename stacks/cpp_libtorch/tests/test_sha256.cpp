// SHA-256 (OpenSSL EVP) against the FIPS 180-2 / NIST example vectors, fed whole and in
// pieces that straddle the 64-byte block boundary.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "sha256.hpp"

using deepgreen::Sha256;
using deepgreen::sha256_hex;

namespace {

const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const char* kTwoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
const char* kTwoBlocksHash = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
const char* kMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), kEmpty);
  EXPECT_EQ(sha256_hex("abc"), kAbc);
  EXPECT_EQ(sha256_hex(kTwoBlocks), kTwoBlocksHash);
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), kMillionA);
  EXPECT_EQ(sha256_hex("The quick brown fox jumps over the lazy dog"),
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
  EXPECT_EQ(sha256_hex(std::string("\0", 1)), "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
}

TEST(Sha256, PiecesHashAsTheWhole) {
  const std::string text(1000000, 'a');
  for (size_t piece : {1u, 3u, 55u, 63u, 64u, 65u, 1000u, 99999u}) {
    Sha256 sha;
    for (size_t at = 0; at < text.size(); at += piece) sha.update(text.substr(at, piece));
    EXPECT_EQ(sha.hex(), kMillionA) << "pieces of " << piece;
  }
  Sha256 sha;  // the store's fingerprint: several arrays in one stream
  sha.update("ab", 2);
  sha.update(std::string());
  sha.update("c", 1);
  EXPECT_EQ(sha.hex(), kAbc);
}

TEST(Sha256, FinishingTwiceIsAProgrammingError) {
  Sha256 sha;
  sha.update("abc");
  EXPECT_EQ(sha.hex(), kAbc);
  EXPECT_THROW(sha.hex(), std::logic_error);
  EXPECT_THROW(sha.update("x"), std::logic_error);
}

}  // namespace
