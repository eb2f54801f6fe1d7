// The hub client against a loopback hub (fake_hub.h): downloads, resume,
// verification, split models, the hub's errors, a full disk, and the
// models directory.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "fake_hub.h"
#include "hub/download.h"
#include "hub/pull.h"
#include "support/testdata.h"

namespace revis::hub {
namespace {

namespace fs = std::filesystem;
using testing::FakeHub;
using testing::TempDir;

std::string bytes(size_t n, uint32_t seed) {
  std::string out(n, '\0');
  for (char& c : out) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Pull {
  FakeHub hub;
  TempDir tmp;
  std::vector<std::string> notes;
  HubOptions options() const { return {.endpoint = hub.endpoint(), .models_dir = tmp.file("models"), .timeout_ms = 5000}; }
  Result<std::string> run(const std::string& reference, HubOptions o) {
    return pull_model(*parse_reference(reference), o, {.note = [this](const std::string& m) { notes.push_back(m); }});
  }
  Result<std::string> run(const std::string& reference) { return run(reference, options()); }
  std::string all_notes() const {
    std::string text;
    for (const std::string& n : notes) text += n + "\n";
    return text;
  }
  // The Range headers the CDN got (the resolve request before it carries
  // the same one).
  std::vector<std::string> ranges() const {
    std::vector<std::string> out;
    for (const auto& r : hub.requests())
      if (!r.range.empty() && r.target.rfind("/cdn/", 0) == 0) out.push_back(r.range);
    return out;
  }
};

TEST(Pull, DownloadsTheChosenFileThroughTheRedirectAndVerifiesIt) {
  Pull p;
  const std::string content = bytes(300000, 1);
  p.hub.add_file("org/Model-GGUF", "Model-Q8_0.gguf", content);
  p.hub.add_file("org/Model-GGUF", "Model-Q4_K_M.gguf", bytes(1000, 2));
  auto path = p.run("org/Model-GGUF:q8_0");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, p.tmp.file("models") + "/org/Model-GGUF/Model-Q8_0.gguf");
  EXPECT_EQ(slurp(*path), content);
  EXPECT_FALSE(fs::exists(partial_path(*path)));
  EXPECT_FALSE(fs::exists(p.tmp.file("models") + "/org/Model-GGUF/Model-Q4_K_M.gguf"));
  std::vector<std::string> targets;
  for (const auto& r : p.hub.requests()) targets.push_back(r.target);
  EXPECT_EQ(targets, (std::vector<std::string>{"/api/models/org/Model-GGUF?blobs=true", "/org/Model-GGUF/resolve/main/Model-Q8_0.gguf",
                                               "/cdn/org/Model-GGUF/Model-Q8_0.gguf"}));
  EXPECT_TRUE(contains(p.all_notes(), "chose Q8_0: Model-Q8_0.gguf")) << p.all_notes();
  EXPECT_TRUE(contains(p.all_notes(), "SHA-256 verified")) << p.all_notes();
  // Pulled again: nothing is downloaded.
  ASSERT_TRUE(p.run("org/Model-GGUF:Q8_0").ok());
  EXPECT_EQ(p.hub.requests().size(), 4u);
  EXPECT_TRUE(contains(p.all_notes(), "is there already")) << p.all_notes();
}

TEST(Pull, FollowsARedirectToAPath) {
  Pull p;
  const std::string content = bytes(5000, 22);
  p.hub.add_file("org/r", "M-Q8_0.gguf", content);
  p.hub.use_relative_redirects();
  auto path = p.run("org/r:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(slurp(*path), content);
  EXPECT_EQ(p.hub.requests().back().target, "/cdn/org/r/M-Q8_0.gguf");
}

TEST(Pull, NoTagChoosesQ4KMAndSaysSo) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(100, 3));
  p.hub.add_file("org/r", "M-Q4_K_M.gguf", bytes(100, 4));
  auto path = p.run("org/r");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(fs::path(*path).filename(), "M-Q4_K_M.gguf");
  EXPECT_TRUE(contains(p.all_notes(), "no tag given: chose Q4_K_M: M-Q4_K_M.gguf")) << p.all_notes();
}

TEST(Pull, ResumesWithARangeWhenTheConnectionIsLostMidway) {
  Pull p;
  const std::string content = bytes(500000, 5);
  p.hub.add_file("org/r", "M-Q8_0.gguf", content);
  p.hub.cut_next_file_after(123456);
  auto path = p.run("org/r:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(p.ranges(), std::vector<std::string>{"bytes=123456-"});
  EXPECT_EQ(slurp(*path), content);
}

TEST(Pull, ResumesThePartialFileOfAnEarlierRun) {
  Pull p;
  const std::string content = bytes(200000, 6);
  p.hub.add_file("org/r", "M-Q8_0.gguf", content);
  const std::string dir = p.tmp.file("models") + "/org/r";
  fs::create_directories(dir);
  std::ofstream(partial_path(dir + "/M-Q8_0.gguf"), std::ios::binary) << content.substr(0, 70000);
  auto path = p.run("org/r:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(p.ranges(), std::vector<std::string>{"bytes=70000-"});
  EXPECT_EQ(slurp(*path), content);
  EXPECT_TRUE(contains(p.all_notes(), "resumed after 70000 bytes, SHA-256 verified")) << p.all_notes();
}

TEST(Pull, CorruptPartialFailsVerificationAndIsDeleted) {
  Pull p;
  const std::string content = bytes(200000, 7);
  p.hub.add_file("org/r", "M-Q8_0.gguf", content);
  const std::string file = p.tmp.file("models") + "/org/r/M-Q8_0.gguf";
  fs::create_directories(fs::path(file).parent_path());
  std::ofstream(partial_path(file), std::ios::binary) << bytes(70000, 99);  // not the file's first bytes
  auto path = p.run("org/r:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), file + ": SHA-256 mismatch: expected " + sha256_hex(content)))
      << path.status().message();
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(partial_path(file)));
  // The next pull starts over and succeeds.
  ASSERT_TRUE(p.run("org/r:Q8_0").ok());
  EXPECT_EQ(slurp(file), content);
}

TEST(Pull, WrongDigestFromTheHubLeavesNothingUnderTheFinalName) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(50000, 8));
  p.hub.set_listing_lfs("org/r", "M-Q8_0.gguf", false);
  p.hub.set_etag("org/r", "M-Q8_0.gguf", std::string(64, 'e'));
  auto path = p.run("org/r:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "SHA-256 mismatch: expected " + std::string(64, 'e'))) << path.status().message();
  EXPECT_TRUE(contains(path.status().message(), "the partial download was deleted"));
  EXPECT_TRUE(fs::is_empty(p.tmp.file("models") + "/org/r"));
}

TEST(Pull, ListingAndEtagDigestsMustAgree) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(50000, 9));
  p.hub.set_etag("org/r", "M-Q8_0.gguf", std::string(64, 'e'));
  auto path = p.run("org/r:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "but X-Linked-Etag gives " + std::string(64, 'e'))) << path.status().message();
  EXPECT_FALSE(fs::exists(p.tmp.file("models") + "/org/r/M-Q8_0.gguf"));
}

TEST(Pull, SplitModelDownloadsEveryPart) {
  Pull p;
  const std::string one = bytes(40000, 10), two = bytes(30000, 11);
  p.hub.add_file("org/big", "Big-Q8_0-00001-of-00002.gguf", one);
  p.hub.add_file("org/big", "Big-Q8_0-00002-of-00002.gguf", two);
  auto path = p.run("org/big:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(fs::path(*path).filename(), "Big-Q8_0-00001-of-00002.gguf");
  EXPECT_EQ(slurp(*path), one);
  EXPECT_EQ(slurp(fs::path(*path).parent_path() / "Big-Q8_0-00002-of-00002.gguf"), two);
  EXPECT_TRUE(contains(p.all_notes(), "and 1 more parts")) << p.all_notes();
}

TEST(Pull, UnauthorizedMentionsHfTokenAndTheTokenIsSent) {
  Pull p;
  p.hub.force_status("/api/models/org/gated", 401);
  auto path = p.run("org/gated:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "listing org/gated: HTTP 401")) << path.status().message();
  EXPECT_TRUE(contains(path.status().message(), "set HF_TOKEN")) << path.status().message();
  HubOptions with_token = p.options();
  with_token.token = "hf_secret";
  path = p.run("org/gated:Q8_0", with_token);
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "the token in HF_TOKEN may not read it")) << path.status().message();
  EXPECT_EQ(p.hub.requests().back().authorization, "Bearer hf_secret");
}

TEST(Pull, NotFoundSaysSo) {
  Pull p;
  auto path = p.run("org/missing:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "listing org/missing: HTTP 404: no such repository")) << path.status().message();
  // The listing has the file, the resolve URL does not.
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(100, 12));
  p.hub.force_status("/org/r/resolve/", 404);
  path = p.run("org/r:Q8_0");
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "/org/r/resolve/main/M-Q8_0.gguf: HTTP 404")) << path.status().message();
  EXPECT_TRUE(fs::is_empty(p.tmp.file("models") + "/org/r")) << "no empty .part is left";
}

TEST(Pull, NoServerIsANetworkError) {
  Pull p;
  HubOptions o = p.options();
  {
    FakeHub gone;  // a port that was just free
    o.endpoint = gone.endpoint();
  }
  auto path = p.run("org/r:Q8_0", o);
  ASSERT_FALSE(path.ok());
  EXPECT_TRUE(contains(path.status().message(), "connecting to " + o.endpoint + " failed")) << path.status().message();
}

// A 1 MiB tmpfs mounted at `dir` while it lives (root only).
class SmallDisk {
 public:
  explicit SmallDisk(std::string dir) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=1m") != 0) error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }  // empty: mounted

 private:
  std::string dir_, error_;
};

// A 3 MiB file pulled onto a 1 MiB disk.
class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mounting a 1 MiB tmpfs needs root (CI runs as root)";
    disk_ = std::make_unique<SmallDisk>(p_.tmp.file("small"));
    ASSERT_EQ(disk_->error(), "") << "mount -t tmpfs";
    p_.hub.add_file("org/r", "M-Q8_0.gguf", bytes(3 << 20, 13));
  }
  std::string pull_error() {
    HubOptions o = p_.options();
    o.models_dir = disk_->dir();
    auto path = p_.run("org/r:Q8_0", o);
    return path.ok() ? "the pull succeeded" : path.status().message();
  }
  std::string file() const { return disk_->dir() + "/org/r/M-Q8_0.gguf"; }

  Pull p_;
  std::unique_ptr<SmallDisk> disk_;  // unmounted before p_'s directory goes
};

TEST_F(FullDisk, SaysHowManyBytesWereNeededAndFree) {
  const std::string message = pull_error();
  EXPECT_TRUE(contains(message, "disk full: " + file() + ".part needs 3145728 more bytes, ")) << message;
  EXPECT_TRUE(contains(message, " are free on its file system")) << message;
}

TEST_F(FullDisk, WhileWritingAFileOfUnknownSize) {
  p_.hub.hide_size("org/r", "M-Q8_0.gguf");  // nothing to check the free space against before writing
  const std::string message = pull_error();
  EXPECT_TRUE(contains(message, "disk full: " + file() + ".part filled the disk after ")) << message;
  EXPECT_TRUE(contains(message, "(the server gave no size), 0 are free")) << message;
  EXPECT_TRUE(fs::exists(file() + ".part")) << "the partial download is kept for a resume";
  EXPECT_FALSE(fs::exists(file()));
}

TEST(ModelsDir, ListsFindsAndRemovesPulledModels) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(1000, 14));
  p.hub.add_file("org/r", "M-Q4_K_M.gguf", bytes(2000, 15));
  p.hub.add_file("org/big", "sub/Big-Q8_0-00001-of-00002.gguf", bytes(300, 16));
  p.hub.add_file("org/big", "sub/Big-Q8_0-00002-of-00002.gguf", bytes(400, 17));
  ASSERT_TRUE(p.run("org/r:Q8_0").ok());
  ASSERT_TRUE(p.run("org/r").ok());
  ASSERT_TRUE(p.run("org/big").ok());
  const std::string dir = p.tmp.file("models");
  const auto models = list_local_models(dir);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].repo, "org/big");
  EXPECT_EQ(models[0].model.quant, "Q8_0");
  EXPECT_EQ(models[0].bytes, 700u);
  EXPECT_EQ(models[1].model.quant, "Q4_K_M");
  EXPECT_EQ(models[2].model.quant, "Q8_0");
  EXPECT_EQ(*find_local_model(dir, *parse_reference("org/r")), dir + "/org/r/M-Q4_K_M.gguf");
  EXPECT_EQ(*find_local_model(dir, *parse_reference("org/big:q8_0")), dir + "/org/big/sub/Big-Q8_0-00001-of-00002.gguf");
  auto removed = remove_local_model(dir, *parse_reference("org/big:Q8_0"));
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->size(), 2u);
  EXPECT_FALSE(fs::exists(dir + "/org/big"));  // emptied directories go too
  EXPECT_TRUE(fs::exists(dir + "/org/r"));
  EXPECT_FALSE(remove_local_model(dir, *parse_reference("org/r:Q6_K")).ok());
}

TEST(Resolve, PathsStayAndReferencesArePulledOnce) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(1000, 18));
  // A file of that name, relative to the working directory, wins.
  const fs::path cwd = fs::current_path();
  fs::create_directories(p.tmp.file("work/org"));
  std::ofstream(p.tmp.file("work/org/r:Q8_0")) << "x";
  fs::current_path(p.tmp.file("work"));
  const std::string kept = *resolve_model_path("org/r:Q8_0", p.options(), {});
  fs::current_path(cwd);
  EXPECT_EQ(kept, "org/r:Q8_0");
  EXPECT_EQ(*resolve_model_path("missing/model.gguf", p.options(), {}), "missing/model.gguf");
  EXPECT_TRUE(p.hub.requests().empty());
  auto path = resolve_model_path("org/r:Q8_0", p.options(), {});
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, p.tmp.file("models") + "/org/r/M-Q8_0.gguf");
  const size_t asked = p.hub.requests().size();
  EXPECT_EQ(*resolve_model_path("org/r:q8_0", p.options(), {}), *path);
  EXPECT_EQ(p.hub.requests().size(), asked);  // found in the models directory
}

TEST(Resolve, OfflineFindsPulledModelsAndNeverPulls) {
  Pull p;
  p.hub.add_file("org/r", "M-Q8_0.gguf", bytes(1000, 20));
  p.hub.add_file("org/r", "M-Q4_K_M.gguf", bytes(1000, 21));
  ASSERT_TRUE(p.run("org/r:Q8_0").ok());
  const size_t asked = p.hub.requests().size();
  HubOptions offline = p.options();
  offline.offline = true;
  EXPECT_EQ(*resolve_model_path("org/r:Q8_0", offline, {}), p.tmp.file("models") + "/org/r/M-Q8_0.gguf");
  const Status missing = resolve_model_path("org/r:Q4_K_M", offline, {}).status();
  EXPECT_TRUE(contains(missing.message(), "org/r:Q4_K_M is not in " + p.tmp.file("models") +
                                              " and HF_HUB_OFFLINE is set: run `revis pull org/r:Q4_K_M` first"))
      << missing.message();
  EXPECT_EQ(p.hub.requests().size(), asked);
  auto from_env = hub_options_from_environment([](const char* name) -> const char* {
    return std::string(name) == "HF_HUB_OFFLINE" ? "1" : std::string(name) == "HOME" ? "/home/u" : nullptr;
  });
  ASSERT_TRUE(from_env.ok()) << from_env.status().message();
  EXPECT_TRUE(from_env->offline);
  EXPECT_EQ(from_env->models_dir, "/home/u/.cache/revis/models");
  EXPECT_EQ(from_env->endpoint, "https://huggingface.co");
}

}  // namespace
}  // namespace revis::hub
