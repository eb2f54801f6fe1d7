// HTTPS as the real hub is reached: the client against `openssl s_server
// -WWW` on loopback (a package the tests already have: ca-certificates
// depends on openssl) with a certificate made for the test. Untrusted
// certificates and wrong host names are refused; a trusted one
// (SSL_CERT_FILE, which OpenSSL's default verify paths read) downloads and
// verifies.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hash/sha256.h"
#include "hub/pull.h"
#include "support/run_command.h"

namespace revis::hub {
namespace {

namespace fs = std::filesystem;
using testing::shell_quote;
using testing::TempDir;

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

bool accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{.sin_family = AF_INET, .sin_port = htons(static_cast<uint16_t>(port)), .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// `openssl s_server -WWW` serving `root`, which answers GET /PATH with the
// file PATH (query included) under HTTP/1.0.
class TlsServer {
 public:
  TlsServer(const std::string& root, const std::string& cert, const std::string& key) : port_(free_port()) {
    pid_ = fork();
    if (pid_ == 0) {
      if (chdir(root.c_str()) != 0) _exit(127);
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
      const std::string accept = "127.0.0.1:" + std::to_string(port_);
      execlp("openssl", "openssl", "s_server", "-quiet", "-WWW", "-accept", accept.c_str(), "-cert", cert.c_str(), "-key",
             key.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Up to 15 s: a loaded CI machine under the sanitizers starts it slowly.
    for (int i = 0; i < 300 && !accepts(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~TlsServer() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

TEST(Tls, VerifiesTheCertificateAndHostNameThenDownloads) {
  TempDir tmp;
  const std::string cert = tmp.file("cert.pem"), key = tmp.file("key.pem");
  ASSERT_EQ(testing::run_quiet("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost "
                               "-addext subjectAltName=DNS:localhost -keyout " + shell_quote(key) + " -out " + shell_quote(cert)),
            0)
      << "openssl (a dependency of ca-certificates) could not make a certificate";
  const std::string content(100000, 'g');
  fs::create_directories(tmp.file("www/api/models/org"));
  fs::create_directories(tmp.file("www/org/r/resolve/main"));
  std::ofstream(tmp.file("www/api/models/org/r?blobs=true"))
      << R"({"siblings":[{"rfilename":"M-Q8_0.gguf","lfs":{"sha256":")" << sha256_hex(content) << R"(","size":100000}}]})";
  std::ofstream(tmp.file("www/org/r/resolve/main/M-Q8_0.gguf"), std::ios::binary) << content;
  TlsServer server(tmp.file("www"), cert, key);
  ASSERT_TRUE(accepts(server.port())) << "openssl s_server did not start";
  const auto ref = *parse_reference("org/r:Q8_0");
  HubOptions options{.endpoint = "https://localhost:" + std::to_string(server.port()), .models_dir = tmp.file("models"),
                     .timeout_ms = 5000};

  unsetenv("SSL_CERT_FILE");  // the system's CA store, which does not know this certificate
  auto path = pull_model(ref, options, {});
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("TLS handshake with " + options.endpoint + " failed: certificate not trusted"),
            std::string::npos)
      << path.status().message();

  setenv("SSL_CERT_FILE", cert.c_str(), 1);
  HubOptions by_address = options;
  by_address.endpoint = "https://127.0.0.1:" + std::to_string(server.port());  // not the certificate's name
  path = pull_model(ref, by_address, {});
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("certificate not trusted"), std::string::npos) << path.status().message();

  path = pull_model(ref, options, {});
  unsetenv("SSL_CERT_FILE");
  ASSERT_TRUE(path.ok()) << path.status().message();
  std::ifstream in(*path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), content);
}

}  // namespace
}  // namespace revis::hub
