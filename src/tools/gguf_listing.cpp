#include "tools/gguf_listing.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"

namespace revis {
namespace {

constexpr size_t kArrayPreview = 8;  // long arrays (vocabularies) show this many items

std::string format_value(const gguf::Value& v, bool top_level);

std::string format_array(const gguf::Array& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.items.size() && i < kArrayPreview; ++i)
    s += (i ? ", " : "") + format_value(a.items[i], false);
  if (a.items.size() > kArrayPreview) s += ", ...";
  s += "]";
  if (a.items.size() > kArrayPreview)
    s += " (" + std::to_string(a.items.size()) + " " + gguf::value_type_name(a.element_type) + ")";
  return s;
}

std::string format_value(const gguf::Value& v, bool top_level) {
  if (const gguf::Array* a = v.as_array()) return format_array(*a);
  if (const std::string* str = v.as_string()) {
    std::string shown = top_level || str->size() <= 60 ? *str : str->substr(0, 60) + "...";
    std::string quoted = "\"";
    for (char c : shown) quoted += c == '\n' ? std::string("\\n") : std::string(1, c);
    if (top_level && quoted.size() > 200) quoted = quoted.substr(0, 200) + "...";
    return quoted + "\"";
  }
  if (auto* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (v.is_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v.as_double());
    return buf;
  }
  if (auto* u = std::get_if<uint64_t>(&v.data)) return std::to_string(*u);
  return std::to_string(v.as_int());
}

nlohmann::json json_value(const gguf::Value& v) {
  if (const gguf::Array* a = v.as_array()) {
    nlohmann::json items = nlohmann::json::array();
    for (const gguf::Value& item : a->items) items.push_back(json_value(item));
    return items;
  }
  if (const std::string* str = v.as_string()) return *str;
  if (auto* b = std::get_if<bool>(&v.data)) return *b;
  if (v.is_float()) return v.as_double();
  if (auto* u = std::get_if<uint64_t>(&v.data)) return *u;
  return v.as_int();
}

void print_json(const std::string& path, const gguf::GgufFile& f) {
  nlohmann::json metadata = nlohmann::json::object(), tensors = nlohmann::json::array();
  for (const gguf::KeyValue& kv : f.metadata()) metadata[kv.key] = json_value(kv.value);
  for (const gguf::TensorInfo& t : f.tensors())
    tensors.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"shape", t.dims}, {"bytes", t.n_bytes},
                       {"offset", t.offset}});
  const nlohmann::json j = {{"path", path},           {"version", f.version()},         {"alignment", f.alignment()},
                            {"data_offset", f.data_offset()}, {"metadata", metadata}, {"tensors", tensors}};
  // Vocabulary pieces need not be valid UTF-8.
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

}  // namespace

Status print_gguf_listing(const std::string& path, bool json) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return file.status();
  const gguf::GgufFile& f = **file;
  if (json) {
    print_json(path, f);
    return {};
  }
  std::printf("%s: GGUF v%u, %zu metadata entries, %zu tensors, alignment %llu, data at %llu\n", path.c_str(),
              f.version(), f.metadata().size(), f.tensors().size(), (unsigned long long)f.alignment(),
              (unsigned long long)f.data_offset());
  std::printf("\nmetadata:\n");
  for (const gguf::KeyValue& kv : f.metadata())
    std::printf("  %-44s %-6s %s\n", kv.key.c_str(), gguf::value_type_name(kv.value.type),
                format_value(kv.value, true).c_str());
  std::printf("\ntensors:\n");
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::printf("  %-36s %-7s %-22s %12llu bytes @ %llu\n", t.name.c_str(), type_name(t.type),
                t.shape_string().c_str(), (unsigned long long)t.n_bytes, (unsigned long long)t.offset);
    total += t.n_bytes;
  }
  std::printf("\ntotal tensor data: %llu bytes (%.2f MiB)\n", (unsigned long long)total, total / 1048576.0);
  return {};
}

}  // namespace revis
