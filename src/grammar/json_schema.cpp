#include "grammar/json_schema.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "base/json_reader.h"

#include <nlohmann/json.hpp>

namespace revis {
namespace {

// Ordered: properties come out in the order the schema declares them.
using json = nlohmann::ordered_json;

constexpr int64_t kMaxMagnitude = 999'999'999'999'999;  // 15 digits
constexpr int kMaxObjectDepth = 16;
// Schemas nest at most this deep; the converter recurses on them.
constexpr int kMaxSchemaDepth = 256;

// The shared building blocks, emitted once per grammar.
const char* const kPrimitives = R"(ws ::= | [ \t] | "\n" [ \t]{0,20}
char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
digits ::= [0-9]{1,15}
integral ::= "0" | [1-9] [0-9]{0,14}
fraction ::= "." digits
exponent ::= [eE] [-+]? [0-9]{1,2}
integer ::= "-"? integral
number ::= "-"? integral fraction? exponent?
boolean ::= "true" | "false"
null ::= "null"
)";


// ---- integer ranges as digit patterns

std::string repeat_digit_class(int n) {
  if (n <= 0) return "";
  return n == 1 ? " [0-9]" : " [0-9]{" + std::to_string(n) + "}";
}

// Alternatives matching the decimal strings of equal length n from a to b
// (a <= b, same length), leading zeros allowed (callers exclude them).
void same_length_range(const std::string& a, const std::string& b, const std::string& prefix,
                       std::vector<std::string>* out) {
  const size_t n = a.size();
  if (n == 0) {
    out->push_back(prefix.empty() ? "\"\"" : prefix);
    return;
  }
  if (a == b) {
    out->push_back(prefix + " \"" + a + "\"");
    return;
  }
  if (a[0] == b[0]) {
    same_length_range(a.substr(1), b.substr(1), prefix + " \"" + std::string(1, a[0]) + "\"", out);
    return;
  }
  const std::string rest_low = a.substr(1), rest_high = b.substr(1);
  const bool low_is_zeros = rest_low.find_first_not_of('0') == std::string::npos;
  const bool high_is_nines = rest_high.find_first_not_of('9') == std::string::npos;
  char first = a[0], last = b[0];
  if (!low_is_zeros) {
    same_length_range(rest_low, std::string(n - 1, '9'), prefix + " \"" + std::string(1, a[0]) + "\"", out);
    ++first;
  }
  const char middle_last = high_is_nines ? last : static_cast<char>(last - 1);
  if (first <= middle_last) {
    const std::string cls = first == middle_last ? " \"" + std::string(1, first) + "\""
                                                 : " [" + std::string(1, first) + "-" + std::string(1, middle_last) + "]";
    out->push_back(prefix + cls + repeat_digit_class(static_cast<int>(n) - 1));
  }
  if (!high_is_nines)
    same_length_range(std::string(n - 1, '0'), rest_high, prefix + " \"" + std::string(1, b[0]) + "\"", out);
}

// Alternatives for the non-negative integers in [lo, hi], no leading zeros.
void natural_range(int64_t lo, int64_t hi, std::vector<std::string>* out) {
  if (lo > hi) return;
  const int lo_digits = static_cast<int>(std::to_string(lo).size());
  const int hi_digits = static_cast<int>(std::to_string(hi).size());
  int64_t power = 1;
  for (int i = 1; i < lo_digits; ++i) power *= 10;
  for (int d = lo_digits; d <= hi_digits; ++d, power *= 10) {
    const int64_t first = std::max(lo, d == 1 ? int64_t{0} : power);
    const int64_t last = std::min(hi, power * 10 - 1);
    if (first <= last) same_length_range(std::to_string(first), std::to_string(last), "", out);
  }
}

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " |" : "") + alts[i];
  return out;
}

// ---- the converter

class Converter {
 public:
  // Adds the rules for `schema`, whose values are sentences of rule `name`
  // (its $refs resolve within it).
  Status add(const json& schema, const std::string& name) {
    root_ = &schema;
    ref_rules_.clear();
    definitions_.clear();
    reserved_.insert(name);
    auto top = visit(schema, name, "#");
    if (!top.ok()) return top.status();
    if (*top != name) tops_ += name + " ::= " + *top + "\n";
    return {};
  }

  std::string gbnf() const {
    std::string out = tops_;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + kPrimitives;
  }

 private:
  // A fresh rule name from a hint (property names may hold anything).
  std::string name_for(const std::string& hint) {
    std::string clean;
    for (char c : hint)
      clean += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    std::string name = clean;
    while (name.empty() || rules_.count(name) || reserved_.count(name)) name = clean + "-" + std::to_string(counter_++);
    reserved_.insert(name);
    return name;
  }

  std::string add_rule(const std::string& hint, std::string body) {
    const std::string name = name_for(hint);
    rules_[name] = std::move(body);
    return name;
  }

  static Status unsupported(const std::string& keyword, const std::string& where) {
    return Status::error("JSON schema: '" + keyword + "' at " + where + " is not supported (revis cannot " +
                         "promise outputs that satisfy it)");
  }

  Status check_keywords(const json& schema, const std::string& where) {
    static const std::set<std::string> handled = {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
        "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format",
        // annotations: no effect on validity
        "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
        "writeOnly", "strict", "name"};
    for (const auto& [key, value] : schema.items())
      if (!handled.count(key)) return unsupported(key, where);
    return {};
  }

  // What `ref` (#/$defs/... or #/definitions/...) points to, or null. A
  // definition by name is found in an index: an ordered object finds a key
  // by scanning, and a schema with thousands of $refs to thousands of
  // definitions would make that quadratic.
  const json* definition(const std::string& ref) {
    if (definitions_.empty())
      for (const char* section : {"$defs", "definitions"})
        if (auto it = root_->find(section); it != root_->end() && it->is_object())
          for (const auto& [name, schema] : it->items())
            if (name.find_first_of("~/") == std::string::npos)  // else escaped in a pointer: found below
              definitions_.try_emplace("#/" + std::string(section) + "/" + name, &schema);
    if (auto it = definitions_.find(ref); it != definitions_.end()) return it->second;
    try {
      return &root_->at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      return nullptr;
    }
  }

  Result<std::string> resolve_ref(const std::string& ref, const std::string& where) {
    auto known = ref_rules_.find(ref);
    if (known != ref_rules_.end()) return known->second;
    std::string path;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (ref.rfind(prefix, 0) == 0) path = ref;
    if (path.empty())
      return Status::error("JSON schema: $ref '" + ref + "' at " + where +
                           " (expected #/$defs/NAME or #/definitions/NAME)");
    const json* target = definition(ref);
    if (!target) return Status::error("JSON schema: $ref '" + ref + "' at " + where + " points nowhere");
    // Named before the visit, so a recursive schema refers to itself.
    const std::string name = name_for("ref-" + ref.substr(ref.rfind('/') + 1));
    ref_rules_[ref] = name;
    auto body = visit(*target, name, ref);
    if (!body.ok()) return body.status();
    rules_[name] = *body;
    return name;
  }

  Result<std::string> visit(const json& schema, const std::string& hint, const std::string& where) {
    if (++depth_ > kMaxSchemaDepth)
      return Status::error("JSON schema: nested deeper than " + std::to_string(kMaxSchemaDepth) + " at " + where);
    auto result = visit_inner(schema, hint, where);
    --depth_;
    return result;
  }

  // Returns a GBNF expression (a rule name or an inline group).
  Result<std::string> visit_inner(const json& schema, const std::string& hint, const std::string& where) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) return Status::error("JSON schema: 'false' at " + where + " accepts no value");
      return any_value(kMaxObjectDepth);
    }
    if (!schema.is_object()) return Status::error("JSON schema: expected an object or a boolean at " + where);
    if (Status s = check_keywords(schema, where); !s.ok()) return s;
    if (schema.contains("$ref")) {
      if (!schema["$ref"].is_string()) return Status::error("JSON schema: $ref at " + where + " is not a string");
      return resolve_ref(schema["$ref"].get<std::string>(), where);
    }
    if (schema.contains("const")) return gbnf_literal(schema["const"].dump(-1, ' ', false));
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array() || schema["enum"].empty())
        return Status::error("JSON schema: 'enum' at " + where + " must be a non-empty array");
      std::vector<std::string> alts;
      for (const json& v : schema["enum"]) alts.push_back(" " + gbnf_literal(v.dump(-1, ' ', false)));
      return add_rule(hint, join_alternatives(alts));
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) {
        if (!schema[key].is_array() || schema[key].empty())
          return Status::error(std::string("JSON schema: '") + key + "' at " + where + " must be a non-empty array");
        std::vector<std::string> alts;
        for (size_t i = 0; i < schema[key].size(); ++i) {
          auto alt = visit(schema[key][i], hint + "-" + std::to_string(i), where + "/" + key + "/" + std::to_string(i));
          if (!alt.ok()) return alt.status();
          alts.push_back(" " + *alt);
        }
        return add_rule(hint, join_alternatives(alts));
      }
    if (schema.contains("allOf")) return merge_all_of(schema, hint, where);

    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& t = schema["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const json& x : t) {
          if (!x.is_string()) return Status::error("JSON schema: 'type' at " + where + " must hold strings");
          types.push_back(x.get<std::string>());
        }
      else return Status::error("JSON schema: 'type' at " + where + " must be a string or an array");
    } else if (schema.contains("properties") || schema.contains("additionalProperties")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
      types.push_back("array");
    } else if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("format")) {
      types.push_back("string");
    } else {
      return any_value(kMaxObjectDepth);
    }
    std::vector<std::string> alts;
    for (const std::string& type : types) {
      auto alt = visit_type(schema, type, hint, where);
      if (!alt.ok()) return alt.status();
      alts.push_back(" " + *alt);
    }
    return alts.size() == 1 ? alts[0].substr(1) : add_rule(hint, join_alternatives(alts));
  }

  Result<std::string> visit_type(const json& s, const std::string& type, const std::string& hint,
                                 const std::string& where) {
    if (type == "string") return string_rule(s, hint, where);
    if (type == "integer" || type == "number") return number_rule(s, type == "integer", hint, where);
    if (type == "boolean") return std::string("boolean");
    if (type == "null") return std::string("null");
    if (type == "array") return array_rule(s, hint, where);
    if (type == "object") return object_rule(s, hint, where);
    return Status::error("JSON schema: unknown type '" + type + "' at " + where);
  }

  static Result<int64_t> count(const json& s, const char* key, int64_t fallback, const std::string& where) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
      return Status::error(std::string("JSON schema: '") + key + "' at " + where + " must be an integer 0..10000");
    return v.get<int64_t>();
  }

  Result<std::string> string_rule(const json& s, const std::string& hint, const std::string& where) {
    if (s.contains("format")) {
      static const std::map<std::string, std::string> formats = {
          {"date", R"("\"" [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) "\"")"},
          {"time", R"("\"" ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]) "\"")"},
          {"date-time", R"("\"" [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) "T" ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]) "\"")"},
          {"uuid", R"("\"" [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} "\"")"}};
      if (!s["format"].is_string() || !formats.count(s["format"].get<std::string>()))
        return unsupported("format: " + s["format"].dump(), where);
      return add_rule(hint, formats.at(s["format"].get<std::string>()));
    }
    auto min = count(s, "minLength", 0, where);
    if (!min.ok()) return min.status();
    auto max = count(s, "maxLength", -1, where);
    if (!max.ok()) return max.status();
    if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("string");
    if (*max >= 0 && *max < *min) return Status::error("JSON schema: maxLength < minLength at " + where);
    const std::string reps = *max < 0 ? "{" + std::to_string(*min) + ",}"
                                      : "{" + std::to_string(*min) + "," + std::to_string(*max) + "}";
    return add_rule(hint, "\"\\\"\" char" + reps + " \"\\\"\"");
  }

  // Reads a bound; false when absent.
  static Result<bool> bound(const json& s, const char* key, double* value, const std::string& where) {
    if (!s.contains(key)) return false;
    if (!s[key].is_number()) return Status::error(std::string("JSON schema: '") + key + "' at " + where +
                                                  " must be a number");
    *value = s[key].get<double>();
    if (std::fabs(*value) > static_cast<double>(kMaxMagnitude))
      return Status::error(std::string("JSON schema: '") + key + "' at " + where + " is beyond 15 digits");
    return true;
  }

  Result<std::string> number_rule(const json& s, bool integer, const std::string& hint, const std::string& where) {
    double v = 0;
    // Integer bounds of the allowed values: [lo, hi]; fractions [lo_f, hi_f).
    int64_t lo = -kMaxMagnitude, hi = kMaxMagnitude;
    bool any_bound = false;
    auto apply = [&](const char* key, bool lower, bool exclusive) -> Status {
      auto present = bound(s, key, &v, where);
      if (!present.ok()) return present.status();
      if (!*present) return {};
      any_bound = true;
      if (lower) lo = std::max(lo, exclusive ? static_cast<int64_t>(std::floor(v)) + 1
                                             : static_cast<int64_t>(std::ceil(v)));
      else hi = std::min(hi, exclusive ? static_cast<int64_t>(std::ceil(v)) - 1 : static_cast<int64_t>(std::floor(v)));
      return {};
    };
    for (auto [key, lower, exclusive] : {std::tuple{"minimum", true, false}, std::tuple{"maximum", false, false},
                                         std::tuple{"exclusiveMinimum", true, true},
                                         std::tuple{"exclusiveMaximum", false, true}})
      if (Status st = apply(key, lower, exclusive); !st.ok()) return st;
    if (!any_bound) return std::string(integer ? "integer" : "number");
    if (lo > hi) return Status::error("JSON schema: no " + std::string(integer ? "integer" : "number") +
                                      " satisfies the bounds at " + where);
    std::vector<std::string> alts = integer_alternatives(lo, hi);
    if (!integer) {
      // i.f for 0 <= i and i + 1 <= hi' (every value of [i, i+1) in range);
      // -k.f for the negative side, whose values lie in (-(k+1), -k].
      std::vector<std::string> positive, negative;
      natural_range(std::max<int64_t>(lo, 0), hi - 1, &positive);
      for (const std::string& a : positive) alts.push_back(" (" + a + ") fraction");
      natural_range(std::max<int64_t>(-hi, 0), -lo - 1, &negative);
      for (const std::string& a : negative) alts.push_back(" \"-\" (" + a + ") fraction");
    }
    if (alts.empty()) return Status::error("JSON schema: no value satisfies the bounds at " + where);
    return add_rule(hint, join_alternatives(alts));
  }

  static std::vector<std::string> integer_alternatives(int64_t lo, int64_t hi) {
    std::vector<std::string> alts, negative;
    natural_range(std::max<int64_t>(lo, 0), hi, &alts);
    if (lo < 0) natural_range(std::max<int64_t>(-hi, 1), -lo, &negative);
    for (const std::string& a : negative) alts.push_back(" \"-\" (" + a + ")");
    return alts;
  }

  Result<std::string> array_rule(const json& s, const std::string& hint, const std::string& where) {
    auto min = count(s, "minItems", 0, where);
    if (!min.ok()) return min.status();
    auto max = count(s, "maxItems", -1, where);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) return Status::error("JSON schema: maxItems < minItems at " + where);
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Status::error("JSON schema: 'prefixItems' at " + where +
                                                             " must be an array");
      if (s.contains("items") && !(s["items"].is_boolean() && !s["items"].get<bool>()))
        return unsupported("items after prefixItems", where);
      std::string body = "\"[\" ws";
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        auto item = visit(s["prefixItems"][i], hint + "-" + std::to_string(i),
                          where + "/prefixItems/" + std::to_string(i));
        if (!item.ok()) return item.status();
        body += (i ? " \",\" ws " : " ") + *item + " ws";
      }
      return add_rule(hint, body + " \"]\"");
    }
    std::string item = "value-" + std::to_string(kMaxObjectDepth);
    if (s.contains("items")) {
      auto visited = visit(s["items"], hint + "-item", where + "/items");
      if (!visited.ok()) return visited.status();
      item = *visited;
    } else {
      item = any_value(kMaxObjectDepth);
    }
    const std::string next = "\",\" ws " + item + " ws";
    std::string rest;
    const int64_t more_min = std::max<int64_t>(*min - 1, 0);
    if (*max < 0) rest = "(" + next + "){" + std::to_string(more_min) + ",}";
    else if (*max > 1) rest = "(" + next + "){" + std::to_string(more_min) + "," + std::to_string(*max - 1) + "}";
    std::string items = item + " ws" + (rest.empty() ? "" : " " + rest);
    if (*max == 0) return add_rule(hint, "\"[\" ws \"]\"");
    if (*min == 0) items = "(" + items + ")?";
    return add_rule(hint, "\"[\" ws " + items + " \"]\"");
  }

  Result<std::string> object_rule(const json& s, const std::string& hint, const std::string& where) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return Status::error("JSON schema: 'properties' at " + where + " must be an object");
    // A set, not props.contains(): an ordered object finds a key by
    // scanning, and a long `required` list would make that quadratic.
    std::set<std::string> declared, required;
    for (const auto& [key, sub] : props.items()) declared.insert(key);
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::error("JSON schema: 'required' at " + where + " must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Status::error("JSON schema: 'required' at " + where + " must hold strings");
        if (!declared.count(r.get<std::string>()))
          return Status::error("JSON schema: required property '" + r.get<std::string>() + "' at " + where +
                               " is not among its properties");
        required.insert(r.get<std::string>());
      }
    }
    // Extra properties: additionalProperties true or a schema; absent means
    // free-form only when no properties are declared.
    std::string extra_value;
    if (s.contains("additionalProperties")) {
      const json& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.get<bool>())) {
        auto v = visit(ap, hint + "-extra", where + "/additionalProperties");
        if (!v.ok()) return v.status();
        extra_value = *v;
      }
    } else if (props.empty()) {
      extra_value = any_value(kMaxObjectDepth - 1);
    }
    std::vector<std::string> members;  // "\"key\"" ws ":" ws value
    std::vector<bool> optional;
    for (const auto& [key, sub] : props.items()) {
      auto v = visit(sub, hint + "-" + key, where + "/properties/" + key);
      if (!v.ok()) return v.status();
      members.push_back(gbnf_literal(json(key).dump(-1, ' ', false)) + " ws \":\" ws " + *v + " ws");
      optional.push_back(!required.count(key));
    }
    const std::string extra_member = extra_value.empty() ? "" : "string ws \":\" ws " + extra_value + " ws";
    // first[i]: nothing emitted yet, members i.. to go; rest[i]: something
    // emitted, so each further member starts with a comma. "" = nothing.
    const size_t n = members.size();
    std::vector<std::string> first(n + 1), rest(n + 1);
    if (!extra_member.empty()) {
      rest[n] = add_rule(hint + "-rest", "(\",\" ws " + extra_member + ")*");
      first[n] = add_rule(hint + "-first", "(" + extra_member + " " + rest[n] + ")?");
    }
    auto or_nothing = [](const std::string& rule) { return rule.empty() ? std::string("\"\"") : rule; };
    for (size_t i = n; i-- > 0;) {
      const std::string after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      rest[i] = add_rule(hint + "-rest", "\",\" ws " + members[i] + after +
                                             (optional[i] ? " | " + or_nothing(rest[i + 1]) : ""));
      first[i] = add_rule(hint + "-first", members[i] + after + (optional[i] ? " | " + or_nothing(first[i + 1]) : ""));
    }
    const std::string body = first[0].empty() ? "\"{\" ws \"}\"" : "\"{\" ws " + first[0] + " \"}\"";
    return add_rule(hint, body);
  }

  Result<std::string> merge_all_of(const json& s, const std::string& hint, const std::string& where) {
    if (!s["allOf"].is_array()) return Status::error("JSON schema: 'allOf' at " + where + " must be an array");
    json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
    // Where each property is in merged["properties"], whose own lookup
    // scans: a later part's property replaces an earlier one's.
    std::map<std::string, size_t> position;
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      const json* part = &s["allOf"][i];
      if (part->contains("$ref")) {
        if (!(*part)["$ref"].is_string()) return Status::error("JSON schema: $ref in allOf at " + where + " is not a string");
        const std::string ref = (*part)["$ref"].get<std::string>();
        part = ref.starts_with("#") ? definition(ref) : nullptr;
        if (!part) return Status::error("JSON schema: $ref '" + ref + "' in allOf at " + where + " points nowhere");
      }
      if (!part->is_object() || (part->contains("type") && (*part)["type"] != "object") ||
          !part->contains("properties"))
        return unsupported("allOf of non-object schemas", where);
      json& properties = merged["properties"];
      for (const auto& [k, v] : (*part)["properties"].items()) {
        auto [at, fresh] = position.try_emplace(k, properties.size());
        if (fresh) append_member(properties, k, v);
        else (properties.begin() + static_cast<std::ptrdiff_t>(at->second)).value() = v;
      }
      if (part->contains("required"))
        for (const json& r : (*part)["required"]) merged["required"].push_back(r);
    }
    merged["additionalProperties"] = false;
    return visit(merged, hint, where + "/allOf");
  }

  // value-d: any JSON value nested at most d deep (d >= 0: scalars only at 0).
  std::string any_value(int depth) {
    const std::string name = "value-" + std::to_string(depth);
    if (rules_.count(name)) return name;
    reserved_.insert(name);
    rules_[name] = "";  // claimed before recursing
    std::string body = "string | number | boolean | null";
    if (depth > 0) {
      const std::string inner = any_value(depth - 1);
      body = "\"{\" ws (string ws \":\" ws " + inner + " ws (\",\" ws string ws \":\" ws " + inner +
             " ws)*)? \"}\" | \"[\" ws (" + inner + " ws (\",\" ws " + inner + " ws)*)? \"]\" | " + body;
    }
    rules_[name] = body;
    return name;
  }

  const json* root_ = nullptr;      // the schema being added
  std::string tops_;                // the added schemas' own rules
  std::map<std::string, std::string> rules_;
  std::set<std::string> reserved_{"root",     "ws",       "char",     "string",  "digits", "integral",
                                  "fraction", "exponent", "integer",  "number",  "boolean", "null"};
  std::map<std::string, std::string> ref_rules_;
  int counter_ = 0;
  int depth_ = 0;
  std::map<std::string, const json*> definitions_;  // of root_, by $ref
};

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  Converter converter;
  if (Status st = converter.add(schema, "root"); !st.ok()) return st;
  return converter.gbnf();
}

Result<std::string> json_schemas_to_gbnf(std::span<const NamedSchema> schemas) {
  Converter converter;
  for (const NamedSchema& s : schemas)
    if (Status st = converter.add(s.schema, s.rule); !st.ok()) return st;
  return converter.gbnf();
}

Result<std::shared_ptr<const Grammar>> compile_json_schema(const nlohmann::ordered_json& schema,
                                                           const Grammar::Limits& limits) {
  if (!schema.is_object() && !schema.is_boolean()) return Status::error("expected a JSON Schema (a JSON object)");
  auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf.ok()) return gbnf.status();
  return Grammar::parse(*gbnf, "root", limits);
}

Result<std::shared_ptr<const Grammar>> compile_json_schema_text(std::string_view text, const Grammar::Limits& limits) {
  // Each level of a schema is two of JSON (the schema, its `properties`).
  auto schema = read_ordered_json(text, 2 * kMaxSchemaDepth);
  if (!schema.ok()) return Status::error("expected a JSON Schema (a JSON object): " + schema.status().message());
  return compile_json_schema(*schema, limits);
}

std::string json_object_gbnf() {
  return *json_schema_to_gbnf(nlohmann::ordered_json{{"type", "object"}});
}

}  // namespace revis
