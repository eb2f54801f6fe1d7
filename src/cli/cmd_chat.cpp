// revis chat -m MODEL: an interactive conversation on the terminal. Each
// message read by the LineReader (line editing and history on a terminal,
// "\" continues a line) is a user message; the reply streams to stdout.
// Commands start with "/" (kCommands, also in --help). Ctrl-C stops a
// reply and keeps the conversation; at an empty prompt, a second Ctrl-C in
// a row quits, as does Ctrl-D or /exit.
//
// The whole conversation is rendered with the model's chat template every
// turn and tokenized so that message text cannot inject control tokens
// (chat/chat_template.h). Each turn continues from the KV rows of the
// previous prompt (kvstore/prefix_cache.h), so only the new text is
// evaluated; with --kv-dir those rows are also checkpointed on disk, and a
// conversation saved with /save and loaded with /load resumes from them.
// When the conversation no longer fits the context, the oldest exchanges
// are dropped until it does.
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/draft_flags.h"
#include "cli/line_reader.h"
#include "cli/usage.h"
#include "kvstore/prefix_cache.h"
#include "revis/generate.h"

namespace revis::cli {
namespace {

constexpr const char* kCommands =
    "  /help         these commands\n"
    "  /reset        forget the conversation (the system prompt stays)\n"
    "  /system TEXT  set the system prompt (empty: none), keeping the conversation\n"
    "  /save FILE    save the conversation as JSON (with --kv-dir, its KV rows too)\n"
    "  /load FILE    continue a saved conversation (with --kv-dir, from its saved KV rows)\n"
    "  /exit         quit (also /quit, Ctrl-D, or Ctrl-C twice at an empty prompt)\n"
    "A line ending in \\ continues on the next one. Ctrl-C stops a reply.\n";

struct ChatArgs {
  EngineFlags engine;  // -m, -t, --mmap, --device, -ngl
  std::string system, kv_dir, chat_template;
  int n_predict = 512, ctx = 0;
  std::optional<uint64_t> seed;
  SamplingParams sampling;
  DraftFlags draft;
};

class Conversation {
 public:
  Conversation(Engine& engine, node::ModelChat chat, std::string system)
      : engine_(engine), chat_(std::move(chat)), system_(std::move(system)) {
    reset();
  }

  void reset() {
    messages_.clear();
    if (!system_.empty()) messages_.push_back({"system", system_});
  }

  // The prompt for the conversation so far plus `user`, dropping the oldest
  // exchanges while it leaves fewer than `room` tokens of context free.
  // Fails when even the system prompt and `user` alone do not fit.
  Result<std::vector<int32_t>> prompt_with(const std::string& user, int room) {
    messages_.push_back({"user", user});
    const size_t first_turn = system_.empty() ? 0 : 1;
    for (;;) {
      auto rendered = tokenize();
      if (!rendered.ok()) {
        messages_.pop_back();
        return rendered.status();
      }
      std::vector<int32_t> tokens = std::move(*rendered);
      if (static_cast<int>(tokens.size()) + room <= engine_.info().n_ctx) return tokens;
      if (messages_.size() - first_turn <= 1) {
        messages_.pop_back();
        return Status::error("the message has " + std::to_string(tokens.size()) + " tokens with the template; with " +
                             std::to_string(room) + " for the reply it does not fit the context of " +
                             std::to_string(engine_.info().n_ctx) + " (raise -c or lower -n)");
      }
      // Drop the oldest user message and the reply that followed it.
      const auto begin = messages_.begin() + static_cast<long>(first_turn);
      messages_.erase(begin, begin + (messages_[first_turn + 1].role == "assistant" ? 2 : 1));
    }
  }

  void add_reply(std::string text) { messages_.push_back({"assistant", std::move(text)}); }
  // Takes back the message prompt_with() added (its reply was cancelled
  // before it began).
  void drop_last_user() {
    if (!messages_.empty() && messages_.back().role == "user") messages_.pop_back();
  }

  void set_system(std::string system) {
    if (!system_.empty()) messages_.erase(messages_.begin());
    system_ = std::move(system);
    if (!system_.empty()) messages_.insert(messages_.begin(), node::ChatMessage{"system", system_});
  }

  nlohmann::json to_json() const {
    nlohmann::json messages = nlohmann::json::array();
    for (const node::ChatMessage& m : messages_) messages.push_back({{"role", m.role}, {"content", m.content}});
    return {{"messages", messages}};
  }

  // Replaces the conversation with a saved one ({"messages": [...]}).
  Status load_json(const nlohmann::json& j, const std::string& origin) {
    if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array())
      return Status::error(origin + ": expected {\"messages\": [...]}");
    std::vector<node::ChatMessage> messages;
    std::string system;
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      const nlohmann::json& m = j["messages"][i];
      const std::string at = origin + ": messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !m["content"].is_string())
        return Status::error(at + ": expected {\"role\": ..., \"content\": ...} strings");
      const std::string role = m["role"].get<std::string>(), content = m["content"].get<std::string>();
      if (role == "system" && i == 0) system = content;
      else if (role != "user" && role != "assistant")
        return Status::error(at + ".role: \"" + role + "\" (expected user or assistant, or system first)");
      messages.push_back({role, content});
    }
    messages_ = std::move(messages);
    system_ = std::move(system);
    return {};
  }

  size_t size() const { return messages_.size(); }

 private:
  Result<std::vector<int32_t>> tokenize() const {
    auto prompt = node::render_chat(chat_, messages_);
    if (!prompt.ok()) return Status::error("chat template: " + prompt.status().message());
    return node::chat_prompt_tokens(engine_, chat_.special, *prompt);
  }

  Engine& engine_;
  node::ModelChat chat_;
  std::string system_;
  std::vector<node::ChatMessage> messages_;
};

Status save_conversation(const Conversation& conversation, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::error(path + ": cannot open for writing");
  out << conversation.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.flush();
  if (!out) return Status::error(path + ": write failed");
  return {};
}

Status load_conversation(Conversation& conversation, const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Status::error(path + ": not JSON");
  return conversation.load_json(j, path);
}

// The model's chat template, or the --chat-template file's; prints why not.
std::optional<node::ModelChat> load_model_chat(const ModelInfo& info, const std::string& path) {
  std::string source;
  if (!path.empty()) {
    auto text = node::read_chat_template_file(path);
    if (!text.ok()) {
      fail(text.status().message());
      return std::nullopt;
    }
    source = std::move(*text);
  }
  auto chat = node::model_chat(info, source, path);
  if (!chat.ok()) {
    fail(chat.status().message());
    return std::nullopt;
  }
  if (!chat->warning.empty()) std::fprintf(stderr, "warning: %s\n", chat->warning.c_str());
  return std::move(*chat);
}

// "/save  notes.json " -> {"/save", "notes.json"}.
std::pair<std::string, std::string> split_command(const std::string& line) {
  const size_t end = line.find_last_not_of(" \t");
  const std::string trimmed = line.substr(0, end == std::string::npos ? 0 : end + 1);
  const size_t space = trimmed.find_first_of(" \t");
  if (space == std::string::npos) return {trimmed, ""};
  return {trimmed.substr(0, space), trimmed.substr(trimmed.find_first_not_of(" \t", space))};
}

int chat(ChatArgs& args) {
  if (args.n_predict < 1 && args.n_predict != -1)
    return usage_error("-n: " + std::to_string(args.n_predict) + " (expected >= 1, or -1 for no limit)");
  args.sampling.seed = args.seed ? *args.seed : std::random_device{}();
  if (Status s = args.sampling.validate(); !s.ok()) return usage_error(s.message());
  auto engine = load_engine(args.engine.options(args.ctx));
  if (!engine) return 1;
  auto model_chat = load_model_chat(engine->info(), args.chat_template);
  if (!model_chat) return 1;
  auto drafter = make_drafter(*engine, args.draft);
  if (!drafter.ok()) return fail(drafter.status().message());

  std::fprintf(stderr, "chat template: %s, context %d tokens; /help lists the commands, /exit quits\n",
               model_chat->origin.c_str(), engine->info().n_ctx);
  Conversation conversation(*engine, std::move(*model_chat), args.system);
  auto cache = kvstore::PrefixCache::open(
      *engine, {.ram_sessions = 1,
                .kv_dir = args.kv_dir,
                .warn = [](const std::string& message) { std::fprintf(stderr, "warning: %s\n", message.c_str()); }});
  if (!cache.ok()) return fail(cache.status().message());
  GenerateOptions options;
  options.sampling = args.sampling;
  options.cancel = &interrupted();
  options.drafter = drafter->get();
  options.draft_max = args.draft.max;
  // A reply may take half the context at most; -1 asks for no other limit.
  const int room = args.n_predict < 0 ? engine->info().n_ctx / 2 : std::min(args.n_predict, engine->info().n_ctx / 2);

  install_interrupt_handler();
  LineReader reader(default_history_file());
  bool interrupted_before = false;  // the last thing that happened was a Ctrl-C
  for (;;) {
    const LineReader::Input input = reader.read("> ");
    if (input.event == LineReader::Event::kEnd) break;
    if (input.event == LineReader::Event::kInterrupted) {
      interrupted().store(false);
      std::fputc('\n', stdout);
      if (!input.text.empty()) {  // Ctrl-C drops what was typed
        interrupted_before = false;
        continue;
      }
      if (interrupted_before) break;
      std::fprintf(stderr, "(Ctrl-C again or Ctrl-D quits; /help lists the commands)\n");
      interrupted_before = true;
      continue;
    }
    interrupted_before = false;
    const std::string& message = input.text;
    reader.remember(message);
    if (message.empty()) continue;
    if (message[0] == '/') {
      const auto [command, argument] = split_command(message);
      if (command == "/exit" || command == "/quit") break;
      if (command == "/help") {
        std::fputs(kCommands, stderr);
      } else if (command == "/reset") {
        conversation.reset();
        std::fprintf(stderr, "(conversation forgotten)\n");
      } else if (command == "/system") {
        conversation.set_system(argument);
        std::fputs(argument.empty() ? "(no system prompt)\n" : "(system prompt set)\n", stderr);
      } else if ((command == "/save" || command == "/load") && argument.empty()) {
        fail(command + ": name the file (" + command + " FILE)");
      } else if (command == "/save") {
        (*cache)->flush();  // the KV rows of the last prompt, with --kv-dir
        if (Status s = save_conversation(conversation, argument); !s.ok()) fail(s.message());
        else std::fprintf(stderr, "(saved %zu messages to %s)\n", conversation.size(), argument.c_str());
      } else if (command == "/load") {
        if (Status s = load_conversation(conversation, argument); !s.ok()) fail(s.message());
        else std::fprintf(stderr, "(loaded %zu messages from %s)\n", conversation.size(), argument.c_str());
      } else {
        const auto near = closest_name(command, {"/help", "/reset", "/system", "/save", "/load", "/exit", "/quit"});
        fail("unknown command '" + command + "'" + (near ? "; did you mean '" + *near + "'?" : "; /help lists them"));
      }
      continue;
    }
    auto prompt = conversation.prompt_with(message, room);
    if (!prompt.ok()) {
      fail(prompt.status().message());
      continue;
    }
    options.max_tokens = room;
    auto lease = (*cache)->acquire(*prompt);
    if (!lease.ok()) return fail(lease.status().message());
    auto reply = generate(*engine, *lease->session, *prompt, options, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }, lease->cached);
    std::printf("\n");
    if (!reply.ok()) {
      (*cache)->discard(std::move(*lease));
      return fail(reply.status().message());
    }
    if (reply->next_logits.empty()) {  // cancelled during the prompt: the session holds part of it
      (*cache)->discard(std::move(*lease));
      interrupted().store(false);
      conversation.drop_last_user();  // stopped before the reply began
      std::fprintf(stderr, "[stopped during the prompt]\n");
      interrupted_before = true;
      continue;
    }
    (*cache)->release(std::move(*lease), *prompt, reply->next_logits);
    conversation.add_reply(reply->text);
    const bool stopped = reply->stop_reason == "cancelled";
    interrupted_before = stopped;
    interrupted().store(false);
    const size_t decoded = reply->generated.empty() ? 0 : reply->generated.size() - 1;
    const std::string drafts = options.drafter ? "; drafts " + std::to_string(reply->accepted_tokens) + "/" +
                                                     std::to_string(reply->draft_tokens) + " accepted"
                                               : "";
    std::fprintf(stderr, "[prompt %d tokens (%d reused) in %.0f ms; reply %zu tokens, %.1f tok/s%s%s]\n",
                 reply->n_prompt, reply->cached_tokens, reply->prefill_ms, reply->generated.size(),
                 reply->generate_ms > 0 ? decoded * 1000.0 / reply->generate_ms : 0, drafts.c_str(),
                 stopped ? "; stopped by Ctrl-C" : reply->stop_reason == "length" ? "; cut at -n" : "");
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("chat", "Talk with a model on the terminal (its chat template, streamed replies)");
  auto args = std::make_shared<ChatArgs>();
  cmd->add_option("-m,--model", args->engine.model, "GGUF model file")->required();
  cmd->add_option("-s,--system", args->system, "System prompt");
  cmd->add_option("--chat-template", args->chat_template,
                  "Jinja chat template file replacing the model's own (tokenizer.chat_template)");
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens per reply at most; -1 = up to half the context")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->engine.threads, "Threads (default: physical cores)");
  add_engine_flags(*cmd, args->engine);
  cmd->add_option("-c,--ctx-size", args->ctx, "Context size in tokens (default: model's, at most 4096)");
  cmd->add_option("--seed", args->seed, "RNG seed (default: random)");
  cmd->add_option("--kv-dir", args->kv_dir,
                  "Directory of KV checkpoints: /save keeps the conversation's rows there, /load resumes from them");
  add_sampling_options(*cmd, args->sampling);
  add_draft_options(*cmd, args->draft);
  cmd->footer(std::string("Commands at the prompt:\n") + kCommands +
              (line_editing_built_in() ? "Line editing and history (up/down, Ctrl-R) on a terminal; history in "
                                         "$XDG_STATE_HOME/revis/history or ~/.local/state/revis/history."
                                       : "This build reads plain lines (built without libedit: no line editing or "
                                         "history)."));
  cmd->callback([args, &exit_code] { exit_code = chat(*args); });
}

}  // namespace revis::cli
