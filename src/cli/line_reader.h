// The user's side of `revis chat`: one message at a time from standard
// input. On a terminal, in a build with libedit, lines are edited in place
// (arrows, Home/End, Emacs keys) and kept in a history (up/down, Ctrl-R
// search) saved in a file; elsewhere (a pipe, a file, no libedit) plain
// lines are read. A line ending in "\" continues on the next one.
//
// Ctrl-C: install_interrupt_handler() makes SIGINT set interrupted()
// instead of killing the process; a read it breaks reports kInterrupted
// (the typed text is dropped), and whoever acts on the flag clears it.
//
// Thread-safety: one thread; interrupted() may be read from any.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace revis::cli {

// Whether this build has line editing (libedit).
bool line_editing_built_in();

void install_interrupt_handler();
// Set by SIGINT once installed; clear it with store(false).
std::atomic<bool>& interrupted();

class LineReader {
 public:
  enum class Event { kMessage, kEnd, kInterrupted };
  struct Input {
    Event event = Event::kEnd;
    std::string text;    // kMessage: the message; kInterrupted: what was typed
  };

  // `history_file` empty: no history is loaded or saved.
  explicit LineReader(const std::string& history_file);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Whether prompts are shown (standard input is a terminal).
  bool interactive() const { return interactive_; }
  // One message, after showing `prompt` (". " for continued lines).
  Input read(const std::string& prompt);
  // Adds a message to the history and saves the history file.
  void remember(const std::string& message);

  struct Editor;

 private:
  // One line without its newline; false at the end of input or on Ctrl-C.
  bool read_line(const std::string& shown, std::string& line);

  const bool interactive_;
  std::string history_file_;
  std::unique_ptr<Editor> editor_;  // null: plain lines
};

// $XDG_STATE_HOME/revis/history, else ~/.local/state/revis/history; empty
// when neither variable is set.
std::string default_history_file();

}  // namespace revis::cli
