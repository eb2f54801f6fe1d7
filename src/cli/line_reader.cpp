#include "cli/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cwchar>
#include <filesystem>
#include <iostream>

#ifdef REVIS_HAVE_LIBEDIT
#include <histedit.h>
#endif

namespace revis::cli {
namespace {

constexpr int kHistorySize = 1000;

std::atomic<bool> g_interrupted{false};
// Self-pipe: the handler writes a byte so that a reader waiting in poll()
// wakes even when Ctrl-C came just before it began to wait (a SIGINT
// between checking the flag and a blocking read() would be missed).
int g_wake_pipe[2] = {-1, -1};

void on_sigint(int) {
  g_interrupted.store(true);
  if (g_wake_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake_pipe[1], &byte, 1);
  }
}

void drain_wake_pipe() {
  char bytes[64];
  while (g_wake_pipe[0] >= 0 && ::read(g_wake_pipe[0], bytes, sizeof bytes) > 0) {
  }
}

// One line of a message, after the prompt on a terminal; false at the end
// of input or on Ctrl-C.
bool plain_line(bool interactive, const std::string& prompt, std::string& line) {
  if (interactive) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  if (std::getline(std::cin, line)) return true;
  if (g_interrupted.load()) std::cin.clear();  // the read was broken by SIGINT, not ended
  return false;
}

}  // namespace

std::atomic<bool>& interrupted() { return g_interrupted; }

void install_interrupt_handler() {
  if (g_wake_pipe[0] < 0 && pipe2(g_wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) g_wake_pipe[0] = g_wake_pipe[1] = -1;
  struct sigaction action = {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
  sigaction(SIGINT, &action, nullptr);
}

std::string default_history_file() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return std::string(state) + "/revis/history";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/state/revis/history";
  return "";
}

#ifdef REVIS_HAVE_LIBEDIT

bool line_editing_built_in() { return true; }

struct LineReader::Editor {
  EditLine* el = nullptr;
  History* hist = nullptr;
  HistEvent event{};
  std::string prompt;
  std::mbstate_t utf8{};

  ~Editor() {
    if (el) el_end(el);
    if (hist) history_end(hist);
  }

  static const char* prompt_of(EditLine* el) {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    return static_cast<Editor*>(data)->prompt.c_str();
  }

  // libedit's read of one character, replaced so that Ctrl-C ends the line
  // being edited (-1) instead of being retried or ignored.
  static int read_char(EditLine* el, wchar_t* out) {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    auto* self = static_cast<Editor*>(data);
    for (;;) {
      if (g_interrupted.load()) {
        drain_wake_pipe();
        return -1;
      }
      pollfd waits[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake_pipe[0], POLLIN, 0}};
      if (::poll(waits, g_wake_pipe[0] >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) return -1;
      if (waits[1].revents & POLLIN) drain_wake_pipe();  // a Ctrl-C: the flag says whether it still counts
      if (!(waits[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char byte = 0;
      const ssize_t n = ::read(STDIN_FILENO, &byte, 1);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EINTR && !g_interrupted.load()) continue;
        return -1;
      }
      const size_t r = std::mbrtowc(out, &byte, 1, &self->utf8);
      if (r == static_cast<size_t>(-2)) continue;  // inside a UTF-8 sequence
      if (r == static_cast<size_t>(-1)) {          // not UTF-8 in this locale: the byte as is
        self->utf8 = {};
        *out = static_cast<unsigned char>(byte);
      }
      return 1;
    }
  }
};

LineReader::LineReader(const std::string& history_file)
    : interactive_(isatty(STDIN_FILENO) == 1), history_file_(history_file) {
  if (!interactive_) return;
  std::setlocale(LC_CTYPE, "");  // libedit decodes and shows UTF-8 through the locale
  editor_ = std::make_unique<Editor>();
  Editor& e = *editor_;
  e.hist = history_init();
  history(e.hist, &e.event, H_SETSIZE, kHistorySize);
  history(e.hist, &e.event, H_SETUNIQUE, 1);
  if (!history_file_.empty()) history(e.hist, &e.event, H_LOAD, history_file_.c_str());
  e.el = el_init("revis", stdin, stdout, stderr);
  el_set(e.el, EL_CLIENTDATA, &e);
  el_set(e.el, EL_EDITOR, "emacs");
  el_set(e.el, EL_PROMPT, &Editor::prompt_of);
  el_set(e.el, EL_HIST, history, e.hist);
  el_set(e.el, EL_GETCFN, &Editor::read_char);
  el_set(e.el, EL_BIND, "^R", "em-inc-search-prev", nullptr);
  el_set(e.el, EL_BIND, "^S", "em-inc-search-next", nullptr);
  // Home/End and Ctrl-arrows as most terminals send them.
  el_set(e.el, EL_BIND, "\033[H", "ed-move-to-beg", nullptr);
  el_set(e.el, EL_BIND, "\033[F", "ed-move-to-end", nullptr);
  el_set(e.el, EL_BIND, "\033[1;5D", "ed-prev-word", nullptr);
  el_set(e.el, EL_BIND, "\033[1;5C", "em-next-word", nullptr);
  el_source(e.el, nullptr);  // ~/.editrc, as other libedit programs
}

LineReader::~LineReader() = default;

bool LineReader::read_line(const std::string& shown, std::string& line) {
  line.clear();
  if (!editor_) return plain_line(interactive_, shown, line);
  editor_->prompt = shown;
  int count = 0;
  const char* text = el_gets(editor_->el, &count);
  if (g_interrupted.load()) {  // what was typed before Ctrl-C
    const LineInfo* typed = el_line(editor_->el);
    line.assign(typed->buffer, typed->lastchar);
    return false;
  }
  if (!text || count <= 0) return false;
  line = text;
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return true;
}

void LineReader::remember(const std::string& message) {
  if (!editor_ || message.empty()) return;
  history(editor_->hist, &editor_->event, H_ENTER, message.c_str());
  if (history_file_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(history_file_).parent_path(), ec);
  history(editor_->hist, &editor_->event, H_SAVE, history_file_.c_str());
}

#else  // built without libedit: plain lines

bool line_editing_built_in() { return false; }

struct LineReader::Editor {};

LineReader::LineReader(const std::string& history_file)
    : interactive_(isatty(STDIN_FILENO) == 1), history_file_(history_file) {}

LineReader::~LineReader() = default;

bool LineReader::read_line(const std::string& shown, std::string& line) {
  line.clear();
  return plain_line(interactive_, shown, line);
}

void LineReader::remember(const std::string&) {}

#endif

LineReader::Input LineReader::read(const std::string& prompt) {
  Input input;
  std::string line, shown = prompt;
  for (;;) {
    const bool got = read_line(shown, line);
    if (g_interrupted.load()) {
      input.event = Event::kInterrupted;
      input.text += line;
      return input;
    }
    if (!got) {
      if (interactive_) std::fputc('\n', stdout);  // Ctrl-D leaves the cursor after the prompt
      if (!input.text.empty()) input.event = Event::kMessage;  // else kEnd
      return input;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      input.text += line + "\n";
      shown = ". ";
      continue;
    }
    input.text += line;
    input.event = Event::kMessage;
    return input;
  }
}

}  // namespace revis::cli
