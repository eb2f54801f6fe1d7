// The node's one typed configuration: defaults here, then a TOML file
// (revis serve --config FILE), then the environment variables REVIS_HOST,
// REVIS_PORT, REVIS_MODEL and REVIS_TOKEN (for containers), then command-line flags,
// each overriding the one before. validate() checks the result once, before
// anything starts.
//
//   name = "node-a"              # reported in every result (default: host name)
//   host = "127.0.0.1"           # listen address
//   port = 8080
//   token = "secret"             # required for a non-loopback host (visible ASCII, no spaces)
//   token_file = "/etc/revis/token"  # or read it from this file (trailing newline dropped; --token-file)
//   queue_limit = 64             # jobs waiting, not counting the running one
//   model = "/models/m.gguf"     # serves every tier no [tiers.*] names (-m); or "ORG/REPO:QUANT" (docs/models.md)
//   default_tier = "small"       # OpenAI requests naming no known tier use it
//   ctx = 4096                   # context per model unless its tier says (-c)
//   threads = 8                  # threads per model unless its tier says (-t)
//   chat_template = "chatml.jinja"  # replaces the models' own templates unless the tier says (--chat-template)
//   draft = "/models/m-q4_0.gguf"  # speculative decoding for `model` with this draft model, or "mtp": its own head (--draft)
//   lookup = false               # speculative decoding with prompt lookup, every tier unless it says (--lookup)
//   draft_max = 8                # tokens per draft unless a tier says (--draft-max)
//   parallel = 4                 # slots: tickets decoded together in one forward pass, per tier unless it says
//                                #   (--parallel; 0: as many KV caches as the memory budget holds, at most 8)
//   batch_tokens = 256           # tokens one forward pass carries at most: prompt chunks beside the slots' steps
//   device = "vulkan:0"          # where the layers run: "cpu" (default) or one GPU; a node per GPU (--device)
//   gpu_layers = 99              # with a GPU: the last N layers on it, unless a tier says (-ngl; -1: as many as fit)
//   memory_budget_mb = 16384     # resident models above this are unloaded LRU (0: 3/4 of RAM)
//   kv_dir = "kv"                # KV checkpoints: prompts resume from saved prefixes (docs/kvstore.md)
//   kv_budget_mb = 20480         # disk the checkpoints may use (0: no limit)
//   max_message_bytes = 262144   # WebSocket ticket size limit
//   max_request_bytes = 1048576  # HTTP body size limit
//   catalog = "tasks.toml"       # task overrides (relative to this file)
//   shutdown_grace_ms = 10000    # SIGTERM: how long the running job may finish
//   peers = ["10.0.0.2:8080"]    # other nodes tickets may be dispatched to (--peer)
//   discover = true              # also find peers, and advertise this node, with mDNS/DNS-SD (--discover)
//   max_attempts = 3             # runs of one ticket before it fails (a node died, a link dropped)
//   heartbeat_ms = 1000          # peer status push interval; 3 missed = the link is dead
//   journal = "node.journal"     # SQLite journal of accepted tickets (none if empty)
//   result_ttl_s = 600           # finished results kept for resume and duplicate ticketIDs
//   resume_window_ms = 2000      # a disconnected client's tickets wait this long for a resume
//   max_kept_results = 10000     # finished results kept in RAM for resume and duplicates, oldest dropped first
//   max_kept_results_mb = 64     # ... and the RAM they may take (with a journal, older ones are read from it)
//   log_level = "info"           # debug, info, warn or error: the lowest level logged
//   log_format = "text"          # text, or json (one JSON object per line)
//   broker = "nats://10.0.0.9:4222"  # NATS JetStream servers the tickets go through (docs/scale-out.md; --broker)
//   broker_creds = "node.creds"  # NATS credentials file (--broker-creds)
//   broker_tls_ca = "ca.pem"     # CA for tls:// brokers
//   broker_ack_wait_ms = 30000   # a pulled ticket not acknowledged (node dead) is redelivered after this
//   broker_max_deliver = 5       # deliveries of one ticket before the broker gives up on it
//   broker_replicas = 1          # copies of the streams in a NATS cluster (3: survives a dead server)
//   engine = "gguf"              # "sim": no models, simulated tokens (scale tests)
//   sim_tokens_per_s = 50        # the simulated engine's generation speed
//   sim_prefill_tokens_per_s = 1000
//   allow_hosts = ["node.lan"]   # Host names a tokenless node answers besides its own (--allow-host; "*": any)
//   allow_origins = ["https://app.example"]  # browser pages allowed to call the node, with CORS (--allow-origin)
//   max_connections = 4096       # open connections in all (also bounded by the descriptor limit)
//   max_connections_per_ip = 256 # open connections from one source address
//   handshake_timeout_s = 10     # a new connection's first request must arrive within this
//   idle_timeout_s = 300         # an idle keep-alive connection, or a WebSocket with no ticket open, is closed
//   max_json_depth = 64          # a request body's JSON nests at most this deep
//   max_grammar_elements = 1000000  # a request's grammar, schema or tools, compiled (about 40 bytes each)
//   prepare_threads = 2          # threads that parse and compile requests, off the I/O thread
//   prepare_queue = 256          # requests waiting for them; past it a 503
//   prepare_stack_kb = 8192      # each such thread's stack
//   [tiers.small]
//   model = "qwen2.5-1.5b-q8_0.gguf"
//   ctx = 8192
//   threads = 8
//   draft = "qwen2.5-0.5b-q8_0.gguf"  # or lookup = true; draft_max = 8
//   parallel = 2
//   gpu_layers = 20
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::node {

constexpr int kMaxSlots = 256;              // parallel
constexpr int kMaxBatchTokens = 1 << 16;    // batch_tokens

struct TierConfig {
  std::string name;
  std::string model;
  int ctx = 0;      // 0: NodeConfig::ctx
  int threads = 0;  // 0: NodeConfig::threads
  // {} on each field: designated initializers may leave any of them out.
  std::string chat_template{};  // empty: NodeConfig::chat_template
  std::string draft{};          // draft model for speculative decoding (revis/draft.h)
  std::optional<bool> lookup{}; // prompt lookup; absent: NodeConfig::lookup
  int draft_max = 0;            // 0: NodeConfig::draft_max
  int parallel = 0;             // 0: NodeConfig::parallel
  std::optional<int> gpu_layers{};  // absent: NodeConfig::gpu_layers
};

struct NodeConfig {
  std::string name;  // empty: the host name
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string token;
  std::string token_file;  // read into `token` by validate_config
  int queue_limit = 64;
  std::string model;  // fallback model for every tier not listed
  std::vector<TierConfig> tiers;
  std::string default_tier;
  int ctx = 0;
  int threads = 0;
  std::string chat_template;  // Jinja file replacing every model's own template (empty: the model's)
  std::string draft;   // draft model of `model` (--draft)
  bool lookup = false; // prompt lookup for every tier that does not say (--lookup)
  int draft_max = 0;   // tokens per draft unless a tier says; 0: kDefaultDraftMax (--draft-max)
  int parallel = 0;    // slots per tier unless it says; 0: from the memory budget (--parallel)
  // Where the models' layers run (--device): "cpu", or one GPU, "vulkan:N"
  // (one node per GPU: one inference per device), and how many of the last
  // layers go there (-ngl; -1: as many as fit), unless a tier says.
  std::string device = "cpu";
  int gpu_layers = -1;
  int batch_tokens = 256;  // a forward pass's token budget (--batch-tokens)
  uint64_t memory_budget_mb = 0;
  std::string kv_dir;  // empty: prefixes are reused from RAM only
  uint64_t kv_budget_mb = 0;
  uint64_t max_message_bytes = 256 * 1024;
  uint64_t max_request_bytes = 1024 * 1024;
  std::string catalog;
  int shutdown_grace_ms = 10000;
  // The fabric (docs/fabric.md).
  std::vector<std::string> peers;  // HOST:PORT
  bool discover = false;           // mDNS/DNS-SD through avahi-daemon (fabric/discovery.h)
  int max_attempts = 3;
  int heartbeat_ms = 1000;
  std::string journal;
  int result_ttl_s = 600;
  int resume_window_ms = 2000;
  int max_kept_results = 10000;
  uint64_t max_kept_results_mb = 64;
  std::string log_level = "info";
  std::string log_format = "text";
  // Scale-out on NATS JetStream (docs/scale-out.md): set, tickets go
  // through the broker instead of the peer fabric.
  std::string broker;  // nats://HOST:PORT[,HOST:PORT...]
  std::string broker_creds;
  std::string broker_tls_ca;
  int broker_ack_wait_ms = 30000;
  int broker_max_deliver = 5;
  int broker_replicas = 1;
  // "gguf" runs the tiers' models; "sim" runs the simulated engine
  // (node/sim_inference.h), which needs no model and serves every tier.
  std::string engine = "gguf";
  double sim_tokens_per_s = 50;
  double sim_prefill_tokens_per_s = 1000;
  // The network guards (net/request_guard.h; docs/protocol.md, "Limits").
  std::vector<std::string> allow_hosts;
  std::vector<std::string> allow_origins;
  int max_connections = 4096;
  int max_connections_per_ip = 256;
  int handshake_timeout_s = 10;
  int idle_timeout_s = 300;
  // Request preparation (net/preparation_pool.h, protocol/request_limits.h;
  // docs/protocol.md, "Limits and browsers").
  int max_json_depth = 64;
  uint64_t max_grammar_elements = 1'000'000;
  int prepare_threads = 2;
  int prepare_queue = 256;
  uint64_t prepare_stack_kb = 8192;
};

// Values from the command line; set ones replace the file's.
struct ConfigOverrides {
  std::optional<std::string> name, host, token, token_file, model, default_tier, catalog, engine;
  std::optional<std::string> journal, broker, broker_creds, draft, device;
  bool lookup = false;  // --lookup turns it on
  std::optional<int> draft_max, parallel, batch_tokens, gpu_layers;
  std::optional<int> broker_ack_wait_ms, broker_max_deliver, broker_replicas;
  std::optional<int> port, queue_limit, ctx, threads, max_attempts, heartbeat_ms, result_ttl_s, resume_window_ms;
  std::vector<std::string> peers;  // added to the file's
  bool discover = false;           // --discover turns it on; off is the default, or the file's
  std::optional<uint64_t> memory_budget_mb;
  std::optional<int> max_kept_results;
  std::optional<uint64_t> max_kept_results_mb;
  std::optional<std::string> log_level, log_format;
  std::optional<std::string> kv_dir, chat_template;
  std::optional<uint64_t> kv_budget_mb;
  std::vector<std::string> tiers;  // "NAME=PATH", replacing a file tier of the same name
  std::optional<double> sim_tokens_per_s, sim_prefill_tokens_per_s;
  std::vector<std::string> allow_hosts, allow_origins;  // added to the file's
  std::optional<int> max_connections, max_connections_per_ip, handshake_timeout_s, idle_timeout_s;
};

// Parses TOML text; relative paths are taken relative to base_dir. Unknown
// keys and wrong types are errors naming origin and key.
Result<NodeConfig> parse_config(const std::string& toml_text, const std::string& origin, const std::string& base_dir);
Result<NodeConfig> load_config_file(const std::string& path);
// The REVIS_* variables that are set and not empty; `getenv` is the
// environment's lookup (std::getenv; a map in tests). A bad value is an
// error naming the variable.
Status apply_environment(NodeConfig& config, const std::function<const char*(const char*)>& getenv);
Status apply_overrides(NodeConfig& config, const ConfigOverrides& overrides);

// Ranges, at least one model (none with the sim engine), known default tier, and no non-loopback bind
// without a token. Reads token_file into token. Fills in the defaults that depend on the machine (name,
// default tier).
Status validate_config(NodeConfig& config);

// "127.0.0.1", "::1", "localhost" and the rest of 127.0.0.0/8.
bool is_loopback_host(const std::string& host);

}  // namespace revis::node
