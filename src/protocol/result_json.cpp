#include "protocol/result_json.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace revis::node {
namespace {

using nlohmann::json;

// The string at j[key], or "" when absent or not a string.
std::string string_or_empty(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

json token_choice_json(const TokenChoice& c) {
  json bytes = json::array();
  for (unsigned char b : c.token) bytes.push_back(b);
  // -inf (a token the constraint ruled out) is not JSON: OpenAI's floor.
  return {{"token", c.token}, {"bytes", bytes}, {"logprob", std::isfinite(c.logprob) ? c.logprob : -9999.0f}};
}

json logprobs_content(std::span<const LogprobEntry> entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json item = token_choice_json(e.chosen);
    item["top_logprobs"] = json::array();
    for (const TokenChoice& c : e.top) item["top_logprobs"].push_back(token_choice_json(c));
    content.push_back(std::move(item));
  }
  return content;
}

std::vector<LogprobEntry> logprobs_from_content(const json& content) {
  auto choice = [](const json& j, TokenChoice& out) {
    if (!j.is_object() || !j.contains("logprob") || !j["logprob"].is_number()) return false;
    out.logprob = j["logprob"].get<float>();
    if (auto b = j.find("bytes"); b != j.end() && b->is_array()) {
      for (const json& byte : *b)
        if (byte.is_number_unsigned() && byte.get<unsigned>() < 256) out.token.push_back(static_cast<char>(byte.get<unsigned>()));
    } else if (auto t = j.find("token"); t != j.end() && t->is_string()) {
      out.token = t->get<std::string>();
    }
    return true;
  };
  std::vector<LogprobEntry> entries;
  if (!content.is_array()) return entries;
  for (const json& item : content) {
    LogprobEntry e;
    if (!choice(item, e.chosen)) continue;
    if (auto top = item.find("top_logprobs"); top != item.end() && top->is_array())
      for (const json& alt : *top) {
        TokenChoice c;
        if (choice(alt, c)) e.top.push_back(std::move(c));
      }
    entries.push_back(std::move(e));
  }
  return entries;
}

json tool_calls_json(std::span<const ToolCall> calls) {
  json out = json::array();
  for (const ToolCall& c : calls) out.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return out;
}

std::vector<ToolCall> tool_calls_from_json(const json& calls) {
  std::vector<ToolCall> out;
  if (!calls.is_array()) return out;
  for (const json& c : calls)
    if (c.is_object())
      out.push_back({string_or_empty(c, "id"), string_or_empty(c, "name"), string_or_empty(c, "arguments")});
  return out;
}

}  // namespace revis::node
