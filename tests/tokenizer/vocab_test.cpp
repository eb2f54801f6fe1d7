// llama.cpp's tokenizer vectors: every case of every
// testdata/vocab/ggml-vocab-*.gguf must give exactly the expected ids (no
// BOS, no special-token parsing). One test per vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "tok_test_util.h"

namespace revis::test {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> read_cases(const std::string& vocab) {
  const std::string inp = read_file(vocab_file(vocab).string() + ".inp");
  const std::string outp = read_file(vocab_file(vocab).string() + ".out");
  const auto texts = split(inp, "\n__ggml_vocab_test__\n");
  auto lines = split(outp, "\n");
  // The .out file ends with a newline: one line per case plus an empty tail.
  if (!lines.empty() && lines.back().empty() && lines.size() == texts.size() + 1) lines.pop_back();
  EXPECT_EQ(texts.size(), lines.size()) << vocab;
  std::vector<Case> cases;
  for (size_t i = 0; i < std::min(texts.size(), lines.size()); ++i) {
    Case c{texts[i], {}};
    std::istringstream ss(lines[i]);
    int32_t id;
    while (ss >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

class VocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabTest, MatchesLlamaCpp) {
  const std::string vocab = GetParam();
  Loaded l = load(vocab_file(vocab));
  ASSERT_TRUE(l.tok);
  const auto cases = read_cases(vocab);
  ASSERT_FALSE(cases.empty());
  size_t pass = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = l.tok->encode(cases[i].text, /*add_bos=*/false, /*parse_special=*/false);
    if (got == cases[i].ids) {
      ++pass;
    } else {
      ADD_FAILURE() << vocab << " case " << i << " text '" << cases[i].text << "'\n  expected "
                    << ids_to_string(cases[i].ids) << "\n  got      " << ids_to_string(got);
    }
  }
  std::cout << "[ vocab    ] " << vocab << ": " << pass << "/" << cases.size() << " cases\n";
  EXPECT_EQ(pass, cases.size());
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabTest,
                         ::testing::ValuesIn(vocab_names()), vocab_param_name);

// Every vocabulary file present in testdata/vocab is covered above.
TEST(VocabTest, AllFilesCovered) {
  const std::vector<std::string>& known = vocab_names();
  for (const auto& entry : std::filesystem::directory_iterator(testdata() / "vocab")) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "ggml-vocab-", suffix = ".gguf";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string stem =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    EXPECT_NE(std::find(known.begin(), known.end(), stem), known.end())
        << "untested vocab " << name;
  }
}

}  // namespace
}  // namespace revis::test
