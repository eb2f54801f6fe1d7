// The pure parts of the hub client: what counts as ORG/REPO[:TAG], the
// hub's listing JSON, and which files a tag chooses.
#include <gtest/gtest.h>

#include "hub/file_choice.h"
#include "hub/listing.h"
#include "hub/reference.h"

namespace revis::hub {
namespace {

std::vector<RepoFile> files(std::initializer_list<const char*> names) {
  std::vector<RepoFile> out;
  for (const char* n : names) out.push_back({.name = n, .size = 10});
  return out;
}

TEST(Reference, AcceptsRepoWithAndWithoutTag) {
  auto r = parse_reference("Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
  EXPECT_EQ(r->tag, "q4_k_m");
  r = parse_reference("org/repo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tag, "");
  r = parse_reference("org/repo:sub/model-Q8_0.gguf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tag, "sub/model-Q8_0.gguf");
}

TEST(Reference, RejectsPaths) {
  for (const char* path : {"model.gguf", "models/m.gguf", "/srv/org/repo", "./org/repo", "a/b/c", "../x/y", "org/repo:",
                           "org/repo:../../etc/passwd", "org/.hidden", "-o/repo", "org/repo:/abs.gguf"})
    EXPECT_FALSE(parse_reference(path)) << path;
}

TEST(Listing, ReadsNamesSizesAndLfsDigests) {
  const std::string sha(64, 'A');
  auto listed = parse_listing(R"({"id":"o/r","siblings":[{"rfilename":"README.md"},
      {"rfilename":"m-Q4_K_M.gguf","size":99,"lfs":{"sha256":")" + sha + R"(","size":100,"pointerSize":134}}]})",
                              "listing");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].sha256, "");
  EXPECT_EQ((*listed)[1].size, 100u);                   // the LFS object's size
  EXPECT_EQ((*listed)[1].sha256, std::string(64, 'a'));  // lower case
}

TEST(Listing, ErrorsNameTheField) {
  EXPECT_NE(parse_listing("not json", "L").status().message().find("L: the hub's answer is not JSON"), std::string::npos);
  EXPECT_NE(parse_listing(R"({"id":"x"})", "L").status().message().find("no \"siblings\""), std::string::npos);
  EXPECT_NE(parse_listing(R"({"siblings":[{"name":"x"}]})", "L").status().message().find("siblings[0]"), std::string::npos);
  EXPECT_NE(parse_listing(R"({"siblings":[{"rfilename":"../x.gguf"}]})", "L").status().message().find("unsafe file name"),
            std::string::npos);
  EXPECT_NE(parse_listing(R"({"siblings":[{"rfilename":"x.gguf","lfs":{"sha256":"abc"}}]})", "L").status().message().find(
                "siblings[0].lfs.sha256: expected 64 hex digits"),
            std::string::npos);
}

TEST(FileChoice, TagMatchesANameComponentIgnoringCase) {
  const auto repo = files({"README.md", "Model-Q4_K_M.gguf", "Model-Q4_K_M_L.gguf", "model.Q8_0.gguf", "Model-UD-Q4_K_XL.gguf"});
  auto m = choose_model(repo, "o/r", "q4_k_m");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "Model-Q4_K_M.gguf");
  EXPECT_EQ(m->quant, "Q4_K_M");
  m = choose_model(repo, "o/r", "Q8_0");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "model.Q8_0.gguf");
  m = choose_model(repo, "o/r", "ud-q4_k_xl");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "Model-UD-Q4_K_XL.gguf");
  m = choose_model(repo, "o/r", "Model-Q4_K_M_L.gguf");  // a file name
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "Model-Q4_K_M_L.gguf");
}

TEST(FileChoice, NoTagPrefersQ4KMThenTheOnlyModel) {
  auto m = choose_model(files({"mmproj-F16.gguf", "M-Q8_0.gguf", "M-Q4_K_M.gguf"}), "o/r", "");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "M-Q4_K_M.gguf");
  m = choose_model(files({"mmproj-F16.gguf", "M-Q8_0.gguf"}), "o/r", "");  // a projector is never the model
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.front().name, "M-Q8_0.gguf");
  const Status several = choose_model(files({"M-Q8_0.gguf", "M-F16.gguf"}), "o/r", "").status();
  EXPECT_NE(several.message().find("o/r has several models and no Q4_K_M"), std::string::npos) << several.message();
  EXPECT_NE(several.message().find("F16 (M-F16)"), std::string::npos) << several.message();
}

TEST(FileChoice, MissingAndAmbiguousTagsListWhatIsThere) {
  const auto repo = files({"a/M-Q4_0.gguf", "b/M-Q4_0.gguf", "M-Q8_0.gguf"});
  const Status missing = choose_model(repo, "o/r on hub", "Q5_K_M").status();
  EXPECT_NE(missing.message().find("o/r on hub has no GGUF matching \"Q5_K_M\"; it has: Q8_0 (M-Q8_0), Q4_0 (a/M-Q4_0), Q4_0 (b/M-Q4_0)"),
            std::string::npos)
      << missing.message();
  const Status ambiguous = choose_model(repo, "o/r", "q4_0").status();
  EXPECT_NE(ambiguous.message().find("\"q4_0\" matches several models"), std::string::npos) << ambiguous.message();
  EXPECT_FALSE(choose_model(files({"README.md"}), "o/r", "").ok());
}

TEST(FileChoice, SplitPartsAreOneModelAndMustAllBeThere) {
  auto m = choose_model(files({"M-Q8_0-00002-of-00002.gguf", "M-Q8_0-00001-of-00002.gguf", "M-Q4_0.gguf"}), "o/r", "Q8_0");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->parts.size(), 2u);
  EXPECT_EQ(m->parts[0].name, "M-Q8_0-00001-of-00002.gguf");
  EXPECT_EQ(m->parts[1].name, "M-Q8_0-00002-of-00002.gguf");
  // Naming the second part picks the whole model.
  m = choose_model(files({"M-Q8_0-00002-of-00002.gguf", "M-Q8_0-00001-of-00002.gguf"}), "o/r", "M-Q8_0-00002-of-00002.gguf");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->parts.size(), 2u);
  const Status partial = choose_model(files({"M-Q8_0-00001-of-00003.gguf", "M-Q8_0-00003-of-00003.gguf"}), "o/r", "Q8_0").status();
  EXPECT_NE(partial.message().find("M-Q8_0 is split in 3 parts but 2 are there"), std::string::npos) << partial.message();
}

}  // namespace
}  // namespace revis::hub
