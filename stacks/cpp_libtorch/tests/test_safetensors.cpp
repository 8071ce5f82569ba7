// The safetensors layout: the header the probe writes reads back, byte for byte as the
// stack wrote it before (compact JSON, metadata first, space padding to 8), and a broken
// file is refused naming what is wrong.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "safetensors.hpp"

using deepgreen::parse_safetensors;
using deepgreen::safetensors_header;
using deepgreen::TensorEntry;

namespace {

std::string with_length(const std::string& header) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char((header.size() >> (8 * i)) & 0xFF);
  return out + header;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "w.safetensors");
  } catch (const std::runtime_error& exc) {
    return exc.what();
  }
  return "";
}

TEST(Safetensors, TheHeaderIsTheCompactJsonOfBefore) {
  const std::vector<TensorEntry> entries = {{"input", "F32", {2, 2}, 0, 16}, {"eval.loss", "F32", {1}, 16, 20},
                                            {"scalar", "F32", {}, 20, 24}};
  const std::string bytes = safetensors_header(entries, {{"weights_sha256", "ab"}, {"framework_version", "2.13.0"}});
  const std::string json =
      R"({"__metadata__":{"framework_version":"2.13.0","weights_sha256":"ab"},)"
      R"("input":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("eval.loss":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
      R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[20,24]}})";
  std::string padded = json;
  while (padded.size() % 8) padded += ' ';
  EXPECT_EQ(bytes, with_length(padded));
  EXPECT_EQ(safetensors_header({}, {}).substr(8), R"({"__metadata__":{}}     )");
}

TEST(Safetensors, WhatIsWrittenReadsBack) {
  const std::vector<TensorEntry> entries = {{"conv1.weight", "F32", {4, 3, 1, 1}, 0, 48}, {"fc.bias", "F32", {5}, 48, 68}};
  const std::string file = safetensors_header(entries, {{"k", "v \"quoted\""}}) + std::string(68, '\0');
  const auto layout = parse_safetensors(file, "w.safetensors");
  EXPECT_EQ(layout.data_start, file.size() - 68);
  EXPECT_EQ(layout.metadata.at("k"), "v \"quoted\"");
  ASSERT_EQ(layout.entries.size(), 2u);
  EXPECT_EQ(layout.entries[0].name, "conv1.weight");
  EXPECT_EQ(layout.entries[0].shape, (std::vector<int64_t>{4, 3, 1, 1}));
  EXPECT_EQ(layout.entries[1].name, "fc.bias");
  EXPECT_EQ(layout.entries[1].begin, 48u);
  EXPECT_EQ(layout.entries[1].end, 68u);
  EXPECT_EQ(layout.entries[1].dtype, "F32");
}

TEST(Safetensors, RefusesBrokenFiles) {
  EXPECT_EQ(error_of("short"), "w.safetensors: not a safetensors file");
  EXPECT_EQ(error_of(with_length("{}").substr(0, 9)), "w.safetensors: truncated safetensors header");
  EXPECT_EQ(error_of(with_length("[1]")), "w.safetensors: the safetensors header is not a JSON object");
  EXPECT_EQ(error_of(with_length(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + "abc"),
            "w.safetensors: a lies past the end of the file");
  EXPECT_EQ(error_of(with_length(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})")),
            "w.safetensors: a: data_offsets end before they begin");
  EXPECT_EQ(error_of(with_length(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})")),
            "w.safetensors: a: shape must hold non-negative integers");
  EXPECT_EQ(error_of(with_length(R"({"a":{"shape":[1],"data_offsets":[0,0]}})")),
            "w.safetensors: a: the JSON object has no key dtype");
  EXPECT_EQ(error_of(with_length(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})")),
            "w.safetensors: a: data_offsets is not [begin, end]");
  EXPECT_EQ(error_of(with_length("{not json")).rfind("w.safetensors: not valid JSON (", 0), 0u);
}

}  // namespace
