#include "api/embeddings_api.h"

#include <nlohmann/json.hpp>

#include "api/openai_api.h"
#include "base/base64.h"
#include "base/json_text.h"

namespace revis::node {
namespace {

using nlohmann::json;

NodeError bad(std::string message) { return NodeError{ErrorCode::kBadRequest, std::move(message)}; }

// `j`, an array, as token ids: integers in [0, 2^31).
Outcome<std::vector<int32_t>> token_ids(const json& j, const std::string& at) {
  if (j.empty()) return bad(at + " is an empty array");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX)
      return bad(at + "[" + std::to_string(i) + "] must be a token id (an integer >= 0)");
    ids.push_back(static_cast<int32_t>(j[i].get<int64_t>()));
  }
  return ids;
}

Outcome<std::vector<EmbeddingInput>> parse_input(const json& input) {
  constexpr const char* kShapes =
      "input must be a non-empty string, an array of them, an array of token ids, or an array of such arrays";
  std::vector<EmbeddingInput> inputs;
  if (input.is_string()) {
    if (input.get_ref<const std::string&>().empty()) return bad("input is an empty string");
    inputs.emplace_back(input.get<std::string>());
    return inputs;
  }
  if (!input.is_array() || input.empty()) return bad(kShapes);
  if (input[0].is_number()) {  // one input as token ids
    auto ids = token_ids(input, "input");
    if (!ids.ok()) return ids.error();
    inputs.emplace_back(std::move(*ids));
    return inputs;
  }
  if (input.size() > kMaxEmbeddingInputs)
    return bad("input has " + std::to_string(input.size()) + " entries (at most " +
               std::to_string(kMaxEmbeddingInputs) + ")");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (item.is_string()) {
      if (item.get_ref<const std::string&>().empty()) return bad(at + " is an empty string");
      inputs.emplace_back(item.get<std::string>());
    } else if (item.is_array()) {
      auto ids = token_ids(item, at);
      if (!ids.ok()) return ids.error();
      inputs.emplace_back(std::move(*ids));
    } else {
      return bad(at + " must be a string or an array of token ids");
    }
  }
  return inputs;
}

class EmbeddingsFormat : public WholeAnswerFormat {
 public:
  EmbeddingsFormat(std::string model, bool base64) : model_(std::move(model)), base64_(base64) {}

  std::string response(std::span<const JobResult> choices, const JobStats& usage) override {
    json data = json::array();
    if (!choices.empty())
      for (size_t i = 0; i < choices[0].embeddings.size(); ++i) {
        const std::vector<float>& e = choices[0].embeddings[i];
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", base64_ ? json(floats_base64(e)) : json(e)}});
      }
    return json_text({{"object", "list"},
                      {"data", std::move(data)},
                      {"model", model_},
                      {"usage", {{"prompt_tokens", usage.prompt_tokens}, {"total_tokens", usage.prompt_tokens}}}});
  }
  std::string error_body(const NodeError& error) override { return openai_error_for(error); }

 private:
  const std::string model_;
  const bool base64_;
};

}  // namespace

Outcome<EmbeddingRequest> parse_embedding_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  const json& j = *parsed;
  EmbeddingRequest r;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    r.model = it->get<std::string>();
  }
  auto input = j.find("input");
  if (input == j.end()) return bad("input is missing");
  auto inputs = parse_input(*input);
  if (!inputs.ok()) return inputs.error();
  r.inputs = std::move(*inputs);
  if (auto it = j.find("encoding_format"); it != j.end() && !it->is_null()) {
    if (*it != "float" && *it != "base64") return bad("encoding_format must be \"float\" or \"base64\"");
    r.base64 = *it == "base64";
  }
  // The vectors are the model's width; shortening them would change them.
  if (auto it = j.find("dimensions"); it != j.end() && !it->is_null())
    return bad("dimensions is not supported (an embedding has the model's width)");
  return r;
}

std::unique_ptr<AnswerFormat> embeddings_format(std::string model, bool base64) {
  return std::make_unique<EmbeddingsFormat>(std::move(model), base64);
}

}  // namespace revis::node
