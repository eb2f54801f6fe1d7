// `revis chat` end to end: messages on stdin, replies on stdout, the
// per-turn statistics line on stderr.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "support/run_command.h"

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

// Later turns continue from the earlier prompt's KV rows, in whole blocks of
// kResumeAlignment = 64 tokens (resumed rows give the same logits as a cold
// prefill: tests/kvstore). A long system prompt makes the first prompt span
// two blocks.
TEST(ChatCommand, LaterTurnsReuseTheConversationsRows) {
  std::string system;
  for (int i = 0; i < 40; ++i) system += "rule " + std::to_string(i) + ". ";
  const std::string flags = "-s " + shell_quote(system);
  const Chat two = chat("Hi\nAgain\n", flags);
  ASSERT_EQ(two.result.exit_code, 0) << two.result.err;
  ASSERT_EQ(two.prompt_tokens.size(), 2u) << two.result.err;
  ASSERT_GE(two.prompt_tokens[0], 128) << "the system prompt should fill two blocks";
  const std::regex reused(R"(\((\d+) reused\))");
  std::vector<int> reuse;
  for (auto it = std::sregex_iterator(two.result.err.begin(), two.result.err.end(), reused); it != std::sregex_iterator();
       ++it)
    reuse.push_back(std::stoi((*it)[1]));
  ASSERT_EQ(reuse.size(), 2u) << two.result.err;
  EXPECT_EQ(reuse[0], 0);
  EXPECT_EQ(reuse[1], two.prompt_tokens[0] / 64 * 64);
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

}  // namespace
}  // namespace revis
