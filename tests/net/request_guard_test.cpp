#include "net/request_guard.h"

#include <gtest/gtest.h>

namespace revis::node {
namespace {

using Origin = RequestGuard::Origin;

NodeConfig config(std::string host = "127.0.0.1") {
  NodeConfig c;
  c.name = "node-a";
  c.host = std::move(host);
  return c;
}

TEST(RequestGuard, TokenlessNodeAnswersOnlyItsOwnHosts) {
  const RequestGuard guard(config(), "box");
  for (const char* ok : {"127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST.", "app.localhost:1", "[::1]:8080",
                         "10.1.2.3:8080", "node-a:8080", "node-a.local", "box", "BOX.local:80", ""})
    EXPECT_TRUE(guard.host_allowed(ok)) << ok;
  for (const char* refused : {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "node-a.evil", "[::1",
                              "[::1]x", "localhost:", "localhost:80a", ":8080", "[not-v6]:1", "a:1:2"})
    EXPECT_FALSE(guard.host_allowed(refused)) << refused;
  EXPECT_FALSE(guard.host_allowed(std::string_view("127.0.0.1\0.evil", 15))) << "a NUL does not end the name";
  EXPECT_FALSE(guard.host_allowed("local host"));
}

TEST(RequestGuard, AllowHostAddsNamesAndStarOrATokenAllowsAny) {
  NodeConfig c = config();
  c.allow_hosts = {"api.lan:8080", "Models.Example."};
  const RequestGuard named(c, "box");
  EXPECT_TRUE(named.host_allowed("api.lan"));
  EXPECT_TRUE(named.host_allowed("models.example:9000"));
  EXPECT_FALSE(named.host_allowed("other.lan"));
  c.allow_hosts = {"*"};
  EXPECT_TRUE(RequestGuard(c, "box").host_allowed("other.lan"));
  NodeConfig with_token = config("0.0.0.0");
  with_token.token = "t";
  EXPECT_TRUE(RequestGuard(with_token, "box").host_allowed("any.name.example:1"));
}

TEST(RequestGuard, ListenNameIsAnswered) {
  EXPECT_TRUE(RequestGuard(config("myhost.lan"), "box").host_allowed("myhost.lan:8080"));
  EXPECT_TRUE(RequestGuard(config("::1"), "box").host_allowed("[::1]:8080"));
}

TEST(RequestGuard, OriginsSameAllowedOrForeign) {
  NodeConfig c = config();
  c.allow_origins = {"https://app.example/", "http://localhost:3000"};
  const RequestGuard guard(c, "box");
  EXPECT_EQ(guard.classify_origin("", "127.0.0.1:8080"), Origin::kNone);
  EXPECT_EQ(guard.classify_origin("http://127.0.0.1:8080", "127.0.0.1:8080"), Origin::kSame);
  EXPECT_EQ(guard.classify_origin("https://Node-A:8080", "node-a:8080"), Origin::kSame);
  EXPECT_EQ(guard.classify_origin("https://app.example", "127.0.0.1:8080"), Origin::kAllowed);
  EXPECT_EQ(guard.classify_origin("http://localhost:3000", "127.0.0.1:8080"), Origin::kAllowed);
  EXPECT_EQ(guard.classify_origin("http://evil.example", "127.0.0.1:8080"), Origin::kForeign);
  EXPECT_EQ(guard.classify_origin("http://127.0.0.1:9999", "127.0.0.1:8080"), Origin::kForeign);
  EXPECT_EQ(guard.classify_origin("null", "127.0.0.1:8080"), Origin::kForeign);
  EXPECT_EQ(guard.classify_origin("http://127.0.0.1:8080", ""), Origin::kForeign);
  c.allow_origins = {"*"};
  EXPECT_EQ(RequestGuard(c, "box").classify_origin("http://evil.example", "127.0.0.1:8080"), Origin::kAllowed);
}

TEST(RequestGuard, ConfigKeysFlagsAndMistakes) {
  auto c = parse_config("allow_hosts = [\"api.lan\"]\nallow_origins = [\"https://app.example\"]\nengine = \"sim\"\n", "n.toml", "");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ConfigOverrides o;
  o.allow_hosts = {"b.lan:8080"};
  o.allow_origins = {"*"};
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->allow_hosts, (std::vector<std::string>{"api.lan", "b.lan:8080"}));
  EXPECT_EQ(c->allow_origins, (std::vector<std::string>{"https://app.example", "*"}));
  EXPECT_TRUE(validate_config(*c).ok());
  EXPECT_FALSE(parse_config("allow_origins = \"https://a\"", "n.toml", "").ok()) << "a list is expected";
  for (const char* bad : {"app.example", "https://app.example/path", "ftp://x"}) {
    NodeConfig b = *c;
    b.allow_origins = {bad};
    Status s = validate_config(b);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("allow_origins"), std::string::npos) << s.message();
  }
  NodeConfig b = *c;
  b.allow_hosts = {"a b"};
  EXPECT_FALSE(validate_config(b).ok());
}

}  // namespace
}  // namespace revis::node
