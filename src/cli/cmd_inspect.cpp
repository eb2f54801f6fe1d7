// revis inspect FILE: the metadata and tensor table of a GGUF file.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"

namespace revis::cli {
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

int inspect(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "error: %s\n", file.status().message().c_str());
    return 1;
  }
  const gguf::GgufFile& f = **file;
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
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Print the metadata and tensor table of a GGUF file");
  auto path = std::make_shared<std::string>();
  cmd->add_option("file", *path, "GGUF file")->required();
  cmd->callback([path, &exit_code] { exit_code = inspect(*path); });
}

}  // namespace revis::cli
