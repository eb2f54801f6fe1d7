// Ollama's model endpoints (docs/api-ollama.md): GET /api/tags (the
// models: revis's tiers), GET /api/ps (those loaded), POST /api/show (one
// model's details, template and parameters), GET /api/version. A tier's
// name is its model name. What only the loaded model knows (architecture,
// quantization, digest, template) is filled in once it is loaded, and
// empty before.
//
// Thread-safety: free functions; the node is only read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "node/node.h"
#include "protocol/errors.h"
#include "protocol/request_limits.h"

namespace revis::node {

// The Ollama API version whose shapes revis follows (thinking, tools,
// format as a schema), for clients that check it.
inline constexpr const char* kOllamaApiVersion = "0.9.0";

struct OllamaModel {
  std::string name;  // the tier
  std::string path;
  uint64_t size = 0;        // the file's bytes
  std::string modified_at;  // the file's modification time
  int ctx = 0;              // the context the node gives it; 0 when not known yet
  bool loaded = false;
  uint64_t footprint_bytes = 0;
  // Hex SHA-256: the loaded model's (revis's digest without its "sha256:"
  // prefix), or before it is loaded one of the tier's name, file, size and
  // time, so that there always is one.
  std::string digest;
  // From the loaded model.
  std::string family, quantization, template_source;
  int n_ctx_train = 0, n_embd = 0, n_layer = 0, n_vocab = 0;
  bool tools = false, thinking = false;  // the template writes tool calls, thinks
};

// The context the node gives `tier`'s model: the loaded model's, else the
// tier's configured one; 0 when neither is known.
int tier_context(const Node& node, const std::string& tier);

// Every model the node serves (Node::model_ids), in its order.
std::vector<OllamaModel> ollama_models(const Node& node);

std::string ollama_tags(const std::vector<OllamaModel>& models);
std::string ollama_ps(const std::vector<OllamaModel>& models);
std::string ollama_version();

// POST /api/show's body: the model's name (`model`, or the older `name`).
Outcome<std::string> parse_ollama_show(std::string_view body, const RequestLimits& limits = {});
std::string ollama_show(const OllamaModel& model);

}  // namespace revis::node
