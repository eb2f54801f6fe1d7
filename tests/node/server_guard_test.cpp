// Integration tests of the node's network guards against a real `revis
// serve --engine sim` (no model): malformed HTTP gets a status before the
// connection closes. Raw sockets, because a proper client cannot send the
// broken bytes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "node/client.h"
#include "node/node_process.h"

namespace revis {
namespace {

using testing::NodeProcess;

// Sends `bytes` on a fresh connection, half-closes it, and returns all the
// node answered until it closed (every wait bounded by SO_RCVTIMEO/SNDTIMEO).
std::string raw_exchange(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "<no socket>";
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

// The status code of an HTTP/1.1 answer, or 0 when there is none.
int status_of(const std::string& answer) {
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.c_str() + 9);
}

std::string many_fields(int n) {
  std::string fields;
  for (int i = 0; i < n; ++i) fields += "X-" + std::to_string(i) + ": a\r\n";
  return fields;
}

TEST(NodeHttpFraming, MalformedRequestsGetAStatusBeforeTheClose) {
  NodeProcess node({"--engine", "sim"});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const std::string host = "Host: 127.0.0.1:" + std::to_string(node.port()) + "\r\n";
  const std::string post = "POST /v1/completions HTTP/1.1\r\n" + host;
  struct Case {
    const char* what;
    std::string bytes;
    int status;
  };
  const std::vector<Case> cases = {
      {"1 MB URL", "GET /" + std::string(1 << 20, 'a') + " HTTP/1.1\r\n" + host + "\r\n", 414},
      {"1 MB header", "GET /health HTTP/1.1\r\n" + host + "X-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n", 431},
      {"10k header fields", "GET /health HTTP/1.1\r\n" + host + many_fields(10000) + "\r\n", 431},
      {"200 header fields", "GET /health HTTP/1.1\r\n" + host + many_fields(200) + "\r\n", 431},
      {"bad Content-Length", post + "Content-Length: abc\r\n\r\n", 400},
      {"two equal Content-Lengths", post + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400},
      {"two different Content-Lengths", post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400},
      {"Content-Length and Transfer-Encoding",
       post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"bare LF", "GET /health HTTP/1.1\n" + host + "\n", 400},
      {"bad method", "G(T /health HTTP/1.1\r\n" + host + "\r\n", 400},
      {"body over the limit", post + "Content-Length: 5000000\r\n\r\n" + std::string(5000000, 'x'), 413},
  };
  for (const Case& c : cases) {
    const std::string answer = raw_exchange(node.port(), c.bytes);
    EXPECT_EQ(status_of(answer), c.status) << c.what << ": " << answer.substr(0, 200);
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << c.what << ": " << answer.substr(0, 200);
  }
  // A well-formed request on the same node still works.
  EXPECT_EQ(status_of(raw_exchange(node.port(), "GET /health HTTP/1.1\r\n" + host + "\r\n")), 200);
  EXPECT_EQ(node.stop(std::chrono::seconds(10)), 0) << node.log();
}

std::string upgrade_request(const std::string& host, const std::string& origin) {
  return "GET /v1/revis/stream HTTP/1.1\r\nHost: " + host +
         "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
         "Sec-WebSocket-Version: 13\r\n" +
         (origin.empty() ? "" : "Origin: " + origin + "\r\n") + "\r\n";
}

node::HttpResponse request(const NodeProcess& node, const char* method, const std::string& target,
                           std::vector<std::pair<std::string, std::string>> headers, const std::string& body = "") {
  auto r = node::http_request(node.endpoint(), method, target, body, headers, 30000);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

TEST(NodeBrowserGuard, ForeignHostsAndOriginsAreRefusedAllowedOriginsGetCors) {
  NodeProcess node({"--engine", "sim", "--sim-tokens-per-s", "1000", "--allow-origin", "https://app.example"});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const std::string self = "127.0.0.1:" + std::to_string(node.port());
  const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2})";

  // DNS rebinding and cross-site WebSocket: refused before the upgrade.
  EXPECT_EQ(status_of(raw_exchange(node.port(), upgrade_request("evil.example", "http://evil.example"))), 403);
  EXPECT_EQ(status_of(raw_exchange(node.port(), upgrade_request("evil.example:" + std::to_string(node.port()), ""))), 403);
  EXPECT_EQ(status_of(raw_exchange(node.port(), upgrade_request(self, "http://evil.example"))), 403);
  EXPECT_EQ(status_of(raw_exchange(node.port(), upgrade_request(self, "https://app.example"))), 101);
  EXPECT_EQ(status_of(raw_exchange(node.port(), upgrade_request(self, ""))), 101);
  EXPECT_EQ(status_of(raw_exchange(node.port(), "GET /health HTTP/1.1\r\n\r\n")), 400) << "HTTP/1.1 needs a Host";

  // A "simple" cross-site POST (text/plain, no preflight) does not run.
  auto simple = request(node, "POST", "/v1/chat/completions", {{"Content-Type", "text/plain"}, {"Origin", "http://evil.example"}}, chat);
  EXPECT_EQ(simple.status, 403) << simple.body;
  EXPECT_EQ(simple.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(request(node, "GET", "/v1/models", {{"Host", "evil.example"}}).status, 403);
  EXPECT_EQ(request(node, "OPTIONS", "/v1/chat/completions",
                    {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}}).status,
            403);

  // The allowed origin: preflight, then the call, both with CORS headers.
  auto pre = request(node, "OPTIONS", "/v1/chat/completions",
                     {{"Origin", "https://app.example"},
                      {"Access-Control-Request-Method", "POST"},
                      {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_NE(pre.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_EQ(pre.headers["access-control-allow-headers"], "authorization, content-type, x-stainless-os");
  auto allowed = request(node, "POST", "/v1/chat/completions",
                         {{"Content-Type", "application/json"}, {"Origin", "https://app.example"}}, chat);
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(allowed.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_EQ(allowed.headers["vary"], "Origin");
  auto streamed = request(node, "POST", "/v1/chat/completions", {{"Content-Type", "application/json"}, {"Origin", "https://app.example"}},
                          R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true})");
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.headers["access-control-allow-origin"], "https://app.example");

  // The node's own pages (same origin) and names it serves pass.
  EXPECT_EQ(request(node, "GET", "/v1/models", {{"Origin", "http://" + self}}).status, 200);
  EXPECT_EQ(request(node, "GET", "/v1/models", {{"Host", "localhost:" + std::to_string(node.port())}}).status, 200);
  EXPECT_EQ(node.stop(std::chrono::seconds(10)), 0) << node.log();
}

}  // namespace
}  // namespace revis
