// `revis chat` end to end: messages on stdin, replies on stdout, the
// per-turn statistics line on stderr; and on a pseudo-terminal, as a user
// at a terminal drives it (Ctrl-C, arrow keys, history).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/run_command.h"
#include "support/terminal.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

struct Chat {
  testing::CommandResult result;
  std::vector<int> prompt_tokens;  // per answered turn, from stderr
};

// Greedy, so that replies are reproducible.
Chat chat(const std::string& input, const std::string& flags = "") {
  TempDir tmp;
  const std::string in = tmp.file("stdin");
  std::ofstream(in) << input;
  Chat c;
  c.result = run_revis("chat -m " + shell_quote(testing::testdata("models/qwen2-Q8_0.gguf").string()) +
                       " --temp 0 -n 8 " + flags + " <" + shell_quote(in));
  const std::regex stats(R"(\[prompt (\d+) tokens)");
  for (auto it = std::sregex_iterator(c.result.err.begin(), c.result.err.end(), stats); it != std::sregex_iterator(); ++it)
    c.prompt_tokens.push_back(std::stoi((*it)[1]));
  return c;
}

TEST(ChatCommand, ResetStartsOverAndHistoryGrowsOtherwise) {
  const Chat one = chat("Hi\n");
  ASSERT_EQ(one.result.exit_code, 0) << one.result.err;
  ASSERT_EQ(one.prompt_tokens.size(), 1u) << one.result.err;
  ASSERT_FALSE(one.result.out.empty());

  const Chat reset = chat("Hi\n/reset\nHi\n/exit\nnever read\n");
  ASSERT_EQ(reset.result.exit_code, 0) << reset.result.err;
  EXPECT_EQ(reset.result.out, one.result.out + one.result.out);
  EXPECT_EQ(reset.prompt_tokens, std::vector<int>(2, one.prompt_tokens[0]));

  const Chat two = chat("Hi\nHi\n");
  ASSERT_EQ(two.prompt_tokens.size(), 2u) << two.result.err;
  // The second prompt holds the first exchange, the reply included.
  EXPECT_GT(two.prompt_tokens[1], 2 * two.prompt_tokens[0]);
  EXPECT_EQ(two.result.out.substr(0, one.result.out.size()), one.result.out);
}

// Later turns continue from the earlier prompt's KV rows, all of them
// (resumed rows give the same logits as a cold prefill: tests/kvstore).
TEST(ChatCommand, LaterTurnsReuseTheConversationsRows) {
  std::string system;
  for (int i = 0; i < 40; ++i) system += "rule " + std::to_string(i) + ". ";
  const std::string flags = "-s " + shell_quote(system);
  const Chat two = chat("Hi\nAgain\n", flags);
  ASSERT_EQ(two.result.exit_code, 0) << two.result.err;
  ASSERT_EQ(two.prompt_tokens.size(), 2u) << two.result.err;
  const std::regex reused(R"(\((\d+) reused\))");
  std::vector<int> reuse;
  for (auto it = std::sregex_iterator(two.result.err.begin(), two.result.err.end(), reused); it != std::sregex_iterator();
       ++it)
    reuse.push_back(std::stoi((*it)[1]));
  ASSERT_EQ(reuse.size(), 2u) << two.result.err;
  EXPECT_EQ(reuse[0], 0);
  // All of the first prompt, or all but its last token where the template
  // writes the reply's start differently from the generation prompt.
  EXPECT_GE(reuse[1], two.prompt_tokens[0] - 1);
  EXPECT_LE(reuse[1], two.prompt_tokens[0]);
}

TEST(ChatCommand, ContinuedLinesAreOneMessage) {
  const Chat joined = chat("Hello \\\nthere\n");
  const Chat single = chat("Hello \nthere\n");
  ASSERT_EQ(joined.prompt_tokens.size(), 1u) << joined.result.err;
  ASSERT_EQ(single.prompt_tokens.size(), 2u) << single.result.err;
}

TEST(ChatCommand, OldExchangesMakeRoomAndOversizedMessagesAreRefused) {
  // A 64-token context holds about two exchanges: later turns drop the
  // oldest instead of failing, and every prompt leaves room for the reply.
  const Chat many = chat("Hi\nHi\nHi\nHi\nHi\nHi\n", "-c 64");
  ASSERT_EQ(many.result.exit_code, 0) << many.result.err;
  ASSERT_EQ(many.prompt_tokens.size(), 6u) << many.result.err;
  for (int n : many.prompt_tokens) EXPECT_LE(n + 8, 64);

  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "word ";
  const Chat refused = chat(huge + "\nHi\n", "-c 64");
  ASSERT_EQ(refused.result.exit_code, 0) << refused.result.err;
  EXPECT_NE(refused.result.err.find("does not fit the context of 64"), std::string::npos) << refused.result.err;
  // The oversized message left nothing behind: "Hi" is answered as a first turn.
  EXPECT_EQ(refused.result.out, chat("Hi\n").result.out);
}

TEST(ChatCommand, SavedConversationResumesFromItsCheckpoint) {
  TempDir tmp;
  std::string system;
  for (int i = 0; i < 40; ++i) system += "rule " + std::to_string(i) + ". ";
  const std::string flags = "-s " + shell_quote(system) + " --kv-dir " + shell_quote(tmp.file("kv"));
  const std::string saved = tmp.file("talk.json");
  const Chat first = chat("Hi\n/save  " + saved + "  \n", flags);
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  std::ifstream in(saved);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["messages"].size(), 3u) << j.dump();
  EXPECT_EQ(j["messages"][1]["content"], "Hi");

  // A new process: the loaded conversation continues like the one that was
  // never interrupted, its prompt resumed from the checkpoint.
  const Chat loaded = chat("/load " + saved + "\nAgain\n", flags);
  const Chat straight = chat("Hi\nAgain\n", "-s " + shell_quote(system));
  ASSERT_EQ(loaded.prompt_tokens.size(), 1u) << loaded.result.err;
  ASSERT_EQ(straight.prompt_tokens.size(), 2u) << straight.result.err;
  EXPECT_EQ(loaded.prompt_tokens[0], straight.prompt_tokens[1]);
  EXPECT_EQ(loaded.result.out, straight.result.out.substr(first.result.out.size()));
  const std::regex reused(R"(\((\d+) reused\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(loaded.result.err, m, reused)) << loaded.result.err;
  EXPECT_GE(std::stoi(m[1]), 128) << loaded.result.err;
}

TEST(ChatCommand, CommandsAndMistypedOnes) {
  const Chat c = chat("/system   \n/sytem be brief\n/reset\n/exit   \nnever read\n");
  ASSERT_EQ(c.result.exit_code, 0) << c.result.err;
  EXPECT_NE(c.result.err.find("unknown command '/sytem'; did you mean '/system'?"), std::string::npos) << c.result.err;
  EXPECT_TRUE(c.prompt_tokens.empty()) << c.result.err;
  const auto help = run_revis("chat --help");
  EXPECT_NE(help.out.find("/save FILE"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("continues on the next one"), std::string::npos) << help.out;
}

// /system TEXT is the same system prompt as -s TEXT; an empty one removes
// it. /help lists the commands and answers nothing.
TEST(ChatCommand, SystemAndHelpCommands) {
  const Chat flag = chat("Hi\n", "-s 'Answer in French.'");
  const Chat command = chat("/system Answer in French.\nHi\n");
  const Chat plain = chat("Hi\n");
  ASSERT_EQ(flag.prompt_tokens.size(), 1u) << flag.result.err;
  ASSERT_EQ(plain.prompt_tokens.size(), 1u) << plain.result.err;
  EXPECT_EQ(command.prompt_tokens, flag.prompt_tokens) << command.result.err;
  EXPECT_EQ(command.result.out, flag.result.out);
  EXPECT_GT(flag.prompt_tokens[0], plain.prompt_tokens[0]);
  const Chat removed = chat("/system Answer in French.\n/system\nHi\n");
  EXPECT_EQ(removed.prompt_tokens, plain.prompt_tokens) << removed.result.err;

  const Chat help = chat("/help\n");
  ASSERT_EQ(help.result.exit_code, 0) << help.result.err;
  for (const char* listed : {"/reset", "/system TEXT", "/save FILE", "/load FILE", "/exit", "continues on the next one"})
    EXPECT_NE(help.result.err.find(listed), std::string::npos) << listed << "\n" << help.result.err;
  EXPECT_TRUE(help.prompt_tokens.empty()) << help.result.err;
  EXPECT_TRUE(help.result.out.empty()) << help.result.out;
}

// ---------------------------------------------------------------- on a terminal

// `revis chat` on a pseudo-terminal, its history under `home`.
class TerminalChat : public testing::Terminal {
 public:
  TerminalChat(const std::vector<std::string>& flags, const std::string& home)
      : Terminal(arguments(flags), {{"HOME", home}, {"TERM", "xterm"}, {"XDG_STATE_HOME", ""}}) {}

 private:
  static std::vector<std::string> arguments(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"chat", "-m", testing::testdata("models/qwen2-Q8_0.gguf").string(),
                                     "--temp", "0", "-t", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }
};

std::vector<int> prompt_sizes(const std::string& output) {
  std::vector<int> sizes;
  const std::regex stats(R"(\[prompt (\d+) tokens)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), stats); it != std::sregex_iterator(); ++it)
    sizes.push_back(std::stoi((*it)[1]));
  return sizes;
}

// Ctrl-C during a reply stops it and keeps the conversation, the partial
// reply included; a second Ctrl-C at the empty prompt that follows quits.
TEST(ChatOnATerminal, CtrlCStopsTheReplyAndKeepsTheSession) {
  TempDir home;
  // A context this large keeps an unstopped reply running for seconds even
  // on a fast machine (the default context of 4096 fills in about a second),
  // so that the Ctrl-C lands while the reply is still being generated.
  TerminalChat chat({"-n", "-1", "-c", "32768"}, home.path().string());
  ASSERT_TRUE(chat.wait_for("> ")) << chat.output();
  const auto stop_reply = [&](const std::string& message) {
    const size_t start = chat.output().size();
    chat.type_at_prompt(message + "\r");
    ASSERT_TRUE(chat.wait_for(message, start)) << chat.output();
    const size_t reply_start = chat.output().find(message, start) + message.size();
    // Some of the reply, then Ctrl-C.
    ASSERT_TRUE(chat.wait_until([&](const std::string& out) { return out.size() > reply_start + 200; }))
        << chat.output();
    chat.type("\x03");
    ASSERT_TRUE(chat.wait_for("stopped by Ctrl-C", start)) << chat.output();
    ASSERT_TRUE(chat.wait_for("> ", chat.output().find("stopped by Ctrl-C", start))) << chat.output();
  };
  stop_reply("Hi");
  stop_reply("Again");
  const std::vector<int> sizes = prompt_sizes(chat.output());
  ASSERT_EQ(sizes.size(), 2u) << chat.output();
  // The second prompt holds the first exchange, the stopped reply included
  // (its text, tokenized again, may take fewer tokens than were sampled).
  std::smatch reply;
  ASSERT_TRUE(std::regex_search(chat.output(), reply, std::regex(R"(reply (\d+) tokens)"))) << chat.output();
  const int first_reply = std::stoi(reply[1]);
  EXPECT_GE(first_reply, 20);
  EXPECT_GT(sizes[1], sizes[0] + first_reply / 2) << chat.output();
  chat.type_at_prompt("\x03");
  EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
}

// Arrow keys edit the line; up and Ctrl-R recall earlier messages, also
// those of an earlier chat (the history file under $HOME); a line ending in
// "\" continues on the next one; Ctrl-D quits on a new line.
TEST(ChatOnATerminal, LineEditingAndHistory) {
#ifndef REVIS_HAVE_LIBEDIT
  GTEST_SKIP() << "built without libedit: chat reads plain lines";
#endif
  TempDir home;
  const std::string saved = home.file("talk.json");
  {
    TerminalChat chat({"-n", "2"}, home.path().string());
    ASSERT_TRUE(chat.wait_for("> ")) << chat.output();
    // Typed at the next prompt, not ahead of it.
    const auto next_prompt = [&](const std::string& after) {
      ASSERT_TRUE(chat.wait_for(after)) << chat.output();
      ASSERT_TRUE(chat.wait_for("> ", chat.output().rfind(after))) << chat.output();
    };
    chat.type_at_prompt("Wrld\x1b[D\x1b[D\x1b[Do\r");  // three times left, then the missing letter
    next_prompt("[prompt");
    const auto answered = [&](size_t turns) {
      ASSERT_TRUE(chat.wait_until([&](const std::string& out) { return prompt_sizes(out).size() == turns; }))
          << chat.output();
      next_prompt("[prompt");
    };
    chat.type_at_prompt("\x1b[A\r");  // up: the same message again
    answered(2);
    // A line ending in \ continues on the next, after a ". " prompt.
    const size_t before = chat.output().size();
    chat.type_at_prompt("Hello \\\r");
    ASSERT_TRUE(chat.wait_for(". ", before)) << chat.output();
    chat.type_at_prompt("there\r");
    answered(3);
    // Ctrl-R searches the history backwards; Enter sends what it found.
    chat.type_at_prompt("\x12Wor\r");
    answered(4);
    chat.type_at_prompt("/save " + saved + "\r");
    next_prompt("(saved");
    chat.type_at_prompt("/exit\r");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
  }
  std::ifstream in(saved);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["messages"].size(), 8u) << j.dump();
  EXPECT_EQ(j["messages"][0]["content"], "World");
  EXPECT_EQ(j["messages"][2]["content"], "World");
  EXPECT_EQ(j["messages"][4]["content"], "Hello \nthere");
  EXPECT_EQ(j["messages"][6]["content"], "World");
  std::ifstream history(home.file(".local/state/revis/history"));
  ASSERT_TRUE(history.good()) << "no history file";
  {
    // The last line of the earlier chat was /exit: recalled, it quits.
    TerminalChat chat({"-n", "2"}, home.path().string());
    ASSERT_TRUE(chat.wait_for("> ")) << chat.output();
    chat.type_at_prompt("\x1b[A\r");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
    EXPECT_TRUE(prompt_sizes(chat.output()).empty()) << chat.output();
  }
  {
    TerminalChat chat({"-n", "2"}, home.path().string());
    ASSERT_TRUE(chat.wait_for("> ")) << chat.output();
    chat.type_at_prompt("\x04");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
    const std::string& out = chat.output();
    EXPECT_NE(out.find('\n', out.rfind("> ")), std::string::npos) << "Ctrl-D left the cursor on the prompt\n" << out;
  }
}

}  // namespace
}  // namespace revis
