// The dashboard as the node serves it (net/web_assets.h): the page and its
// modules from the binary, with their types and security headers, without
// the token; and the browser's way to give the token to the WebSocket
// (net/request_guard.h, token_from_subprotocols).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "net/client.h"
#include "node/node_process.h"

namespace revis {
namespace {

using testing::NodeProcess;

Result<node::HttpResponse> get(const NodeProcess& node, const std::string& target,
                               const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return node::http_request(node.endpoint(), "GET", target, "", headers, 10000);
}

TEST(Dashboard, PageAndModulesAreServedWithoutTheToken) {
  NodeProcess node({"--engine", "sim", "--token", "s3cret"});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  auto page = get(node, "/");
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->headers["content-type"], "text/html; charset=utf-8");
  const std::string policy = page->headers["content-security-policy"];
  EXPECT_NE(policy.find("script-src 'self'"), std::string::npos) << policy;
  EXPECT_EQ(policy.find("unsafe-inline"), std::string::npos) << policy;
  EXPECT_EQ(page->headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(page->headers["cache-control"], "no-cache");
  // Every script and style the page names is there, with its type, and
  // none is inline.
  EXPECT_EQ(page->body.find("<script>"), std::string::npos);
  EXPECT_EQ(page->body.find("<style"), std::string::npos);
  const std::regex ref(R"re((?:src|href)="(/web/[^"]+)")re");
  int refs = 0;
  for (std::sregex_iterator it(page->body.begin(), page->body.end(), ref), end; it != end; ++it, ++refs) {
    const std::string target = (*it)[1];
    auto asset = get(node, target);
    ASSERT_TRUE(asset.ok());
    EXPECT_EQ(asset->status, 200) << target;
    const std::string type = asset->headers["content-type"];
    const char* expected = target.ends_with(".js") ? "text/javascript; charset=utf-8"
                           : target.ends_with(".css") ? "text/css; charset=utf-8"
                                                      : "image/svg+xml";
    EXPECT_EQ(type, expected) << target;
    EXPECT_FALSE(asset->body.empty()) << target;
  }
  EXPECT_GE(refs, 2);
  // Revalidation by ETag.
  auto again = get(node, "/web/index.html", {{"If-None-Match", page->headers["etag"]}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  // Other paths are the API's: unknown ones 404 (with the token), the rest
  // still need the token.
  auto missing = get(node, "/web/nope.js", {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(get(node, "/v1/revis/status")->status, 401);
  auto post = node::http_request(node.endpoint(), "POST", "/", "x", {}, 10000);
  EXPECT_EQ(post->status, 405);
}

// A browser's WebSocket offers the token as a subprotocol; the node selects
// "revis" in its answer (browsers drop a connection whose answer names none
// of the offered ones).
TEST(Dashboard, WebSocketTakesTheTokenAsASubprotocol) {
  NodeProcess node({"--engine", "sim", "--token", "s3cret"});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  auto upgrade = [&](const std::string& protocols) {
    return node::http_request(node.endpoint(), "GET", "/v1/revis/stream", "",
                              {{"Upgrade", "websocket"},
                               {"Connection", "Upgrade"},
                               {"Sec-WebSocket-Version", "13"},
                               {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                               {"Sec-WebSocket-Protocol", protocols}},
                              10000);
  };
  auto right = upgrade("revis, revis.token.733363726574");  // "s3cret"
  ASSERT_TRUE(right.ok()) << right.status().message();
  EXPECT_EQ(right->status, 101);
  EXPECT_EQ(right->headers["sec-websocket-protocol"], "revis");
  auto wrong = upgrade("revis, revis.token.6e6f7065");  // "nope"
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 401);
  auto none = upgrade("revis");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, 401);
}

}  // namespace
}  // namespace revis
