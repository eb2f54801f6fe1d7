// revis perplexity on the small file `revis mkmodel --arch NAME --type MIX`
// writes for each newer architecture, against llama-perplexity's figure
// for the same file, text, -c and --chunks: within 1 %.
// scripts/golden/perplexity_families.sh makes the files the same way and
// prints llama.cpp's figures (llama.cpp d32676d, AVX2 build, 2 threads);
// mkmodel's weights come from a fixed seed, so the files are the same
// bytes on every machine.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;

constexpr const char* kSettings = "-c 128 --chunks 8";

struct Family {
  const char* arch;
  const char* mix;
  double llama;  // llama-perplexity's "Final estimate"
};

// The script's MOE-2BIT row is not here: its importance matrix comes from
// revis's own run of the F16 file, whose last bits differ between kernel
// backends, and IQ2_XXS's grid search can turn on them, so the file is not
// the same bytes on every machine.
constexpr Family kFamilies[] = {
    {"gpt-oss", "MXFP4_MOE", 524.3427},
    {"gemma3", "Q8_0", 15123309865970376606295225539501071574634438812762112.0},
    {"gemma3", "Q4_K_M", 15779230440899988416012310592321481201051843319300096.0},
    {"gemma4", "Q8_0", 1694819517121.5559},
    {"qwen35", "Q8_0", 420.4105},
    {"qwen35moe", "Q8_0", 430.7574},
    {"qwen3next", "Q8_0", 431.4323},
    {"deepseek4", "Q8_0", 1804.4888},
};

std::string text() { return shell_quote(testing::testdata("trained/valid.txt").string()); }

// The file as scripts/golden/perplexity_families.sh makes it.
std::string make_file(const Family& f, testing::TempDir& tmp) {
  const std::string file = tmp.file(std::string(f.arch) + "-" + f.mix + ".gguf");
  const auto m = run_revis("mkmodel --arch " + std::string(f.arch) + " --type " + f.mix + " -o " + shell_quote(file));
  EXPECT_EQ(m.exit_code, 0) << m.err;
  return file;
}

class PerplexityFamilies : public ::testing::TestWithParam<Family> {};

TEST_P(PerplexityFamilies, GiveLlamaCppsFigureWithinOnePercent) {
  const Family& f = GetParam();
  testing::TempDir tmp;
  const std::string file = make_file(f, tmp);
  const auto r = run_revis("perplexity -m " + shell_quote(file) + " -t 2 -f " + text() + " " + kSettings);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("perplexity ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NEAR(std::atof(r.out.c_str() + at + 11) / f.llama, 1.0, 0.01) << f.arch << " " << f.mix;
}

std::string family_name(const ::testing::TestParamInfo<Family>& info) {
  std::string name = std::string(info.param.arch) + "_" + info.param.mix;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Mkmodel, PerplexityFamilies, ::testing::ValuesIn(kFamilies), family_name);

}  // namespace
}  // namespace revis
