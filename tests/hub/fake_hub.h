// A Hugging Face hub on loopback for the tests, in the hub's layout:
//   GET /api/models/ORG/REPO[?blobs=true]  the listing (siblings, sizes, lfs.sha256)
//   GET /ORG/REPO/resolve/main/FILE        302 to http://HOST:PORT/cdn/ORG/REPO/FILE, with
//                                          X-Linked-Etag (the sha256) and X-Linked-Size
//   GET /cdn/ORG/REPO/FILE                 the bytes: Content-Length, Range -> 206
// Knobs make it misbehave the ways the real one can: a status for a path,
// a connection closed after N bytes of a file, a wrong sha256. It records
// what it was asked (targets, Range and Authorization headers).
//
// One thread serves one connection at a time (the client closes each).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "hash/sha256.h"

namespace revis::testing {

class FakeHub {
 public:
  struct File {
    std::string content;
    std::string etag_sha256;    // empty: the content's
    bool in_listing_lfs = true;  // lfs.sha256 and size in the listing
    bool sizes_given = true;     // X-Linked-Size and Content-Length
  };
  struct Request {
    std::string target, range, authorization;
  };

  FakeHub() : acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeHub() {
    stop_ = true;
    boost::system::error_code ignored;
    boost::asio::ip::tcp::socket wake(ioc_);
    wake.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void add_file(const std::string& repo, const std::string& name, std::string content) {
    std::lock_guard lock(mutex_);
    repos_[repo][name].content = std::move(content);
  }
  void set_etag(const std::string& repo, const std::string& name, const std::string& sha256) {
    std::lock_guard lock(mutex_);
    repos_[repo][name].etag_sha256 = sha256;
  }
  // Whether the listing gives the file's size and lfs.sha256.
  void set_listing_lfs(const std::string& repo, const std::string& name, bool given) {
    std::lock_guard lock(mutex_);
    repos_[repo][name].in_listing_lfs = given;
  }
  // No size anywhere: not in the listing, no X-Linked-Size, and the bytes
  // without a Content-Length (until the connection closes).
  void hide_size(const std::string& repo, const std::string& name) {
    std::lock_guard lock(mutex_);
    repos_[repo][name].in_listing_lfs = false;
    repos_[repo][name].sizes_given = false;
  }
  // Every request whose target starts with `prefix` gets this status.
  void force_status(const std::string& prefix, int status) {
    std::lock_guard lock(mutex_);
    forced_[prefix] = status;
  }
  // Redirects name the path alone ("Location: /cdn/..."), as the hub does
  // for a renamed repository, instead of a whole URL.
  void use_relative_redirects() { relative_redirects_ = true; }
  // The next answer with a file's bytes stops after `bytes` of them and
  // the connection is closed (Content-Length still says all of them).
  void cut_next_file_after(size_t bytes) { cut_after_ = bytes; }

  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  // content_length -1: none, the body ends when the connection closes.
  static std::string answer(int status, const std::string& reason, const std::vector<std::pair<std::string, std::string>>& headers,
                            const std::string& body, long content_length) {
    std::string text = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
    for (const auto& [k, v] : headers) text += k + ": " + v + "\r\n";
    if (content_length >= 0) text += "Content-Length: " + std::to_string(content_length) + "\r\n";
    return text + "Connection: close\r\n\r\n" + body;
  }

  std::string handle(const Request& r) {
    std::lock_guard lock(mutex_);
    for (const auto& [prefix, status] : forced_)
      if (r.target.rfind(prefix, 0) == 0) return answer(status, "Forced", {}, "{\"error\":\"forced\"}", 18);
    const std::string path = r.target.substr(0, r.target.find('?'));
    for (auto& [repo, files] : repos_) {
      if (path == "/api/models/" + repo) {
        nlohmann::json siblings = nlohmann::json::array();
        for (const auto& [name, f] : files) {
          nlohmann::json s = {{"rfilename", name}};
          if (f.in_listing_lfs) {
            s["size"] = f.content.size();
            s["lfs"] = {{"sha256", sha256_hex(f.content)}, {"size", f.content.size()}, {"pointerSize", 134}};
          }
          siblings.push_back(s);
        }
        const std::string body = nlohmann::json{{"id", repo}, {"siblings", siblings}}.dump();
        return answer(200, "OK", {{"Content-Type", "application/json"}}, body, body.size());
      }
      for (const auto& [name, f] : files) {
        if (path == "/" + repo + "/resolve/main/" + name) {
          const std::string sha = f.etag_sha256.empty() ? sha256_hex(f.content) : f.etag_sha256;
          std::vector<std::pair<std::string, std::string>> headers = {{"Location", (relative_redirects_ ? "" : endpoint()) + "/cdn/" + repo + "/" + name},
                                                                        {"X-Linked-Etag", "\"" + sha + "\""}};
          if (f.sizes_given) headers.emplace_back("X-Linked-Size", std::to_string(f.content.size()));
          return answer(302, "Found", headers, "", 0);
        }
        if (path == "/cdn/" + repo + "/" + name) {
          size_t from = 0;
          if (!r.range.empty()) from = std::stoul(r.range.substr(6));  // "bytes=N-"
          if (from >= f.content.size() && !r.range.empty()) return answer(416, "Range Not Satisfiable", {}, "", 0);
          const std::string body = f.content.substr(from);
          std::vector<std::pair<std::string, std::string>> headers;
          if (!r.range.empty())
            headers.emplace_back("Content-Range", "bytes " + std::to_string(from) + "-" + std::to_string(f.content.size() - 1) + "/" +
                                                      std::to_string(f.content.size()));
          const size_t cut = cut_after_.exchange(0);
          return answer(r.range.empty() ? 200 : 206, r.range.empty() ? "OK" : "Partial Content", headers,
                        cut && cut < body.size() ? body.substr(0, cut) : body, f.sizes_given ? long(body.size()) : -1);
        }
      }
    }
    return answer(404, "Not Found", {}, "Entry not found", 15);
  }

  void serve() {
    while (!stop_) {
      boost::asio::ip::tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) continue;
      boost::beast::flat_buffer buffer;
      boost::beast::http::request<boost::beast::http::string_body> req;
      boost::beast::http::read(socket, buffer, req, ec);
      if (ec) continue;
      Request r{.target = std::string(req.target()), .range = std::string(req[boost::beast::http::field::range]),
                .authorization = std::string(req[boost::beast::http::field::authorization])};
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(r);
      }
      boost::asio::write(socket, boost::asio::buffer(handle(r)), ec);
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> cut_after_{0};
  std::atomic<bool> relative_redirects_{false};
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, File>> repos_;
  std::map<std::string, int> forced_;
  std::vector<Request> requests_;
};

}  // namespace revis::testing
