// revis demo: works offline on a fresh machine. Creates (once) a tiny
// synthetic model in the cache directory and generates from it; then starts
// two local nodes on it that are each other's peers, runs a small batch
// through one of them (`revis batch`), shows where each ticket ran and the
// cluster view (`revis status`), and ends with the dashboard's URL, keeping
// the nodes up until Ctrl-C (or stops them at once with --exit).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "net/client.h"
#include "revis/generate.h"
#include "tools/synthetic.h"

namespace revis::cli {
namespace {

struct DemoArgs {
  std::string cache_dir;
  std::string prompt = "One machine, one inference:";
  int n_predict = 48;
  int tickets = 8;
  bool exit = false;  // stop the nodes after the batch instead of keeping them up
};

constexpr const char* kNextSteps =
    "\nTo run a real model:   revis run -m path/to/model.gguf -p \"Hello\" -n 128\n"
    "To inspect a GGUF:     revis inspect path/to/model.gguf\n"
    "To quantize:           revis quantize model-F16.gguf model-Q4_K_M.gguf Q4_K_M\n"
    "A cluster:             docs/fabric.md\n";

// Blocks until SIGINT or SIGTERM (Ctrl-C reaches the nodes too: they are in
// the terminal's process group, and shut down by themselves).
void wait_for_interrupt() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int signal = 0;
  sigwait(&set, &signal);
}

// A port nothing listens on now; the nodes need theirs before they start,
// to name each other as peers.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// Runs this same binary with `args`; its stderr goes to `log` when given
// (stdout then to /dev/null), else both go to this process's stderr, which
// keeps the demo's stdout to the generated text. Returns the child's pid.
pid_t spawn_self(const std::vector<std::string>& args, const std::string& log) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (!log.empty()) {
    if (!std::freopen(log.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) _exit(127);
  } else if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    _exit(127);
  }
  std::vector<std::string> argv_strings = {"/proc/self/exe"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

int wait_child(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Polls until `check` holds or the time is up.
template <typename Check>
bool wait_for(Check check, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Two nodes on the demo model, each the other's peer; a batch through the
// first; where the tickets ran; the cluster view.
int two_node_demo(const std::filesystem::path& dir, const std::string& model, int n_tickets, bool keep_up) {
  const int ports[2] = {free_port(), free_port()};
  std::fprintf(stderr,
               "\n== Two nodes on this machine, each the other's peer (the fabric): a batch of %d tickets sent to one\n"
               "   revis serve -m %s --port %d --peer 127.0.0.1:%d --name demo-1\n"
               "   revis serve -m %s --port %d --peer 127.0.0.1:%d --name demo-2\n\n",
               n_tickets, model.c_str(), ports[0], ports[1], model.c_str(), ports[1], ports[0]);
  pid_t nodes[2];
  for (int i = 0; i < 2; ++i) {
    const std::string log = (dir / ("demo-node-" + std::to_string(i + 1) + ".log")).string();
    nodes[i] = spawn_self({"serve", "-m", model, "--port", std::to_string(ports[i]), "--peer",
                           "127.0.0.1:" + std::to_string(ports[1 - i]), "--name", "demo-" + std::to_string(i + 1), "-t",
                           "1", "-c", "512", "--heartbeat-ms", "500"},
                          log);
  }
  auto stop_nodes = [&] {
    for (pid_t pid : nodes)
      if (pid > 0) kill(pid, SIGTERM);
    for (pid_t pid : nodes)
      if (pid > 0) wait_child(pid);
  };
  // Node i sees its peer linked and done loading the model, so the batch
  // can spread over both from its first ticket.
  auto linked = [&](int i) {
    auto r = node::http_request({"127.0.0.1", ports[i]}, "GET", "/v1/revis/cluster", "", {}, 2000);
    if (!r.ok() || r->status != 200) return false;
    nlohmann::json view = nlohmann::json::parse(r->body, nullptr, false);
    if (view.is_discarded() || !view.contains("nodes")) return false;
    for (const auto& n : view["nodes"])
      if (n.value("link", "") == "up" && n.value("name", nlohmann::json()).is_string() && n.contains("loaded") &&
          n["loaded"].is_array() && !n["loaded"].empty())
        return true;
    return false;
  };
  if (!wait_for([&] { return linked(0) && linked(1); }, std::chrono::seconds(60))) {
    stop_nodes();
    return fail("the demo nodes did not start and link up; see " + (dir / "demo-node-1.log").string() + " and " +
                (dir / "demo-node-2.log").string());
  }
  const std::string input = (dir / "demo-batch.jsonl").string(), output = (dir / "demo-results.jsonl").string();
  {
    std::ofstream in(input);
    for (int i = 0; i < n_tickets; ++i)
      in << nlohmann::json{{"taskType", "complete"}, {"args", {{"prompt", "Ticket " + std::to_string(i) + " of the demo:"}}}}
                .dump()
         << "\n";
  }
  const int batch = wait_child(spawn_self({"batch", input, "--node", "127.0.0.1:" + std::to_string(ports[0]), "-o", output}, ""));
  std::map<std::string, int> ran_on;
  std::ifstream results(output);
  for (std::string line; std::getline(results, line);) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_discarded()) continue;
    // A results line carries the done event's stats: where it ran.
    if (r.is_object() && r.contains("stats") && r["stats"].is_object()) ++ran_on[r["stats"].value("node", "?")];
  }
  std::fprintf(stderr, "\nwhere the %d tickets ran:", n_tickets);
  for (const auto& [node_name, n] : ran_on) std::fprintf(stderr, " %s %d", node_name.c_str(), n);
  std::fprintf(stderr, "  (results: %s)\n\n", output.c_str());
  wait_child(spawn_self({"status", "--node", "127.0.0.1:" + std::to_string(ports[0])}, ""));
  std::fputs(kNextSteps, stderr);
  if (batch == 0 && keep_up) {
    std::fprintf(stderr,
                 "\nThe dashboard (the cluster live, and a playground; the text is meaningless, as above):\n"
                 "   dashboard: http://127.0.0.1:%d/\n"
                 "The two nodes stay up until Ctrl-C.\n",
                 ports[0]);
    wait_for_interrupt();
  }
  stop_nodes();
  if (batch != 0) return fail("revis batch failed (exit " + std::to_string(batch) + ")");
  return 0;
}

std::filesystem::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "revis";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "revis";
  return std::filesystem::temp_directory_path() / "revis-cache";
}

int demo(const DemoArgs& args) {
  const std::filesystem::path dir = args.cache_dir.empty() ? default_cache_dir() : std::filesystem::path(args.cache_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create the cache directory: " + ec.message());
  const std::string model = (dir / "revis-tiny-Q8_0.gguf").string();

  std::fprintf(stderr,
               "revis demo: no model is downloaded here, so this runs a tiny synthetic model whose weights are\n"
               "RANDOM: the text below is meaningless, but every step (GGUF loading, tokenizer, forward pass,\n"
               "Q8_0 kernels, sampling, streaming) is the real engine.\n\n");
  if (!std::filesystem::exists(model)) {
    SyntheticSpec spec = *synthetic_preset("tiny");
    spec.mix = QuantMix::kQ8_0;
    ThreadPool pool(ThreadPool::default_threads());
    ProgressLine progress("creating demo model");
    Status s = write_synthetic_model(spec, model, pool, [&progress](size_t done, size_t total, const std::string& name) {
      progress.update(done, total, name);
    });
    if (!s.ok()) return fail(s.message());
  }

  auto engine = load_engine({.model_path = model, .n_ctx = 512, .n_threads = 0});
  if (!engine) return 1;
  GenerateOptions options;
  options.max_tokens = args.n_predict;
  options.sampling.seed = 42;
  const std::vector<int32_t> tokens = engine->tokenize(args.prompt, engine->add_bos_default(), false);
  auto session = engine->new_session();
  std::printf("%s", args.prompt.c_str());
  auto result = generate(*engine, *session, tokens, options, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  if (!result.ok()) return fail(result.status().message());
  const GenerateResult& r = *result;
  const double gen_tps = r.generate_ms > 0 && r.generated.size() > 1 ? (r.generated.size() - 1) * 1000.0 / r.generate_ms : 0;
  std::printf("\n\n");
  std::fprintf(stderr, "prompt %d tokens in %.0f ms; generated %zu tokens at %.1f tok/s\n", r.n_prompt,
               r.prefill_ms, r.generated.size(), gen_tps);
  session.reset();  // free the cores (its thread pool) for the two nodes
  engine.reset();
  if (args.tickets == 0) {
    std::fputs(kNextSteps, stderr);
    return 0;
  }
  return two_node_demo(dir, model, args.tickets, !args.exit);
}

}  // namespace

void register_demo(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("demo", "Run the engine and a two-node cluster offline on a tiny synthetic model");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--cache-dir", args->cache_dir, "Where the demo model is kept (default ~/.cache/revis)");
  cmd->add_option("-p,--prompt", args->prompt, "Prompt")->capture_default_str();
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("--tickets", args->tickets, "Tickets for the two-node batch (0: skip it)")->capture_default_str();
  cmd->add_flag("--exit", args->exit, "Stop the two nodes after the batch (default: keep them up for the dashboard until Ctrl-C)");
  cmd->callback([args, &exit_code] { exit_code = demo(*args); });
}

}  // namespace revis::cli
