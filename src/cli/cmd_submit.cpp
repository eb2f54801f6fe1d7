// revis submit: send one ticket to a node and print the answer.
//
//   revis submit --node 127.0.0.1:8080 --task summarize --arg text=@notes.txt --stream
//
//   revis submit --broker nats://10.0.0.9:4222 --task summarize --arg text=hi
//
// Streamed text goes to stdout as it arrives, statistics to stderr; the exit
// code is 0 for `done` and 1 for an error (the error code and message go to
// stderr).
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/ticket_channel.h"

namespace revis::cli {
namespace {

struct SubmitArgs {
  ChannelTarget target;
  std::string task, catalog, id;
  std::vector<std::string> args;
  bool stream = false, json = false;
  int timeout_s = 600;
};

std::string uuid4() {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t(rd()) << 32) ^ rd());
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~0xf000ull) | 0x4000ull;                  // version 4
  lo = (lo & ~(3ull << 62)) | (2ull << 62);            // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(hi >> 32),
                (unsigned long long)((hi >> 16) & 0xffff), (unsigned long long)(hi & 0xffff),
                (unsigned long long)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
  return buf;
}

// NAME=VALUE; VALUE "@path" reads the file, "@@..." stands for a literal "@...".
Status parse_arg(const std::string& spec, nlohmann::json& args) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return Status::error("--arg " + spec + ": expected NAME=VALUE or NAME=@FILE");
  const std::string name = spec.substr(0, eq);
  std::string value = spec.substr(eq + 1);
  if (value.rfind("@@", 0) == 0) {
    value = value.substr(1);
  } else if (value.rfind('@', 0) == 0) {
    auto content = read_file(value.substr(1));
    if (!content.ok()) return content.status().with_context("--arg " + name);
    value = *content;
  }
  args[name] = value;
  return {};
}

void print_stats(const nlohmann::json& s) {
  auto num = [&](const char* key) { return s.value(key, 0.0); };
  std::fprintf(stderr,
               "prompt %d tokens, prefill %.1f tok/s; generated %d tokens, %.1f tok/s; queue wait %.0f ms; "
               "first token after %.0f ms; total %.0f ms\n"
               "node %s, tier %s, model %s (%s), catalogue %s\n",
               s.value("promptTokens", 0), num("prefillTokPerSec"), s.value("generatedTokens", 0), num("genTokPerSec"),
               num("queueWaitMs"), num("ttftMs"), num("totalMs"), s.value("node", "").c_str(), s.value("tier", "").c_str(),
               s.value("model", "").c_str(), s.value("modelDigest", "").c_str(), s.value("catalog", "").c_str());
}

int submit(const SubmitArgs& a) {
  nlohmann::json ticket = {{"type", "ticket"},
                           {"ticketID", a.id.empty() ? uuid4() : a.id},
                           {"taskType", a.task},
                           {"isStreaming", a.stream},
                           {"args", nlohmann::json::object()}};
  for (const std::string& spec : a.args)
    if (Status s = parse_arg(spec, ticket["args"]); !s.ok()) return fail(s.message());
  if (!a.catalog.empty()) ticket["catalog"] = a.catalog;

  const int timeout_ms = a.timeout_s * 1000;
  auto client = open_channel(a.target, std::min(timeout_ms, 30000));
  if (!client.ok()) return fail(client.status().message());
  std::string text;
  try {
    text = ticket.dump();
  } catch (const nlohmann::json::exception&) {
    return fail("an --arg is not valid UTF-8");
  }
  if (Status s = (*client)->send(text); !s.ok()) return fail(s.message());

  bool streamed_any = false;
  while (true) {
    auto message = (*client)->receive(timeout_ms);
    if (!message.ok()) return fail("no answer from the " + channel_name(a.target) + ": " + message.status().message());
    nlohmann::json event = nlohmann::json::parse(*message, nullptr, false);
    if (event.is_discarded() || !event.is_object()) return fail("the " + channel_name(a.target) + " sent something that is not JSON");
    const std::string type = event.value("type", "");
    if (type == "accepted") {
      const int position = event.value("position", 0);
      if (position > 0) std::fprintf(stderr, "queued: %d ahead\n", position);
    } else if (type == "token") {
      const std::string piece = event.value("text", "");
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      streamed_any = true;
    } else if (type == "done") {
      if (a.json) {
        std::printf("%s\n", event.dump().c_str());
      } else {
        if (!streamed_any) {
          const std::string full = event.value("text", "");
          std::fwrite(full.data(), 1, full.size(), stdout);
        }
        std::printf("\n");
        if (event.contains("stats") && event["stats"].is_object()) print_stats(event["stats"]);
      }
      (*client)->close();
      return 0;
    } else if (type == "error") {
      if (streamed_any) std::printf("\n");
      (*client)->close();
      return fail(event.value("code", "internal") + ": " + event.value("message", ""));
    }
  }
}

}  // namespace

void register_submit(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("submit", "Send one ticket to a node and print the result");
  auto a = std::make_shared<SubmitArgs>();
  cmd->add_option("--node", a->target.node, "Node address HOST:PORT")->capture_default_str();
  cmd->add_option("--broker", a->target.broker,
                  "NATS JetStream servers nats://HOST:PORT[,...] instead of a node (docs/scale-out.md); "
                  "a ticketID that already has a result gets that result");
  cmd->add_option("--broker-creds", a->target.broker_creds, "NATS credentials file for --broker");
  cmd->add_option("--task", a->task, "Task type from the node's catalogue")->required();
  cmd->add_option("--arg", a->args, "Argument NAME=VALUE, or NAME=@FILE to read a file (repeatable)");
  cmd->add_flag("--stream", a->stream, "Stream the text as it is generated");
  cmd->add_option("--token", a->target.token, "Bearer token the node requires");
  cmd->add_option("--catalog", a->catalog, "Refuse to run unless the node's catalogue has this digest");
  cmd->add_option("--id", a->id, "Ticket id (default: a random UUID)");
  cmd->add_flag("--json", a->json, "Print the final `done` event as JSON");
  cmd->add_option("--timeout", a->timeout_s, "Seconds to wait for each message from the node")->capture_default_str();
  cmd->callback([a, &exit_code] { exit_code = submit(*a); });
}

}  // namespace revis::cli
