// The npz reader on archives NumPy wrote (fixtures/, from make_fixtures.py) and the .npy
// parser on headers made here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io.hpp"
#include "npz.hpp"

using deepgreen::NpyArray;
using deepgreen::parse_npy;
using deepgreen::read_npz;

namespace {

const std::string kFixtures = DEEPGREEN_FIXTURES;

template <typename T>
std::vector<T> values(const NpyArray& a) {
  std::vector<T> out(a.bytes.size() / sizeof(T));
  std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
  return out;
}

std::string error_of(const std::string& path) {
  try {
    read_npz(path);
  } catch (const std::runtime_error& exc) {
    return exc.what();
  }
  return "";
}

// A version-1 .npy file with `header` (padded as NumPy pads it) and `data`.
std::string npy(const std::string& header, const std::string& data) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xFF);
  out += char(h.size() >> 8);
  return out + h + data;
}

TEST(Npz, ReadsTheStoreLayoutAsNpSavezWritesIt) {
  auto arrays = read_npz(kFixtures + "/store.npz");
  ASSERT_EQ(arrays.size(), 2u);
  const NpyArray& x = arrays.at("x");
  EXPECT_EQ(x.descr, "|u1");
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 3, 3, 3}));
  ASSERT_EQ(x.bytes.size(), 54u);
  for (size_t i = 0; i < x.bytes.size(); ++i) EXPECT_EQ(uint8_t(x.bytes[i]), i);
  const NpyArray& y = arrays.at("y");
  EXPECT_EQ(y.descr, "<i8");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{7, -1}));
}

TEST(Npz, ReadsDeflatedEntriesAndOtherDtypes) {
  auto arrays = read_npz(kFixtures + "/compressed.npz");
  ASSERT_EQ(arrays.size(), 5u);
  EXPECT_EQ(arrays.at("f32").shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values<float>(arrays.at("f32")), (std::vector<float>{0.5f, -2.0f, 3.25f}));
  EXPECT_EQ(values<double>(arrays.at("f64")), (std::vector<double>{1.0, 2.5}));
  EXPECT_EQ(values<int16_t>(arrays.at("i16")), (std::vector<int16_t>{-2, 3, 300}));
  EXPECT_TRUE(arrays.at("scalar").shape.empty());
  EXPECT_EQ(arrays.at("scalar").bytes, std::string(1, char(42)));
  EXPECT_EQ(arrays.at("empty").shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(arrays.at("empty").bytes.empty());
}

TEST(Npz, RefusesWhatItCannotReadNamingTheFile) {
  EXPECT_EQ(error_of(kFixtures + "/absent.npz"),
            kFixtures + "/absent.npz: cannot be opened (prepare it with 'deepgreen data prepare')");
  EXPECT_EQ(error_of(kFixtures + "/not_a_zip.npz").rfind(kFixtures + "/not_a_zip.npz: not a readable npz (ZIP) file", 0), 0u);
  EXPECT_EQ(error_of(kFixtures + "/fortran.npz"), kFixtures + "/fortran.npz: f.npy: Fortran-ordered array");
  EXPECT_EQ(error_of(kFixtures + "/bigendian.npz"),
            kFixtures + "/bigendian.npz: b.npy has dtype >i4, which this reader does not know");
  const std::string crc = error_of(kFixtures + "/damaged_crc.npz");
  EXPECT_NE(crc.find("x.npy cannot be read"), std::string::npos) << crc;
  EXPECT_NE(crc.find("CRC"), std::string::npos) << crc;
}

TEST(Npy, ParsesVersionsOneToThree) {
  const std::string data("\x01\x00\x00\x00\x02\x00\x00\x00", 8);
  const std::string v1 = npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", data);
  NpyArray a = parse_npy(v1, "v1");
  EXPECT_EQ(a.descr, "<i4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{1, 2}));
  for (char major : {'\x02', '\x03'}) {  // a 4-byte header length
    const std::string header = v1.substr(10, v1.size() - 10 - data.size());
    std::string v = std::string("\x93NUMPY", 6) + major + '\0';
    v += char(header.size() & 0xFF);
    v += char(header.size() >> 8);
    v += std::string(2, '\0');
    v += header + data;
    EXPECT_EQ(values<int32_t>(parse_npy(v, "v")), (std::vector<int32_t>{1, 2}));
  }
  // spacing and key order as other writers put them
  a = parse_npy(npy("{'shape':(1,2),'fortran_order':False,'descr':'|u1'}", "ab"), "compact");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.bytes, "ab");
}

TEST(Npy, RefusesBrokenHeadersAndData) {
  const std::string good = "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }";
  auto error = [](const std::string& bytes) {
    try {
      parse_npy(bytes, "e.npy");
    } catch (const std::runtime_error& exc) {
      return std::string(exc.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(npy(good, "abc")), "");
  EXPECT_EQ(error("PK\x03\x04 not npy"), "e.npy is not a .npy entry");
  EXPECT_EQ(error(npy(good, "ab")), "e.npy has 2 bytes of data, its shape and dtype need 3 (truncated)");
  EXPECT_EQ(error(npy(good, "abcd")), "e.npy has 4 bytes of data, its shape and dtype need 3");
  EXPECT_EQ(error(npy("{'descr': '|u1', 'fortran_order': False}", "")), "e.npy: the .npy header has no 'shape'");
  EXPECT_EQ(error(npy("{'descr': '|u1', 'fortran_order': True, 'shape': (3,)}", "abc")),
            "e.npy: Fortran-ordered array");
  EXPECT_EQ(error(npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}", "abcd")),
            "e.npy: the .npy dtype [('a', '<i4')] is not a simple dtype");
  EXPECT_EQ(error(npy("{'descr': '|u1', 'fortran_order': False, 'shape': (-3,)}", "abc")),
            "e.npy: the .npy shape (-3,) is not a tuple of sizes");
  EXPECT_EQ(error(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387, 4096)}", "")),
            "e.npy: the .npy shape is too large");
  std::string huge_header = npy(good, "abc");
  huge_header[8] = '\xff';
  huge_header[9] = '\x7f';
  EXPECT_EQ(error(huge_header), "e.npy: truncated .npy header");
  EXPECT_EQ(error(std::string("\x93NUMPY\x04\x00\x00\x00", 10)), "e.npy: .npy format version 4 is not supported");
}

TEST(Io, ReadFileNamesHowToMakeAMissingInput) {
  EXPECT_EQ(deepgreen::read_file(kFixtures + "/not_a_zip.npz"), "this is not a ZIP archive\n");
  EXPECT_THROW(deepgreen::read_file(kFixtures + "/absent"), std::runtime_error);
}

}  // namespace
