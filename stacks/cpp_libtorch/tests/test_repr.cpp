// python_repr against Python's repr() of the same doubles (fixtures/repr_vectors.txt,
// written by make_fixtures.py: edge cases and a few thousand random bit patterns).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "repr.hpp"

namespace {

double from_bits(const std::string& hex) {
  const uint64_t bits = std::stoull(hex, nullptr, 16);
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(Repr, MatchesPythonOnEveryVector) {
  std::ifstream in(std::string(DEEPGREEN_FIXTURES) + "/repr_vectors.txt");
  ASSERT_TRUE(in) << "fixtures/repr_vectors.txt is missing: run tests/make_fixtures.py";
  std::string line;
  int checked = 0, wrong = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string hex, expected;
    fields >> hex >> expected;
    const std::string got = deepgreen::python_repr(from_bits(hex));
    if (got != expected && ++wrong <= 20) ADD_FAILURE() << hex << ": Python writes " << expected << ", we wrote " << got;
    ++checked;
  }
  EXPECT_GT(checked, 4000);
  EXPECT_EQ(wrong, 0);
}

TEST(Repr, TheProtocolsForms) {
  EXPECT_EQ(deepgreen::python_repr(1e-5), "1e-05");
  EXPECT_EQ(deepgreen::python_repr(2e-4), "0.0002");
  EXPECT_EQ(deepgreen::python_repr(3.0), "3.0");
  EXPECT_EQ(deepgreen::python_repr(1e16), "1e+16");
  EXPECT_EQ(deepgreen::python_repr(1e100), "1e+100");
  EXPECT_EQ(deepgreen::python_repr(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(deepgreen::python_repr(-0.25), "-0.25");
  EXPECT_EQ(deepgreen::python_repr(-0.0), "-0.0");
  EXPECT_EQ(deepgreen::python_repr(0.1), "0.1");
  EXPECT_EQ(deepgreen::python_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(deepgreen::python_repr(5e-324), "5e-324");
}

TEST(Repr, NonFiniteValuesAsPythonWritesThem) {
  // The harness refuses them as a loss (ERR bad-value): they are sent, not thrown.
  EXPECT_EQ(deepgreen::python_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(deepgreen::python_repr(-std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(deepgreen::python_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(deepgreen::python_repr(-std::numeric_limits<double>::infinity()), "-inf");
}

}  // namespace
