// JSON through nlohmann-json (Debian: nlohmann-json3-dev): the store's manifest.json and the
// safetensors headers.  ordered_json keeps an object's keys in the order of the text.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace deepgreen {

using Json = nlohmann::ordered_json;

// The JSON value of `text`; an error names `what` (a file) and where the text went wrong.
Json parse_json(const std::string& text, const std::string& what);
// The member `key` of the object `object`; an error names `what` and the key.
const Json& json_at(const Json& object, const std::string& key, const std::string& what);
// The string member `key`.
std::string json_string(const Json& object, const std::string& key, const std::string& what);

}  // namespace deepgreen
