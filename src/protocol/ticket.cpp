#include "protocol/ticket.h"

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace revis::node {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 8;  // a ticket is at most two levels deep; refuse pathological nesting early

// Nesting depth of the JSON text, counting brackets outside strings. Done
// before parsing so that no input, however nested, costs more than a scan.
int nesting_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') max_depth = std::max(max_depth, ++depth);
    else if (c == '}' || c == ']') --depth;
  }
  return max_depth;
}

RejectedMessage reject(ErrorCode code, std::string message, std::optional<std::string> id = std::nullopt) {
  return RejectedMessage{NodeError{code, std::move(message)}, std::move(id)};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    default: return "a number";
  }
}

Outcome<OpenAiCall> parse_openai_call(const json& j) {
  auto bad = [](std::string message) { return NodeError{ErrorCode::kBadRequest, "openai." + std::move(message)}; };
  if (!j.is_object()) return NodeError{ErrorCode::kBadRequest, std::string("\"openai\" must be an object, not ") + type_name(j)};
  OpenAiCall call;
  bool have_body = false, have_tier = false, have_seed = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "body" || key == "tier") {
      if (!value.is_string()) return bad(key + " must be a string, not " + type_name(value));
      (key == "body" ? call.body : call.tier) = value.get<std::string>();
      (key == "body" ? have_body : have_tier) = true;
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) return bad("seed must be an integer in [0, 2^64), not " + value.dump());
      call.seed = value.get<uint64_t>();
      have_seed = true;
    } else {
      return bad(key + ": unknown field (openai has body, tier, seed)");
    }
  }
  if (!have_body || !have_tier || !have_seed) return bad("body, tier and seed are all required");
  return call;
}

}  // namespace

bool valid_ticket_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

namespace {

// implied_type: what a message without "type" is (the ticket subjects'
// tickets); null: "type" is required.
std::variant<ClientMessage, RejectedMessage> parse_message(std::string_view text, size_t max_bytes,
                                                           const char* implied_type) {
  if (nesting_depth(text) > kMaxDepth)
    return reject(ErrorCode::kBadRequest, "the message nests deeper than " + std::to_string(kMaxDepth) + " levels");

  // Duplicate keys would make "last one wins" silently decide what a ticket
  // means; the parse callback sees every key and refuses repeats.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto on_event = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (text.size() > max_bytes)
      return reject(ErrorCode::kTooLong, "the message has " + std::to_string(text.size()) + " bytes (limit " +
                                             std::to_string(max_bytes) + ")");
    return reject(ErrorCode::kBadRequest, "the message is not valid JSON (or not valid UTF-8)");
  }
  if (!j.is_object()) return reject(ErrorCode::kBadRequest, std::string("the message must be a JSON object, not ") + type_name(j));

  // The ticketID, when readable, goes back with any error so the client can
  // tell which of its tickets failed.
  std::optional<std::string> id;
  if (auto it = j.find("ticketID"); it != j.end() && it->is_string() && valid_ticket_id(it->get_ref<const std::string&>()))
    id = it->get<std::string>();

  if (text.size() > max_bytes)
    return reject(ErrorCode::kTooLong,
                  "the message has " + std::to_string(text.size()) + " bytes (limit " + std::to_string(max_bytes) + ")", id);
  if (!duplicate.empty()) return reject(ErrorCode::kBadRequest, "field \"" + duplicate + "\" appears twice", id);

  auto type_it = j.find("type");
  if (type_it == j.end() && !implied_type) return reject(ErrorCode::kBadRequest, "missing field \"type\"", id);
  if (type_it != j.end() && !type_it->is_string())
    return reject(ErrorCode::kBadRequest, std::string("\"type\" must be a string, not ") + type_name(*type_it), id);
  const std::string type = type_it != j.end() ? type_it->get<std::string>() : implied_type;
  if (type != "ticket" && type != "cancel" && type != "resume" && type != "subscribe")
    return reject(ErrorCode::kBadRequest,
                  "unknown message type \"" + type + "\" (expected ticket, cancel, resume or subscribe)", id);

  if (type == "subscribe") {
    SubscribeRequest sub;
    for (const auto& [key, value] : j.items()) {
      if (key == "type") continue;
      if (key == "feed") {
        if (value != "cluster") return reject(ErrorCode::kBadRequest, "\"feed\" must be \"cluster\"");
        sub.cluster = true;
        continue;
      }
      if (key != "node") return reject(ErrorCode::kBadRequest, "unknown field \"" + key + "\" in a subscribe message");
      if (!value.is_string())
        return reject(ErrorCode::kBadRequest, std::string("\"node\" must be a string, not ") + type_name(value));
      sub.node = value.get<std::string>();
    }
    return ClientMessage{std::move(sub)};
  }

  auto id_it = j.find("ticketID");
  if (id_it == j.end()) return reject(ErrorCode::kBadRequest, "missing field \"ticketID\"");
  if (!id_it->is_string())
    return reject(ErrorCode::kBadRequest, std::string("\"ticketID\" must be a string, not ") + type_name(*id_it));
  if (!id) return reject(ErrorCode::kBadRequest, "\"ticketID\" must be 1..128 characters of A-Z a-z 0-9 . _ : -");

  if (type == "cancel") {
    for (const auto& [key, value] : j.items())
      if (key != "type" && key != "ticketID")
        return reject(ErrorCode::kBadRequest, "unknown field \"" + key + "\" in a cancel message", id);
    return ClientMessage{CancelRequest{*id}};
  }

  if (type == "resume") {
    ResumeRequest r;
    r.id = *id;
    for (const auto& [key, value] : j.items()) {
      if (key == "type" || key == "ticketID") continue;
      if (key != "attempt" && key != "afterSeq")
        return reject(ErrorCode::kBadRequest,
                      "unknown field \"" + key + "\" (a resume has type, ticketID, attempt, afterSeq)", id);
      const int64_t lo = key == "attempt" ? 0 : -1;
      if (!value.is_number_integer() || value.get<int64_t>() < lo || value.get<int64_t>() > (int64_t(1) << 40))
        return reject(ErrorCode::kBadRequest,
                      "\"" + key + "\" must be an integer >= " + std::to_string(lo) + ", not " + value.dump(), id);
      if (key == "attempt") r.attempt = static_cast<int>(value.get<int64_t>());
      else r.after_seq = value.get<int64_t>();
    }
    return ClientMessage{std::move(r)};
  }

  Ticket t;
  t.id = *id;
  bool have_task = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "type" || key == "ticketID") continue;
    if (key == "taskType") {
      if (!value.is_string())
        return reject(ErrorCode::kBadRequest, std::string("\"taskType\" must be a string, not ") + type_name(value), id);
      t.task = value.get<std::string>();
      have_task = true;
    } else if (key == "isStreaming") {
      if (!value.is_boolean())
        return reject(ErrorCode::kBadRequest, std::string("\"isStreaming\" must be true or false, not ") + type_name(value), id);
      t.streaming = value.get<bool>();
    } else if (key == "args") {
      if (!value.is_object())
        return reject(ErrorCode::kBadRequest, std::string("\"args\" must be an object, not ") + type_name(value), id);
      for (const auto& [name, arg] : value.items()) {
        if (!arg.is_string())
          return reject(ErrorCode::kBadRequest,
                        "args." + name + " must be a string, not " + type_name(arg) + " (args are strings only)", id);
        t.args[name] = arg.get<std::string>();
      }
    } else if (key == "catalog") {
      if (!value.is_string())
        return reject(ErrorCode::kBadRequest, std::string("\"catalog\" must be a string, not ") + type_name(value), id);
      t.catalog = value.get<std::string>();
    } else if (key == "forwardedBy") {
      if (!value.is_string())
        return reject(ErrorCode::kBadRequest, std::string("\"forwardedBy\" must be a string, not ") + type_name(value), id);
      t.forwarded_by = value.get<std::string>();
    } else if (key == "openai") {
      auto call = parse_openai_call(value);
      if (!call.ok()) return reject(ErrorCode::kBadRequest, call.error().message, id);
      t.openai = std::move(*call);
    } else {
      return reject(ErrorCode::kBadRequest,
                    "unknown field \"" + key +
                        "\" (a ticket has type, ticketID, taskType, isStreaming, args, catalog, forwardedBy, openai)",
                    id);
    }
  }
  if (!have_task) return reject(ErrorCode::kBadRequest, "missing field \"taskType\"", id);
  if (t.openai && !t.forwarded_by)
    return reject(ErrorCode::kBadRequest, "\"openai\" is sent only by a peer's dispatcher, with forwardedBy", id);
  if (t.openai && std::find(kOpenAiTasks.begin(), kOpenAiTasks.end(), t.task) == kOpenAiTasks.end())
    return reject(ErrorCode::kBadRequest,
                  "a ticket with \"openai\" has taskType " + std::string(kOpenAiChatTask) + ", " + kOpenAiCompletionTask +
                      " or " + kOpenAiEmbeddingsTask,
                  id);
  if (t.openai && !t.args.empty()) return reject(ErrorCode::kBadRequest, "a ticket with \"openai\" has no args", id);
  return ClientMessage{std::move(t)};
}

}  // namespace

std::variant<ClientMessage, RejectedMessage> parse_client_message(std::string_view text, size_t max_bytes) {
  return parse_message(text, max_bytes, nullptr);
}

std::variant<ClientMessage, RejectedMessage> parse_ticket_subject_message(std::string_view text, size_t max_bytes) {
  return parse_message(text, max_bytes, "ticket");
}

std::string ticket_message(const Ticket& t) {
  json j = {{"type", "ticket"}, {"ticketID", t.id}, {"taskType", t.task}, {"isStreaming", t.streaming}, {"args", t.args}};
  if (t.catalog) j["catalog"] = *t.catalog;
  if (t.forwarded_by) j["forwardedBy"] = *t.forwarded_by;
  if (t.openai) j["openai"] = {{"body", t.openai->body}, {"tier", t.openai->tier}, {"seed", t.openai->seed}};
  return json_text(j);
}

}  // namespace revis::node
