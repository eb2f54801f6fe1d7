// A small JSON Schema validator for tests: the keywords
// grammar/json_schema.h turns into grammars, checked independently on the
// parsed value (so a grammar that lets an invalid value through fails).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace revis::testing {

inline bool schema_accepts(const nlohmann::json& value, const nlohmann::json& schema, const nlohmann::json& root,
                           std::string* why) {
  using json = nlohmann::json;
  auto fail = [&](const std::string& reason) {
    *why = reason + ": " + value.dump();
    return false;
  };
  if (schema.is_boolean()) return schema.get<bool>() || fail("schema false");
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    return schema_accepts(value, root.at(json::json_pointer(ref.substr(1))), root, why);
  }
  if (schema.contains("const") && value != schema["const"]) return fail("const");
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == value;
    if (!found) return fail("enum");
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (schema.contains(key)) {
      int matches = 0;
      std::string ignored;
      for (const json& alt : schema[key]) matches += schema_accepts(value, alt, root, &ignored);
      if (matches == 0 || (std::string(key) == "oneOf" && matches > 1)) return fail(key);
    }
  if (schema.contains("allOf"))
    for (const json& part : schema["allOf"])
      if (!schema_accepts(value, part, root, why)) return false;
  if (schema.contains("type")) {
    auto is = [&](const std::string& t) {
      if (t == "string") return value.is_string();
      if (t == "integer") return value.is_number_integer() ||
                                 (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
      if (t == "number") return value.is_number();
      if (t == "boolean") return value.is_boolean();
      if (t == "null") return value.is_null();
      if (t == "array") return value.is_array();
      if (t == "object") return value.is_object();
      return false;
    };
    bool ok = false;
    if (schema["type"].is_string()) ok = is(schema["type"].get<std::string>());
    else
      for (const json& t : schema["type"]) ok = ok || is(t.get<std::string>());
    if (!ok) return fail("type");
  }
  if (value.is_string()) {
    // Length in code points, as JSON Schema counts it.
    size_t n = 0;
    for (unsigned char c : value.get<std::string>()) n += (c & 0xC0) != 0x80;
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) return fail("minLength");
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) return fail("maxLength");
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>()) return fail("minimum");
    if (schema.contains("maximum") && v > schema["maximum"].get<double>()) return fail("maximum");
    if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>())
      return fail("exclusiveMinimum");
    if (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>())
      return fail("exclusiveMaximum");
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return fail("minItems");
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) return fail("maxItems");
    size_t first = 0;
    if (schema.contains("prefixItems")) {
      const json& prefix = schema["prefixItems"];
      if (value.size() < prefix.size()) return fail("prefixItems");
      for (; first < prefix.size(); ++first)
        if (!schema_accepts(value[first], prefix[first], root, why)) return false;
    }
    if (schema.contains("items"))
      for (size_t i = first; i < value.size(); ++i)
        if (!schema_accepts(value[i], schema["items"], root, why)) return false;
  }
  if (value.is_object()) {
    const json props = schema.value("properties", json::object());
    if (schema.contains("required"))
      for (const json& r : schema["required"])
        if (!value.contains(r.get<std::string>())) return fail("required " + r.get<std::string>());
    for (const auto& [k, v] : value.items()) {
      if (props.contains(k)) {
        if (!schema_accepts(v, props[k], root, why)) return false;
      } else if (schema.contains("additionalProperties")) {
        if (!schema_accepts(v, schema["additionalProperties"], root, why)) return false;
      }
    }
  }
  return true;
}

}  // namespace revis::testing
