// The JSON reader (nlohmann-json behind parse_json / json_at / json_string): escapes,
// \u escapes and surrogate pairs as UTF-8, errors that name the file.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "json.hpp"

using deepgreen::Json;
using deepgreen::parse_json;

namespace {

std::string message_of(const std::string& text) {
  try {
    parse_json(text, "manifest.json");
  } catch (const std::runtime_error& exc) {
    return exc.what();
  }
  return "";
}

TEST(Json, ReadsAManifest) {
  const Json j = parse_json(
      R"({"dataset": "digits", "fingerprint_sha256": "ab12", "splits": {"train": 1437, "test": 360},
          "side": 8, "scale": 0.5, "flags": [true, false, null]})",
      "manifest.json");
  EXPECT_EQ(deepgreen::json_string(j, "fingerprint_sha256", "manifest.json"), "ab12");
  EXPECT_EQ(j["splits"]["train"].get<int>(), 1437);
  EXPECT_DOUBLE_EQ(j["scale"].get<double>(), 0.5);
  EXPECT_TRUE(j["flags"][0].get<bool>());
  EXPECT_TRUE(j["flags"][2].is_null());
  // the keys keep the text's order
  std::string order;
  for (const auto& [key, value] : j.items()) order += key + ",";
  EXPECT_EQ(order, "dataset,fingerprint_sha256,splits,side,scale,flags,");
}

TEST(Json, EscapesAndUnicodeEscapesBecomeUtf8) {
  const Json j = parse_json(R"({"s": "a\"b\\c\/d\n\t\r\b\f", "e": "caf\u00e9", "snow": "\u2603",
                                "pair": "\ud83d\ude00", "nul": "x\u0000y"})", "t.json");
  EXPECT_EQ(j["s"].get<std::string>(), "a\"b\\c/d\n\t\r\b\f");
  EXPECT_EQ(j["e"].get<std::string>(), "caf\xc3\xa9");
  EXPECT_EQ(j["snow"].get<std::string>(), "\xe2\x98\x83");
  EXPECT_EQ(j["pair"].get<std::string>(), "\xf0\x9f\x98\x80");  // U+1F600 from its surrogate pair
  EXPECT_EQ(j["nul"].get<std::string>(), std::string("x\0y", 3));
  EXPECT_EQ(parse_json("\"\xc3\xa9\"", "t.json").get<std::string>(), "\xc3\xa9");  // raw UTF-8 as is
}

TEST(Json, ALoneSurrogateOrBadTextIsAnErrorNamingTheFile) {
  for (const char* bad : {R"(["\ud83d"])", R"(["\ude00"])", R"(["\ud83dx"])", R"(["\u12"])", "{\"a\": 1,}",
                          "{\"a\" 1}", "[1, 2", "", "nul", "{} trailing", "\"\xff\""}) {
    const std::string message = message_of(bad);
    EXPECT_EQ(message.rfind("manifest.json: not valid JSON (", 0), 0u) << bad << " -> " << message;
  }
}

TEST(Json, MissingKeysAndWrongTypesNameTheKey) {
  const Json j = parse_json(R"({"fingerprint_sha256": 7, "list": []})", "m.json");
  EXPECT_THROW(deepgreen::json_at(j, "absent", "m.json"), std::runtime_error);
  try {
    deepgreen::json_string(j, "fingerprint_sha256", "m.json");
    ADD_FAILURE();
  } catch (const std::runtime_error& exc) {
    EXPECT_STREQ(exc.what(), "m.json: fingerprint_sha256 is not a string");
  }
  try {
    deepgreen::json_at(j, "absent", "m.json");
  } catch (const std::runtime_error& exc) {
    EXPECT_STREQ(exc.what(), "m.json: the JSON object has no key absent");
  }
  EXPECT_THROW(deepgreen::json_at(j["list"], "x", "m.json"), std::runtime_error);
}

TEST(Json, Numbers) {
  const Json j = parse_json("[0, -3, 1e-5, 2.5E+3, 18446744073709551615, 1.7976931348623157e308]", "n.json");
  EXPECT_EQ(j[1].get<int>(), -3);
  EXPECT_DOUBLE_EQ(j[2].get<double>(), 1e-5);
  EXPECT_DOUBLE_EQ(j[3].get<double>(), 2500.0);
  EXPECT_EQ(j[4].get<unsigned long long>(), 18446744073709551615ull);
  EXPECT_TRUE(j[0].is_number_unsigned() && !j[1].is_number_unsigned());
}

}  // namespace
