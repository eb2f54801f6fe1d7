#include "api/ollama_models.h"

#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "api/ollama_api.h"
#include "base/json_text.h"
#include "chat/chat_template.h"
#include "hash/sha256.h"
#include "node/weight_label.h"

namespace revis::node {
namespace {

using nlohmann::json;

std::string file_time(const std::filesystem::path& path) {
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(path, ec);
  if (ec) return ollama_time(std::chrono::system_clock::time_point{});
  // The file clock's epoch is the library's choice: measured from now.
  const auto since = written - std::filesystem::file_time_type::clock::now();
  return ollama_time(std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::system_clock::now() + since));
}

// What the loaded model says of itself.
void add_loaded_facts(const LoadedModel& m, OllamaModel& out) {
  const ModelInfo& info = m.engine->info();
  const size_t colon = info.digest.find(':');
  out.digest = colon == std::string::npos ? info.digest : info.digest.substr(colon + 1);
  out.family = info.architecture;
  out.quantization = weight_label(info);
  out.ctx = info.n_ctx;
  out.n_ctx_train = info.n_ctx_train;
  out.n_embd = info.n_embd;
  out.n_layer = info.n_layer;
  out.n_vocab = info.n_vocab;
  out.tools = m.chat.tool_format.has_value();
  out.thinking = m.chat.reasoning.has_value();
  if (!m.chat_template_path.empty()) {
    if (auto source = read_chat_template_file(m.chat_template_path); source.ok()) out.template_source = *source;
  } else {
    out.template_source = info.chat_template;
  }
}

json details(const OllamaModel& m) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", m.family},
          {"families", m.family.empty() ? json(nullptr) : json::array({m.family})},
          {"parameter_size", ""},
          {"quantization_level", m.quantization}};
}

json entry(const OllamaModel& m) {
  return {{"name", m.name},        {"model", m.name},         {"modified_at", m.modified_at},
          {"size", m.size},        {"digest", m.digest},      {"details", details(m)}};
}

}  // namespace

int tier_context(const Node& node, const std::string& tier) {
  for (const TierStatus& t : node.tiers().status())
    if (t.name == tier) return t.ctx;
  return 0;
}

std::vector<OllamaModel> ollama_models(const Node& node) {
  const std::vector<TierStatus> status = node.tiers().status();
  std::vector<OllamaModel> out;
  for (const std::string& id : node.model_ids()) {
    OllamaModel m;
    m.name = id;
    for (const TierStatus& t : status)
      if (t.name == id) {
        m.path = t.model_path;
        m.ctx = t.ctx;
        m.loaded = t.loaded;
        m.footprint_bytes = t.footprint_bytes;
      }
    std::error_code ec;
    if (!m.path.empty()) {
      m.size = std::filesystem::file_size(m.path, ec);
      if (ec) m.size = 0;
      m.modified_at = file_time(m.path);
    }
    // Ollama's clients show a digest's first 12 digits (`ollama list`
    // slices it): before the file's own is known, one of the tier's name,
    // file, size and time stands in.
    m.digest = sha256_hex(m.name + "\n" + m.path + "\n" + std::to_string(m.size) + "\n" + m.modified_at);
    node.tiers().with_loaded(id, [&](const LoadedModel& loaded) { add_loaded_facts(loaded, m); });
    out.push_back(std::move(m));
  }
  return out;
}

std::string ollama_tags(const std::vector<OllamaModel>& models) {
  json list = json::array();
  for (const OllamaModel& m : models) list.push_back(entry(m));
  return json_text({{"models", std::move(list)}});
}

std::string ollama_ps(const std::vector<OllamaModel>& models) {
  json list = json::array();
  for (const OllamaModel& m : models) {
    if (!m.loaded) continue;
    json e = entry(m);
    e.erase("modified_at");
    // revis unloads by memory budget, not by time: a model stays until
    // another needs its memory, which Ollama shows as an expiry far away.
    e["expires_at"] = ollama_time(std::chrono::system_clock::now() + std::chrono::hours(24 * 365 * 100));
    e["size"] = m.footprint_bytes;
    e["size_vram"] = 0;  // revis runs on the CPU
    e["context_length"] = m.ctx;
    list.push_back(std::move(e));
  }
  return json_text({{"models", std::move(list)}});
}

std::string ollama_version() { return json_text({{"version", kOllamaApiVersion}}); }

Outcome<std::string> parse_ollama_show(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  for (const char* key : {"model", "name"})
    if (auto it = parsed->find(key); it != parsed->end() && it->is_string()) return it->get<std::string>();
  return NodeError{ErrorCode::kBadRequest, "model must be a string (the model's name)"};
}

std::string ollama_show(const OllamaModel& m) {
  json capabilities = json::array({"completion"});
  if (m.tools) capabilities.push_back("tools");
  if (m.thinking) capabilities.push_back("thinking");
  json info = json::object();
  if (!m.family.empty()) {
    info["general.architecture"] = m.family;
    info[m.family + ".context_length"] = m.n_ctx_train;
    info[m.family + ".embedding_length"] = m.n_embd;
    info[m.family + ".block_count"] = m.n_layer;
    info[m.family + ".vocab_size"] = m.n_vocab;
  }
  const std::string parameters = m.ctx > 0 ? "num_ctx " + std::to_string(m.ctx) : "";
  return json_text({{"modelfile", "# revis tier " + m.name + "\nFROM " + m.path + "\n" +
                                      (parameters.empty() ? "" : "PARAMETER " + parameters + "\n")},
                    {"parameters", parameters},
                    {"template", m.template_source},
                    {"details", details(m)},
                    {"model_info", std::move(info)},
                    {"capabilities", std::move(capabilities)},
                    {"modified_at", m.modified_at}});
}

}  // namespace revis::node
