// revis chat -m MODEL: an interactive conversation on the terminal. Each
// line on stdin is a user message (a line ending in "\" continues on the
// next); the reply streams to stdout. /reset forgets the conversation (the
// system prompt stays), /exit or end of input quits.
//
// The whole conversation is rendered with the model's chat template every
// turn and tokenized so that message text cannot inject control tokens
// (node/chat_template.h). Each turn continues from the KV rows of the
// previous prompt (kvstore/prefix_cache.h), so only the new text is
// evaluated. When the conversation no longer fits the context, the oldest
// exchanges are dropped until it does.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <random>

#include "cli/commands.h"
#include "cli/common.h"
#include "kvstore/prefix_cache.h"
#include "node/chat_template.h"
#include "revis/generate.h"
#include "tokenizer/tokenizer.h"

namespace revis::cli {
namespace {

struct ChatArgs {
  std::string model, system;
  int n_predict = 512, threads = 0, ctx = 0;
  std::optional<uint64_t> seed;
  SamplingParams sampling;
};

// One user message from stdin, joining lines that end in a backslash;
// nullopt at end of input.
std::optional<std::string> read_message(bool interactive) {
  auto show_prompt = [interactive](const char* text) {
    if (!interactive) return;
    std::fputs(text, stdout);
    std::fflush(stdout);
  };
  std::string message, line;
  show_prompt("> ");
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      message += line + "\n";
      show_prompt(". ");
      continue;
    }
    return message + line;
  }
  if (message.empty()) return std::nullopt;
  return message;
}

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
      std::vector<int32_t> tokens = tokenize();
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

 private:
  std::vector<int32_t> tokenize() const {
    const node::ChatPrompt p = node::render_chat(chat_.choice.family, messages_, chat_.special);
    const bool has_bos_text = !chat_.special.bos.empty() && p.text.rfind(chat_.special.bos, 0) == 0;
    return engine_.tokenizer().encode_template(p.text, engine_.add_bos_default() && !has_bos_text, p.message_spans);
  }

  Engine& engine_;
  node::ModelChat chat_;
  std::string system_;
  std::vector<node::ChatMessage> messages_;
};

int chat(ChatArgs& args) {
  if (args.n_predict < 1) return fail("-n: " + std::to_string(args.n_predict) + " (expected >= 1)");
  args.sampling.seed = args.seed ? *args.seed : std::random_device{}();
  if (Status s = args.sampling.validate(); !s.ok()) return fail(s.message());
  auto engine = load_engine({.model_path = args.model, .n_ctx = args.ctx, .n_threads = args.threads});
  if (!engine) return 1;
  const node::ModelChat model_chat = node::model_chat(engine->info());
  if (model_chat.choice.fallback) std::fprintf(stderr, "warning: %s\n", model_chat.choice.warning.c_str());

  const bool interactive = isatty(STDIN_FILENO);
  std::fprintf(stderr, "chat template %s, context %d tokens; /reset forgets the conversation, /exit quits\n",
               node::chat_family_name(model_chat.choice.family), engine->info().n_ctx);
  Conversation conversation(*engine, model_chat, args.system);
  auto cache = kvstore::PrefixCache::open(*engine, {.ram_sessions = 1});
  if (!cache.ok()) return fail(cache.status().message());
  GenerateOptions options;
  options.sampling = args.sampling;
  const int room = std::min(args.n_predict, engine->info().n_ctx / 2);

  while (auto message = read_message(interactive)) {
    if (*message == "/exit" || *message == "/quit") break;
    if (*message == "/reset") {
      conversation.reset();
      std::fprintf(stderr, "(conversation forgotten)\n");
      continue;
    }
    if (message->empty()) continue;
    auto prompt = conversation.prompt_with(*message, room);
    if (!prompt.ok()) {
      fail(prompt.status().message());
      continue;
    }
    options.max_tokens = room;
    auto lease = (*cache)->acquire(*prompt, false);
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
    (*cache)->release(std::move(*lease), *prompt, reply->next_logits, false);
    conversation.add_reply(reply->text);
    const size_t decoded = reply->generated.empty() ? 0 : reply->generated.size() - 1;
    std::fprintf(stderr, "[prompt %d tokens (%d reused) in %.0f ms; reply %zu tokens, %.1f tok/s%s]\n",
                 reply->n_prompt, reply->cached_tokens, reply->prefill_ms, reply->generated.size(),
                 reply->generate_ms > 0 ? decoded * 1000.0 / reply->generate_ms : 0,
                 reply->stop_reason == "length" ? "; cut at -n" : "");
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("chat", "Talk with a model on the terminal (its chat template, streamed replies)");
  auto args = std::make_shared<ChatArgs>();
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-s,--system", args->system, "System prompt");
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens per reply at most")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  cmd->add_option("-c,--ctx-size", args->ctx, "Context size in tokens (default: model's, at most 4096)");
  cmd->add_option("--seed", args->seed, "RNG seed (default: random)");
  add_sampling_options(*cmd, args->sampling);
  cmd->callback([args, &exit_code] { exit_code = chat(*args); });
}

}  // namespace revis::cli
