#include "json.hpp"

#include <stdexcept>

namespace deepgreen {

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& exc) {
    throw std::runtime_error(what + ": not valid JSON (" + exc.what() + ")");
  }
}

const Json& json_at(const Json& object, const std::string& key, const std::string& what) {
  if (!object.is_object()) throw std::runtime_error(what + ": expected a JSON object holding " + key);
  auto it = object.find(key);
  if (it == object.end()) throw std::runtime_error(what + ": the JSON object has no key " + key);
  return *it;
}

std::string json_string(const Json& object, const std::string& key, const std::string& what) {
  const Json& value = json_at(object, key, what);
  if (!value.is_string()) throw std::runtime_error(what + ": " + key + " is not a string");
  return value.get<std::string>();
}

}  // namespace deepgreen
