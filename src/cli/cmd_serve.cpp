// revis serve: run this machine as a node (HTTP + WebSocket on one port).
// Configuration comes from --config FILE, then REVIS_HOST/PORT/MODEL/TOKEN, then the flags; see
// src/node/config.h for the keys and docs/protocol.md for the protocol.
#include <cstdio>
#include <cstdlib>

#ifdef REVIS_HAVE_NATS
#include "broker/serve.h"
#endif
#include "base/log.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/model_flag.h"
#include "fabric/dispatcher.h"
#include "net/server.h"
#include "node/config.h"
#include "node/node.h"
#include "revis/draft.h"

namespace revis::cli {
namespace {

struct ServeArgs {
  std::string config_file;
  node::ConfigOverrides overrides;
};

// The models of the config file, REVIS_MODEL and --tier that name ORG/REPO:QUANT
// (the -m flag's were resolved as it was parsed).
Status resolve_config_models(node::NodeConfig& config) {
  auto resolve = [](std::string& model, const std::string& what) -> Status {
    if (model.empty() || model == kMtpDraft) return Status();
    auto path = resolve_model_reference(model);
    if (!path.ok()) return path.status().with_context(what);
    model = *path;
    return Status();
  };
  if (Status s = resolve(config.model, "model"); !s.ok()) return s;
  if (Status s = resolve(config.draft, "draft"); !s.ok()) return s;
  for (node::TierConfig& tier : config.tiers) {
    if (Status s = resolve(tier.model, "tier " + tier.name + ": model"); !s.ok()) return s;
    if (Status s = resolve(tier.draft, "tier " + tier.name + ": draft"); !s.ok()) return s;
  }
  return Status();
}

int serve(const ServeArgs& args) {
  node::NodeConfig config;
  if (!args.config_file.empty()) {
    auto loaded = node::load_config_file(args.config_file);
    if (!loaded.ok()) return fail(loaded.status().message());
    config = std::move(*loaded);
  }
  if (Status s = node::apply_environment(config, std::getenv); !s.ok()) return usage_error(s.message());
  if (Status s = node::apply_overrides(config, args.overrides); !s.ok()) return fail(s.message());
  if (Status s = node::validate_config(config); !s.ok()) return fail(s.message());
  if (Status s = resolve_config_models(config); !s.ok()) return fail(s.message());
  if (Status s = revis::set_log_options(config.log_level, config.log_format); !s.ok()) return fail(s.message());
  auto node = node::Node::create(std::move(config));
  if (!node.ok()) return fail(node.status().message());
  if (!(*node)->config().broker.empty()) {
#ifdef REVIS_HAVE_NATS
    return broker::serve_with_broker(**node);
#else
    return fail("--broker: this build of revis has no NATS client (it was built without libnats-dev; see docs/scale-out.md)");
#endif
  }
  // Every ticket goes through the fabric's dispatcher, with or without peers.
  auto dispatcher = fabric::Dispatcher::create(**node);
  if (!dispatcher.ok()) return fail(dispatcher.status().message());
  return node::serve(**node, **dispatcher);
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "Run a node: ticket protocol, OpenAI-compatible API and monitoring on one port");
  auto args = std::make_shared<ServeArgs>();
  node::ConfigOverrides& o = args->overrides;
  cmd->add_option("--config", args->config_file, "TOML configuration file (flags override it)");
  cmd->add_option("-m,--model", o.model, "GGUF model serving every tier not given with --tier");
  cmd->add_option("--tier", o.tiers, "Tier NAME=PATH (repeatable)");
  cmd->add_option("--default-tier", o.default_tier, "Tier for OpenAI requests naming no known model");
  cmd->add_option("--host", o.host, "Listen address (default 127.0.0.1; other addresses need --token)");
  cmd->add_option("--port", o.port, "Listen port (default 8080; 0 = any free port)");
  cmd->add_option("--token", o.token, "Require Authorization: Bearer TOKEN (visible to `ps`: prefer --token-file or REVIS_TOKEN)");
  cmd->add_option("--token-file", o.token_file, "Read the token from FILE (its trailing newline dropped)");
  cmd->add_option("--name", o.name, "Node name reported in results (default: host name)");
  cmd->add_option("--queue-limit", o.queue_limit, "Jobs that may wait (default 64)");
  cmd->add_option("-c,--ctx-size", o.ctx, "Context size per model (default: the model's, at most 4096)");
  cmd->add_option("-t,--threads", o.threads, "Threads per model (default: physical cores)");
  cmd->add_option("--draft,--model-draft", o.draft, "Draft model for speculative decoding with -m (same vocabulary)");
  cmd->add_flag("--lookup", o.lookup, "Speculative decoding with prompt lookup on every tier that does not say");
  cmd->add_option("--draft-max", o.draft_max, "Tokens per draft at most (default 8)");
  cmd->add_option("--parallel", o.parallel,
                  "Slots: tickets decoded together in one forward pass (default: as many KV caches as the memory "
                  "budget holds, at most 8)");
  cmd->add_option("--device", o.device,
                  "Where the models' layers run: cpu (default) or one GPU, vulkan:N (a node per GPU; revis devices)");
  cmd->add_option("--gpu-layers,--n-gpu-layers", o.gpu_layers,
                  "With a GPU: how many of the last layers it runs unless a tier says (llama.cpp's -ngl; default: "
                  "as many as fit)");
  cmd->add_option("--batch-tokens", o.batch_tokens,
                  "Tokens one forward pass carries at most; longer prompts go in chunks between the slots' steps "
                  "(default 256)");
  cmd->add_option("--catalog", o.catalog, "TOML file adding or overriding tasks");
  cmd->add_option("--memory-budget", o.memory_budget_mb, "MiB the loaded models may use (default 3/4 of RAM)");
  cmd->add_option("--kv-dir", o.kv_dir, "Directory of KV checkpoints: prompts resume from saved prefixes");
  cmd->add_option("--chat-template", o.chat_template,
                  "Jinja chat template file replacing the models' own (tokenizer.chat_template)");
  cmd->add_option("--kv-budget", o.kv_budget_mb, "MiB the KV directory may hold (default: no limit)");
  cmd->add_option("--engine", o.engine, "gguf (the models; default) or sim (no model, simulated tokens for scale tests)");
  cmd->add_option("--sim-tokens-per-s", o.sim_tokens_per_s, "Generation speed of --engine sim (default 50)");
  cmd->add_option("--sim-prefill-tokens-per-s", o.sim_prefill_tokens_per_s, "Prompt speed of --engine sim (default 1000)");
  cmd->add_option("--peer", o.peers, "Another node HOST:PORT that tickets may be dispatched to (repeatable)");
  cmd->add_flag("--discover", o.discover,
                "Also find peers on the LAN, and advertise this node, with mDNS/DNS-SD (_revis._tcp; needs avahi-daemon)");
  cmd->add_option("--broker", o.broker,
                  "NATS JetStream servers nats://HOST:PORT[,HOST:PORT...]: tickets go through them (docs/scale-out.md)");
  cmd->add_option("--broker-creds", o.broker_creds, "NATS credentials file for --broker");
  cmd->add_option("--broker-ack-wait-ms", o.broker_ack_wait_ms,
                  "A pulled ticket not acknowledged (its node died) is redelivered after this (default 30000)");
  cmd->add_option("--broker-max-deliver", o.broker_max_deliver,
                  "Deliveries of one ticket before the broker gives up on it with an error result (default 5)");
  cmd->add_option("--broker-replicas", o.broker_replicas,
                  "Copies of the broker's streams in a NATS cluster (default 1; 3 survives a dead server)");
  cmd->add_option("--max-attempts", o.max_attempts, "Runs of one ticket before it fails, when nodes die (default 3)");
  cmd->add_option("--heartbeat-ms", o.heartbeat_ms, "Peer state push interval; 3 missed = link dead (default 1000)");
  cmd->add_option("--journal", o.journal, "SQLite file recording accepted tickets, resumed after a restart");
  cmd->add_option("--result-ttl", o.result_ttl_s, "Seconds finished results are kept for resume and duplicates (default 600)");
  cmd->add_option("--resume-window-ms", o.resume_window_ms,
                  "How long a disconnected client's tickets wait for it to resume (default 2000)");
  cmd->add_option("--max-kept-results", o.max_kept_results,
                  "Finished results kept in RAM for resends and resumes, oldest dropped first (default 10000)");
  cmd->add_option("--max-kept-results-mb", o.max_kept_results_mb,
                  "MiB those results may take (default 64); with --journal older ones are read back from it");
  cmd->add_option("--log-level", o.log_level, "Lowest level logged: debug, info (default), warn or error");
  cmd->add_option("--log-format", o.log_format, "text (default) or json: one JSON object per line");
  // The network guards (docs/protocol.md, "Limits").
  cmd->add_option("--allow-host", o.allow_hosts,
                  "Host name a tokenless node also answers besides its addresses, localhost and its names (repeatable; * = any)");
  cmd->add_option("--allow-origin", o.allow_origins,
                  "Browser origin (https://app.example) allowed to call the node, with CORS (repeatable; * = any)");
  cmd->add_option("--max-connections", o.max_connections,
                  "Open connections in all (default 4096; also bounded by the descriptor limit)");
  cmd->add_option("--max-connections-per-ip", o.max_connections_per_ip, "Open connections from one address (default 256)");
  cmd->add_option("--handshake-timeout", o.handshake_timeout_s, "Seconds a new connection has for its first request (default 10)");
  cmd->add_option("--idle-timeout", o.idle_timeout_s,
                  "Seconds before an idle keep-alive connection, or a WebSocket with no ticket open, is closed (default 300)");
  cmd->callback([args, &exit_code] { exit_code = serve(*args); });
}

}  // namespace revis::cli
