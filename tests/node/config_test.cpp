// The node configuration: TOML, flag overrides and validation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "node/config.h"
#include "protocol/bearer.h"
#include "support/testdata.h"

namespace revis::node {
namespace {

TEST(Config, ParsesEveryKeyAndResolvesPaths) {
  auto c = parse_config(R"(
name = "node-a"
host = "0.0.0.0"
port = 9000
token = "s3cret"
queue_limit = 5
model = "all.gguf"
default_tier = "small"
ctx = 2048
threads = 3
memory_budget_mb = 1024
max_message_bytes = 65536
max_request_bytes = 2097152
catalog = "tasks.toml"
shutdown_grace_ms = 500
discover = true
max_json_depth = 32
max_grammar_elements = 50000
prepare_threads = 3
prepare_queue = 10
prepare_stack_kb = 4096
[tiers.small]
model = "small.gguf"
ctx = 1024
[tiers.large]
model = "/abs/large.gguf"
threads = 8
)", "node.toml", "/etc/revis");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "node-a");
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->model, "/etc/revis/all.gguf");
  EXPECT_EQ(c->catalog, "/etc/revis/tasks.toml");
  ASSERT_EQ(c->tiers.size(), 2u);
  const TierConfig& large = c->tiers[0].name == "large" ? c->tiers[0] : c->tiers[1];
  const TierConfig& small = c->tiers[0].name == "small" ? c->tiers[0] : c->tiers[1];
  EXPECT_EQ(small.model, "/etc/revis/small.gguf");
  EXPECT_EQ(small.ctx, 1024);
  EXPECT_EQ(large.model, "/abs/large.gguf");
  EXPECT_EQ(large.threads, 8);
  EXPECT_EQ(c->max_message_bytes, 65536u);
  EXPECT_TRUE(c->discover);
  EXPECT_EQ(c->max_json_depth, 32);
  EXPECT_EQ(c->max_grammar_elements, 50000u);
  EXPECT_EQ(c->prepare_threads, 3);
  EXPECT_EQ(c->prepare_queue, 10);
  EXPECT_EQ(c->prepare_stack_kb, 4096u);
  NodeConfig config = *c;
  EXPECT_TRUE(validate_config(config).ok()) << "a token makes 0.0.0.0 acceptable";
}

// ORG/REPO:QUANT names a model on the hub (docs/models.md), which `revis
// serve` finds or pulls: it is not a path relative to the config file,
// unless a file of that name is there.
TEST(Config, HubModelNamesAreNotPaths) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("local"));
  std::ofstream(dir.file("local/m:Q8_0")) << "x";
  auto c = parse_config(R"(
model = "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"
draft = "org/draft-GGUF"
[tiers.small]
model = "local/m:Q8_0"
[tiers.large]
model = "sub/large.gguf"
)", "node.toml", dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model, "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
  EXPECT_EQ(c->draft, "org/draft-GGUF");
  const TierConfig& large = c->tiers[0].name == "large" ? c->tiers[0] : c->tiers[1];
  const TierConfig& small = c->tiers[0].name == "small" ? c->tiers[0] : c->tiers[1];
  EXPECT_EQ(small.model, dir.file("local/m:Q8_0"));  // the file there wins
  EXPECT_EQ(large.model, dir.file("sub/large.gguf"));
}

TEST(Config, RefusesUnknownKeysAndWrongTypes) {
  for (const char* bad : {"colour = 1", "port = \"80\"", "port = 70000", "queue_limit = 0", "[tiers.x]\nctx = 1",
                          "[tiers.x]\nmodel = \"a\"\ngpu = true", "tiers = 3", "name = ", "discover = 1"}) {
    auto c = parse_config(bad, "n.toml", "");
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) {
      EXPECT_NE(c.status().message().find("n.toml"), std::string::npos) << c.status().message();
    }
  }
}

TEST(Config, FlagsOverrideTheFile) {
  auto c = parse_config("port = 9000\nname = \"a\"\n[tiers.small]\nmodel = \"s.gguf\"\n", "n.toml", "");
  ASSERT_TRUE(c.ok());
  ConfigOverrides o;
  o.port = 9100;
  o.tiers = {"small=other.gguf", "large=l.gguf"};
  o.queue_limit = 2;
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->port, 9100);
  EXPECT_EQ(c->name, "a");
  EXPECT_EQ(c->queue_limit, 2);
  EXPECT_FALSE(c->discover) << "off unless the file or --discover turns it on";
  ASSERT_EQ(c->tiers.size(), 2u);
  EXPECT_EQ(c->tiers[0].model, "other.gguf");
  EXPECT_EQ(c->tiers[1].name, "large");
  ConfigOverrides discover;
  discover.discover = true;
  ASSERT_TRUE(apply_overrides(*c, discover).ok());
  EXPECT_TRUE(c->discover);
  ConfigOverrides bad;
  bad.tiers = {"nopath"};
  EXPECT_FALSE(apply_overrides(*c, bad).ok());
}

TEST(Config, SpeculativeDecodingPerTierAndFromFlags) {
  auto c = parse_config(R"(model = "m.gguf"
draft = "d.gguf"
lookup = true
draft_max = 5
[tiers.small]
model = "s.gguf"
draft = "sd.gguf"
draft_max = 3
[tiers.large]
model = "l.gguf"
lookup = false
[tiers.deep]
model = "v3.gguf"
draft = "mtp"
)", "n.toml", "/etc/revis");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->draft, "/etc/revis/d.gguf");
  EXPECT_TRUE(c->lookup);
  EXPECT_EQ(c->draft_max, 5);
  ASSERT_EQ(c->tiers.size(), 3u);
  for (const TierConfig& t : c->tiers) {
    if (t.name == "small") {
      EXPECT_EQ(t.draft, "/etc/revis/sd.gguf");
      EXPECT_FALSE(t.lookup.has_value());
      EXPECT_EQ(t.draft_max, 3);
    } else if (t.name == "deep") {
      EXPECT_EQ(t.draft, "mtp") << "the model's own head, not a file beside the config";
    } else {
      EXPECT_EQ(t.lookup, std::optional<bool>(false));
      EXPECT_TRUE(t.draft.empty());
    }
  }
  ConfigOverrides o;
  o.draft = "other.gguf";
  o.draft_max = 12;
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->draft, "other.gguf");
  EXPECT_EQ(c->draft_max, 12);
  EXPECT_TRUE(validate_config(*c).ok());
  c->draft_max = 65;
  EXPECT_FALSE(validate_config(*c).ok());
  for (const char* bad : {"[tiers.x]\nmodel = \"a\"\nlookup = 1", "[tiers.x]\nmodel = \"a\"\ndraft_max = 100",
                          "draft = 3"})
    EXPECT_FALSE(parse_config(bad, "n.toml", "").ok()) << bad;
  auto no_model = parse_config("draft = \"d.gguf\"\n[tiers.x]\nmodel = \"a\"\n", "n.toml", "");
  ASSERT_TRUE(no_model.ok());
  EXPECT_FALSE(validate_config(*no_model).ok()) << "a draft model for no model";
}

TEST(Config, RefusesANonLoopbackBindWithoutAToken) {
  NodeConfig c;
  c.model = "m.gguf";
  c.host = "0.0.0.0";
  Status s = validate_config(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("without a token"), std::string::npos);
  c.host = "192.168.1.10";
  EXPECT_FALSE(validate_config(c).ok());
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    NodeConfig l;
    l.model = "m.gguf";
    l.host = host;
    EXPECT_TRUE(validate_config(l).ok()) << host;
  }
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("example.com"));
}

// A token that cannot travel in an Authorization header as given (spaces,
// control characters) is refused, not silently never matched.
TEST(Config, TokensMustBeVisibleAscii) {
  for (const char* bad : {" ", "two words", "tab\there", "\x7f", "caf\xc3\xa9"}) {
    NodeConfig c;
    c.model = "m.gguf";
    c.token = bad;
    Status s = validate_config(c);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("token"), std::string::npos) << s.message();
  }
  NodeConfig good;
  good.model = "m.gguf";
  good.token = "s3cret-Token_+/=";
  EXPECT_TRUE(validate_config(good).ok());
}

TEST(Config, TokenFromAFile) {
  testing::TempDir dir;
  std::ofstream(dir.file("token")) << "from-the-file\n";
  auto c = parse_config("model = \"m.gguf\"\ntoken_file = \"token\"\n", "node.toml", dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->token_file, dir.file("token"));
  ASSERT_TRUE(validate_config(*c).ok());
  EXPECT_EQ(c->token, "from-the-file");

  NodeConfig both;
  both.model = "m.gguf";
  both.token = "x";
  both.token_file = dir.file("token");
  EXPECT_FALSE(validate_config(both).ok());
  // A flag replaces the file's way of giving it.
  ConfigOverrides o;
  o.token = "flag";
  ASSERT_TRUE(apply_overrides(both, o).ok());
  EXPECT_TRUE(both.token_file.empty());
  ASSERT_TRUE(validate_config(both).ok());
  EXPECT_EQ(both.token, "flag");

  NodeConfig missing;
  missing.model = "m.gguf";
  missing.token_file = dir.file("absent");
  Status s = validate_config(missing);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.file("absent")), std::string::npos) << s.message();
  std::ofstream(dir.file("blank")) << " \n";
  missing.token_file = dir.file("blank");
  EXPECT_FALSE(validate_config(missing).ok());
}

// REVIS_HOST, REVIS_PORT, REVIS_MODEL and REVIS_TOKEN override the file and
// are overridden by the flags; an empty variable counts as unset.
TEST(Config, EnvironmentSitsBetweenFileAndFlags) {
  testing::TempDir dir;
  std::ofstream(dir.file("token")) << "from-the-file\n";
  auto c = parse_config("host = \"10.0.0.1\"\nport = 9000\nmodel = \"file.gguf\"\ntoken_file = \"token\"\n",
                        "node.toml", dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::map<std::string, std::string> env = {{"REVIS_HOST", "10.0.0.2"},
                                            {"REVIS_PORT", "9100"},
                                            {"REVIS_MODEL", "/env/m.gguf"},
                                            {"REVIS_TOKEN", "from-env"},
                                            {"REVIS_NAME", "not-a-setting"}};
  const auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  NodeConfig from_env = *c;
  ASSERT_TRUE(apply_environment(from_env, lookup).ok());
  EXPECT_EQ(from_env.host, "10.0.0.2");
  EXPECT_EQ(from_env.port, 9100);
  EXPECT_EQ(from_env.model, "/env/m.gguf");
  EXPECT_TRUE(from_env.token_file.empty()) << "the variable replaces the file's way of giving the token";
  EXPECT_EQ(from_env.name, c->name);
  ASSERT_TRUE(validate_config(from_env).ok());
  EXPECT_EQ(from_env.token, "from-env");

  ConfigOverrides flags;
  flags.host = "10.0.0.3";
  flags.port = 9200;
  flags.model = "flag.gguf";
  flags.token = "from-flag";
  ASSERT_TRUE(apply_overrides(from_env, flags).ok());
  EXPECT_EQ(from_env.host, "10.0.0.3");
  EXPECT_EQ(from_env.port, 9200);
  EXPECT_EQ(from_env.model, "flag.gguf");
  EXPECT_EQ(from_env.token, "from-flag");

  env = {{"REVIS_HOST", ""}, {"REVIS_PORT", ""}, {"REVIS_MODEL", ""}, {"REVIS_TOKEN", ""}};
  NodeConfig empty = *c;
  ASSERT_TRUE(apply_environment(empty, lookup).ok());
  EXPECT_EQ(empty.host, "10.0.0.1");
  EXPECT_EQ(empty.port, 9000);
  EXPECT_EQ(empty.model, dir.file("file.gguf"));
  EXPECT_EQ(empty.token_file, dir.file("token"));

  for (const char* bad : {"80x", "-1", "65536", " 80"}) {
    env = {{"REVIS_PORT", bad}};
    NodeConfig b = *c;
    const Status s = apply_environment(b, lookup);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find(std::string("REVIS_PORT=") + bad), std::string::npos) << s.message();
  }
}

// RFC 7235: the scheme name is case-insensitive; the credential is not.
TEST(Bearer, SchemeIsCaseInsensitive) {
  for (const char* h : {"Bearer tok", "bearer tok", "BEARER tok", "bEaReR  tok"}) EXPECT_TRUE(bearer_matches(h, "tok")) << h;
  for (const char* h : {"Bearer TOK", "Bearer", "Bearer ", "Bearertok", "Basic tok", "Bearer tok2", "Bearer to", ""})
    EXPECT_FALSE(bearer_matches(h, "tok")) << h;
}

TEST(Bearer, AnXApiKeyHoldsTheTokenAlone) {
  EXPECT_TRUE(api_key_matches("tok", "tok"));
  for (const char* h : {"", "TOK", "Bearer tok", "tok ", "to"}) EXPECT_FALSE(api_key_matches(h, "tok")) << h;
}

TEST(Bearer, BrowsersSendTheTokenAsASubprotocolInHex) {
  EXPECT_TRUE(subprotocol_matches("revis, revis.token.733363726574", "s3cret"));
  EXPECT_FALSE(subprotocol_matches("revis, revis.token.733363726575", "s3cret"));
  EXPECT_FALSE(subprotocol_matches("revis", "s3cret"));
  EXPECT_EQ(token_from_subprotocols("revis, revis.token.733363726574"), "s3cret");
  EXPECT_EQ(token_from_subprotocols(" revis.token.00ff ,revis"), std::string("\0\xff", 2));
  for (const char* bad : {"", "revis", "revis.token.", "revis.token.7", "revis.token.7g", "revis.token.7A", "x revis.token.41"})
    EXPECT_FALSE(token_from_subprotocols(bad).has_value()) << bad;
  EXPECT_TRUE(offers_subprotocol("chat, revis", "revis"));
  EXPECT_TRUE(offers_subprotocol("revis", "revis"));
  EXPECT_FALSE(offers_subprotocol("revis.token.41", "revis"));
  EXPECT_FALSE(offers_subprotocol("", "revis"));
}

TEST(Config, DefaultsAndModelChecks) {
  NodeConfig none;
  EXPECT_FALSE(validate_config(none).ok()) << "no model at all";
  NodeConfig m;
  m.model = "m.gguf";
  ASSERT_TRUE(validate_config(m).ok());
  EXPECT_EQ(m.default_tier, "default");
  EXPECT_FALSE(m.name.empty()) << "the host name by default";
  NodeConfig t;
  t.tiers = {{.name = "small", .model = "s.gguf"}, {.name = "large", .model = "l.gguf"}};
  ASSERT_TRUE(validate_config(t).ok());
  EXPECT_EQ(t.default_tier, "small");
  t.default_tier = "huge";
  EXPECT_FALSE(validate_config(t).ok());
  NodeConfig dup;
  dup.tiers = {{.name = "a", .model = "x.gguf"}, {.name = "a", .model = "y.gguf"}};
  EXPECT_FALSE(validate_config(dup).ok());
}

TEST(Config, BrokerKeysAndOneWayOfSharingTickets) {
  auto c = parse_config(R"(
broker = "nats://10.0.0.9:4222,10.0.0.10:4222"
broker_creds = "node.creds"
broker_tls_ca = "/etc/ca.pem"
broker_ack_wait_ms = 5000
broker_max_deliver = 3
model = "m.gguf"
)", "node.toml", "/etc/revis");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->broker, "nats://10.0.0.9:4222,10.0.0.10:4222");
  EXPECT_EQ(c->broker_creds, "/etc/revis/node.creds");
  EXPECT_EQ(c->broker_tls_ca, "/etc/ca.pem");
  EXPECT_EQ(c->broker_ack_wait_ms, 5000);
  EXPECT_EQ(c->broker_max_deliver, 3);
  ConfigOverrides o;
  o.broker_ack_wait_ms = 800;
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->broker_ack_wait_ms, 800);
  EXPECT_TRUE(validate_config(*c).ok());
  c->peers = {"10.0.0.2:8080"};
  Status both = validate_config(*c);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.message().find("broker and peers"), std::string::npos) << both.message();
  EXPECT_FALSE(parse_config("broker_ack_wait_ms = 5\n", "n.toml", ".").ok());
}

}  // namespace
}  // namespace revis::node
