#include "node/config.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "hub/reference.h"
#include "protocol/bearer.h"
#include "revis/draft.h"

namespace revis::node {
namespace {

namespace fs = std::filesystem;

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

// A model is a file, resolved as paths are, or ORG/REPO:QUANT on the hub
// (hub/reference.h) when no such file is there: `revis serve` finds or
// pulls those into the models directory.
std::string resolve_model(const std::string& model, const std::string& base_dir) {
  std::error_code ec;
  if (hub::parse_reference(model) && !fs::exists(resolve_path(model, base_dir), ec)) return model;
  return resolve_path(model, base_dir);
}

// A draft is a model, or kMtpDraft, the model's own head.
std::string resolve_draft(const std::string& draft, const std::string& base_dir) {
  return draft == kMtpDraft ? draft : resolve_model(draft, base_dir);
}

Status get_string(const toml::node& v, const std::string& at, std::string& out) {
  auto s = v.value_exact<std::string>();
  if (!s) return Status::error(at + ": expected a string");
  out = *s;
  return {};
}

template <typename Int>
Status get_int(const toml::node& v, const std::string& at, int64_t lo, int64_t hi, Int& out) {
  auto i = v.value_exact<int64_t>();
  if (!i) return Status::error(at + ": expected an integer");
  if (*i < lo || *i > hi)
    return Status::error(at + ": " + std::to_string(*i) + " (expected " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  out = static_cast<Int>(*i);
  return {};
}

Status get_bool(const toml::node& v, const std::string& at, bool& out) {
  auto b = v.value_exact<bool>();
  if (!b) return Status::error(at + ": expected true or false");
  out = *b;
  return {};
}

// A list of strings, appended to `out`; `what` names one in the error.
Status get_strings(const toml::node& v, const std::string& at, const char* what, std::vector<std::string>& out) {
  const toml::array* list = v.as_array();
  if (!list) return Status::error(at + ": expected a list of " + what + " strings");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string item;
    if (Status s = get_string(*list->get(i), at + "[" + std::to_string(i) + "]", item); !s.ok()) return s;
    out.push_back(std::move(item));
  }
  return {};
}

// A speed in tokens per second: an integer or a float, positive and finite.
Status get_rate(const toml::node& v, const std::string& at, double& out) {
  auto d = v.value<double>();
  if (!d || !(v.is_integer() || v.is_floating_point())) return Status::error(at + ": expected a number");
  if (!(*d > 0 && *d <= 1e9)) return Status::error(at + ": " + std::to_string(*d) + " (expected a rate above 0, at most 1e9)");
  out = *d;
  return {};
}

Status parse_tier(const std::string& name, const toml::table& t, const std::string& at, const std::string& base_dir,
                  TierConfig& tier) {
  tier.name = name;
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    const std::string where = at + "." + key;
    Status s;
    if (key == "model") {
      s = get_string(v, where, tier.model);
      tier.model = resolve_model(tier.model, base_dir);
    } else if (key == "ctx") {
      s = get_int(v, where, 0, 1 << 24, tier.ctx);
    } else if (key == "threads") {
      s = get_int(v, where, 0, 1024, tier.threads);
    } else if (key == "chat_template") {
      s = get_string(v, where, tier.chat_template);
      tier.chat_template = resolve_path(tier.chat_template, base_dir);
    } else if (key == "draft") {
      s = get_string(v, where, tier.draft);
      tier.draft = resolve_draft(tier.draft, base_dir);
    } else if (key == "lookup") {
      bool on = false;
      s = get_bool(v, where, on);
      tier.lookup = on;
    } else if (key == "draft_max") {
      s = get_int(v, where, 0, kMaxDraft, tier.draft_max);
    } else if (key == "parallel") {
      s = get_int(v, where, 0, kMaxSlots, tier.parallel);
    } else if (key == "gpu_layers") {
      int layers = 0;
      s = get_int(v, where, -1, 1 << 16, layers);
      tier.gpu_layers = layers;
    } else {
      return Status::error(where + ": unknown key (a tier has model, ctx, threads, chat_template, draft, lookup, "
                                   "draft_max, parallel, gpu_layers)");
    }
    if (!s.ok()) return s;
  }
  if (tier.model.empty()) return Status::error(at + ": a tier needs a model");
  return {};
}

bool valid_tier_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

}  // namespace

Result<NodeConfig> parse_config(const std::string& text, const std::string& origin, const std::string& base_dir) {
  toml::table doc;
  try {
    doc = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::error(msg.str());
  }
  NodeConfig c;
  for (auto&& [k, v] : doc) {
    const std::string key(k.str());
    const std::string at = origin + ": " + key;
    Status s;
    if (key == "name") s = get_string(v, at, c.name);
    else if (key == "host") s = get_string(v, at, c.host);
    else if (key == "port") s = get_int(v, at, 0, 65535, c.port);
    else if (key == "token") s = get_string(v, at, c.token);
    else if (key == "token_file") {
      s = get_string(v, at, c.token_file);
      c.token_file = resolve_path(c.token_file, base_dir);
    }
    else if (key == "queue_limit") s = get_int(v, at, 1, 1 << 20, c.queue_limit);
    else if (key == "model") {
      s = get_string(v, at, c.model);
      c.model = resolve_model(c.model, base_dir);
    } else if (key == "default_tier") s = get_string(v, at, c.default_tier);
    else if (key == "ctx") s = get_int(v, at, 0, 1 << 24, c.ctx);
    else if (key == "threads") s = get_int(v, at, 0, 1024, c.threads);
    else if (key == "chat_template") {
      s = get_string(v, at, c.chat_template);
      c.chat_template = resolve_path(c.chat_template, base_dir);
    }
    else if (key == "draft") {
      s = get_string(v, at, c.draft);
      c.draft = resolve_draft(c.draft, base_dir);
    } else if (key == "lookup") s = get_bool(v, at, c.lookup);
    else if (key == "draft_max") s = get_int(v, at, 0, kMaxDraft, c.draft_max);
    else if (key == "parallel") s = get_int(v, at, 0, kMaxSlots, c.parallel);
    else if (key == "device") s = get_string(v, at, c.device);
    else if (key == "gpu_layers") s = get_int(v, at, -1, 1 << 16, c.gpu_layers);
    else if (key == "batch_tokens") s = get_int(v, at, 1, kMaxBatchTokens, c.batch_tokens);
    else if (key == "memory_budget_mb") s = get_int(v, at, 0, int64_t(1) << 40, c.memory_budget_mb);
    else if (key == "kv_dir") {
      s = get_string(v, at, c.kv_dir);
      c.kv_dir = resolve_path(c.kv_dir, base_dir);
    } else if (key == "kv_budget_mb") s = get_int(v, at, 0, int64_t(1) << 40, c.kv_budget_mb);
    else if (key == "max_message_bytes") s = get_int(v, at, 1024, int64_t(1) << 30, c.max_message_bytes);
    else if (key == "max_request_bytes") s = get_int(v, at, 1024, int64_t(1) << 30, c.max_request_bytes);
    else if (key == "catalog") {
      s = get_string(v, at, c.catalog);
      c.catalog = resolve_path(c.catalog, base_dir);
    } else if (key == "shutdown_grace_ms") s = get_int(v, at, 0, 3600 * 1000, c.shutdown_grace_ms);
    else if (key == "peers") s = get_strings(v, at, "\"HOST:PORT\"", c.peers);
    else if (key == "discover") s = get_bool(v, at, c.discover);
    else if (key == "max_attempts") s = get_int(v, at, 1, 100, c.max_attempts);
    else if (key == "heartbeat_ms") s = get_int(v, at, 10, 600 * 1000, c.heartbeat_ms);
    else if (key == "journal") {
      s = get_string(v, at, c.journal);
      c.journal = resolve_path(c.journal, base_dir);
    } else if (key == "result_ttl_s") s = get_int(v, at, 0, 7 * 24 * 3600, c.result_ttl_s);
    else if (key == "resume_window_ms") s = get_int(v, at, 0, 3600 * 1000, c.resume_window_ms);
    else if (key == "max_kept_results") s = get_int(v, at, 1, 1 << 30, c.max_kept_results);
    else if (key == "max_kept_results_mb") s = get_int(v, at, 1, int64_t(1) << 30, c.max_kept_results_mb);
    else if (key == "log_level") s = get_string(v, at, c.log_level);
    else if (key == "log_format") s = get_string(v, at, c.log_format);
    else if (key == "broker") s = get_string(v, at, c.broker);
    else if (key == "broker_creds" || key == "broker_tls_ca") {
      std::string& path = key == "broker_creds" ? c.broker_creds : c.broker_tls_ca;
      s = get_string(v, at, path);
      path = resolve_path(path, base_dir);
    } else if (key == "broker_ack_wait_ms") s = get_int(v, at, 100, 3600 * 1000, c.broker_ack_wait_ms);
    else if (key == "broker_max_deliver") s = get_int(v, at, 1, 1000, c.broker_max_deliver);
    else if (key == "broker_replicas") s = get_int(v, at, 1, 5, c.broker_replicas);
    else if (key == "engine") s = get_string(v, at, c.engine);
    else if (key == "sim_tokens_per_s") s = get_rate(v, at, c.sim_tokens_per_s);
    else if (key == "sim_prefill_tokens_per_s") s = get_rate(v, at, c.sim_prefill_tokens_per_s);
    // The network guards.
    else if (key == "allow_hosts") s = get_strings(v, at, "host name", c.allow_hosts);
    else if (key == "allow_origins") s = get_strings(v, at, "origin", c.allow_origins);
    else if (key == "max_connections") s = get_int(v, at, 1, 1 << 20, c.max_connections);
    else if (key == "max_connections_per_ip") s = get_int(v, at, 1, 1 << 20, c.max_connections_per_ip);
    else if (key == "handshake_timeout_s") s = get_int(v, at, 1, 3600, c.handshake_timeout_s);
    else if (key == "idle_timeout_s") s = get_int(v, at, 1, 7 * 24 * 3600, c.idle_timeout_s);
    // What preparing one request may cost.
    else if (key == "max_json_depth") s = get_int(v, at, 8, 1024, c.max_json_depth);
    else if (key == "max_grammar_elements") s = get_int(v, at, 1000, int64_t(1) << 32, c.max_grammar_elements);
    else if (key == "prepare_threads") s = get_int(v, at, 1, 64, c.prepare_threads);
    else if (key == "prepare_queue") s = get_int(v, at, 1, 1 << 20, c.prepare_queue);
    else if (key == "prepare_stack_kb") s = get_int(v, at, 256, 1 << 20, c.prepare_stack_kb);
    else if (key == "tiers") {
      const toml::table* tiers = v.as_table();
      if (!tiers) return Status::error(at + ": expected [tiers.NAME] tables");
      for (auto&& [name, tv] : *tiers) {
        const toml::table* t = tv.as_table();
        const std::string where = origin + ": tiers." + std::string(name.str());
        if (!t) return Status::error(where + ": expected a table");
        TierConfig tier;
        if (Status ts = parse_tier(std::string(name.str()), *t, where, base_dir, tier); !ts.ok()) return ts;
        c.tiers.push_back(std::move(tier));
      }
    } else {
      return Status::error(at + ": unknown key (see `revis serve --help` and docs/protocol.md for the config keys)");
    }
    if (!s.ok()) return s;
  }
  return c;
}

Result<NodeConfig> load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, fs::path(path).parent_path().string());
}

Status apply_environment(NodeConfig& c, const std::function<const char*(const char*)>& getenv) {
  auto value = [&](const char* name) -> std::optional<std::string> {
    const char* v = getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  if (auto host = value("REVIS_HOST")) c.host = *host;
  if (auto model = value("REVIS_MODEL")) c.model = *model;
  // The token where `ps` does not show it; it replaces the file's either way.
  if (auto token = value("REVIS_TOKEN")) {
    c.token = *token;
    c.token_file.clear();
  }
  if (auto port = value("REVIS_PORT")) {
    int parsed = -1;
    const auto [end, error] = std::from_chars(port->data(), port->data() + port->size(), parsed);
    if (error != std::errc() || end != port->data() + port->size() || parsed < 0 || parsed > 65535)
      return Status::error("REVIS_PORT=" + *port + ": expected a port number 0..65535");
    c.port = parsed;
  }
  return {};
}

Status apply_overrides(NodeConfig& c, const ConfigOverrides& o) {
  if (o.name) c.name = *o.name;
  if (o.host) c.host = *o.host;
  // A token given one way replaces one given the other way in the file.
  if (o.token) {
    c.token = *o.token;
    c.token_file.clear();
  }
  if (o.token_file) {
    c.token_file = *o.token_file;
    c.token.clear();
  }
  if (o.model) c.model = *o.model;
  if (o.default_tier) c.default_tier = *o.default_tier;
  if (o.catalog) c.catalog = *o.catalog;
  if (o.port) c.port = *o.port;
  if (o.queue_limit) c.queue_limit = *o.queue_limit;
  if (o.ctx) c.ctx = *o.ctx;
  if (o.threads) c.threads = *o.threads;
  if (o.draft) c.draft = *o.draft;
  if (o.lookup) c.lookup = true;
  if (o.draft_max) c.draft_max = *o.draft_max;
  if (o.parallel) c.parallel = *o.parallel;
  if (o.device) c.device = *o.device;
  if (o.gpu_layers) c.gpu_layers = *o.gpu_layers;
  if (o.batch_tokens) c.batch_tokens = *o.batch_tokens;
  if (o.memory_budget_mb) c.memory_budget_mb = *o.memory_budget_mb;
  if (o.kv_dir) c.kv_dir = *o.kv_dir;
  if (o.chat_template) c.chat_template = *o.chat_template;
  if (o.kv_budget_mb) c.kv_budget_mb = *o.kv_budget_mb;
  if (o.journal) c.journal = *o.journal;
  if (o.broker) c.broker = *o.broker;
  if (o.broker_creds) c.broker_creds = *o.broker_creds;
  if (o.broker_ack_wait_ms) c.broker_ack_wait_ms = *o.broker_ack_wait_ms;
  if (o.broker_max_deliver) c.broker_max_deliver = *o.broker_max_deliver;
  if (o.broker_replicas) c.broker_replicas = *o.broker_replicas;
  if (o.max_attempts) c.max_attempts = *o.max_attempts;
  if (o.heartbeat_ms) c.heartbeat_ms = *o.heartbeat_ms;
  if (o.result_ttl_s) c.result_ttl_s = *o.result_ttl_s;
  if (o.resume_window_ms) c.resume_window_ms = *o.resume_window_ms;
  if (o.max_kept_results) c.max_kept_results = *o.max_kept_results;
  if (o.max_kept_results_mb) c.max_kept_results_mb = *o.max_kept_results_mb;
  if (o.log_level) c.log_level = *o.log_level;
  if (o.log_format) c.log_format = *o.log_format;
  c.peers.insert(c.peers.end(), o.peers.begin(), o.peers.end());
  if (o.discover) c.discover = true;
  if (o.engine) c.engine = *o.engine;
  c.allow_hosts.insert(c.allow_hosts.end(), o.allow_hosts.begin(), o.allow_hosts.end());
  c.allow_origins.insert(c.allow_origins.end(), o.allow_origins.begin(), o.allow_origins.end());
  if (o.max_connections) c.max_connections = *o.max_connections;
  if (o.max_connections_per_ip) c.max_connections_per_ip = *o.max_connections_per_ip;
  if (o.handshake_timeout_s) c.handshake_timeout_s = *o.handshake_timeout_s;
  if (o.idle_timeout_s) c.idle_timeout_s = *o.idle_timeout_s;
  if (o.sim_tokens_per_s) c.sim_tokens_per_s = *o.sim_tokens_per_s;
  if (o.sim_prefill_tokens_per_s) c.sim_prefill_tokens_per_s = *o.sim_prefill_tokens_per_s;
  for (const std::string& spec : o.tiers) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return Status::error("--tier " + spec + ": expected NAME=PATH");
    TierConfig tier{.name = spec.substr(0, eq), .model = spec.substr(eq + 1)};
    bool replaced = false;
    for (TierConfig& t : c.tiers)
      if (t.name == tier.name) {
        t.model = tier.model;
        replaced = true;
      }
    if (!replaced) c.tiers.push_back(tier);
  }
  return {};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Status validate_config(NodeConfig& c) {
  if (c.port < 0 || c.port > 65535) return Status::error("port " + std::to_string(c.port) + " (expected 0..65535)");
  if (c.queue_limit < 1) return Status::error("queue_limit must be at least 1");
  if (c.ctx < 0) return Status::error("ctx must be >= 0");
  if (c.threads < 0) return Status::error("threads must be >= 0");
  if (c.draft_max < 0 || c.draft_max > kMaxDraft)
    return Status::error("draft_max " + std::to_string(c.draft_max) + " (expected 0..64, 0 = the default)");
  if (c.parallel < 0 || c.parallel > kMaxSlots)
    return Status::error("parallel " + std::to_string(c.parallel) + " (expected 0.." + std::to_string(kMaxSlots) +
                         ", 0 = from the memory budget)");
  if (c.device != "cpu" && c.device != "vulkan" && (c.device.rfind("vulkan:", 0) != 0 || c.device.size() == 7 ||
                                                     c.device.find_first_not_of("0123456789", 7) != std::string::npos))
    return Status::error("device \"" + c.device + "\" (expected cpu, vulkan or vulkan:N)");
  if (c.gpu_layers < -1) return Status::error("gpu_layers " + std::to_string(c.gpu_layers) + " (expected -1 or more)");
  if (c.batch_tokens < 1 || c.batch_tokens > kMaxBatchTokens)
    return Status::error("batch_tokens " + std::to_string(c.batch_tokens) + " (expected 1.." +
                         std::to_string(kMaxBatchTokens) + ")");
  if (!c.draft.empty() && c.model.empty()) return Status::error("draft: a draft model needs the model it drafts for (-m)");
  if (c.max_attempts < 1 || c.max_attempts > 100)
    return Status::error("max_attempts " + std::to_string(c.max_attempts) + " (expected 1..100)");
  if (c.heartbeat_ms < 10) return Status::error("heartbeat_ms " + std::to_string(c.heartbeat_ms) + " (expected at least 10)");
  if (c.result_ttl_s < 0) return Status::error("result_ttl_s must be >= 0");
  if (c.resume_window_ms < 0) return Status::error("resume_window_ms must be >= 0");
  if (c.max_kept_results < 1) return Status::error("max_kept_results must be at least 1");
  if (c.max_kept_results_mb < 1) return Status::error("max_kept_results_mb must be at least 1");
  if (c.host.empty()) return Status::error("host is empty");
  if (!c.token_file.empty()) {
    if (!c.token.empty()) return Status::error("token and token_file are both set: give one");
    std::ifstream in(c.token_file, std::ios::binary);
    if (!in) return Status::error(c.token_file + ": cannot read the token file");
    std::ostringstream text;
    text << in.rdbuf();
    c.token = text.str();
    while (!c.token.empty() && (c.token.back() == '\n' || c.token.back() == '\r')) c.token.pop_back();
    if (Status s = valid_token(c.token); !s.ok()) return Status::error(c.token_file + ": " + s.message());
  } else if (!c.token.empty()) {
    if (Status s = valid_token(c.token); !s.ok()) return s;
  }
  if (!c.broker.empty() && (!c.peers.empty() || c.discover))
    return Status::error("broker and peers/discover are two ways of sharing tickets: use one (docs/scale-out.md)");
  if (c.broker_ack_wait_ms < 100) return Status::error("broker_ack_wait_ms must be at least 100");
  if (c.broker_max_deliver < 1) return Status::error("broker_max_deliver must be at least 1");
  if (!is_loopback_host(c.host) && c.token.empty())
    return Status::error("refusing to listen on " + c.host +
                         " without a token: anyone who can reach it could use this machine. Set --token (or REVIS_TOKEN, "
                         "or token = \"...\" in the config), or listen on 127.0.0.1");
  if (c.max_connections < 1 || c.max_connections_per_ip < 1)
    return Status::error("max_connections and max_connections_per_ip must be at least 1");
  if (c.handshake_timeout_s < 1 || c.idle_timeout_s < 1)
    return Status::error("handshake_timeout_s and idle_timeout_s must be at least 1 (seconds)");
  for (const std::string& h : c.allow_hosts)
    if (h.empty() || h.find_first_of(" /\t") != std::string::npos)
      return Status::error("allow_hosts \"" + h + "\": expected a host name, HOST:PORT or *");
  for (const std::string& o : c.allow_origins)
    if (o != "*" && !((o.starts_with("http://") || o.starts_with("https://")) && o.find('/', o.find("//") + 2) == std::string::npos &&
                      o.find(' ') == std::string::npos))
      return Status::error("allow_origins \"" + o + "\": expected SCHEME://HOST[:PORT] (as a browser sends it) or *");
  for (const TierConfig& t : c.tiers) {
    if (!valid_tier_name(t.name)) return Status::error("tier name \"" + t.name + "\": expected [A-Za-z0-9_.-], at most 64 bytes");
    if (t.model.empty()) return Status::error("tier " + t.name + " has no model");
  }
  for (size_t i = 0; i < c.tiers.size(); ++i)
    for (size_t j = i + 1; j < c.tiers.size(); ++j)
      if (c.tiers[i].name == c.tiers[j].name) return Status::error("tier " + c.tiers[i].name + " is defined twice");
  if (c.engine != "gguf" && c.engine != "sim")
    return Status::error("engine \"" + c.engine + "\" (expected \"gguf\" or \"sim\")");
  if (c.engine == "sim") {
    // The simulated engine serves every tier; a model given alongside it
    // would be silently ignored, which hides a mistake.
    if (!c.model.empty() || !c.tiers.empty())
      return Status::error("engine sim runs no model: remove -m/--tier (or model and [tiers] from the config)");
    if (!(c.sim_tokens_per_s > 0) || !(c.sim_prefill_tokens_per_s > 0))
      return Status::error("sim_tokens_per_s and sim_prefill_tokens_per_s must be above 0");
    if (c.default_tier.empty()) c.default_tier = "default";
  } else {
    if (c.tiers.empty() && c.model.empty())
      return Status::error("no model: give -m MODEL, --tier NAME=PATH, or tiers in the config file");
    if (c.default_tier.empty()) c.default_tier = c.model.empty() ? c.tiers.front().name : "default";
    bool known = !c.model.empty() && c.default_tier == "default";
    for (const TierConfig& t : c.tiers) known = known || t.name == c.default_tier;
    if (!known) return Status::error("default_tier " + c.default_tier + " is not a configured tier");
  }
  if (c.name.empty()) {
    char host[256] = {};
    c.name = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "revis-node";
  }
  return {};
}

}  // namespace revis::node
