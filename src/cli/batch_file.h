// The input of `revis batch`: a JSONL file, one ticket per line.
//
//   {"taskType": "summarize", "args": {"text": "..."}}
//   {"taskType": "translate", "args": {"text": "Hola", "to": "English"}, "ticketID": "t-2"}
//
// taskType is required; args (string values only) and ticketID (as the
// protocol allows) are optional; nothing else is. Blank lines are skipped.
// A ticket without an ID gets "<prefix>-<line>", stable for the whole run so
// that a ticket resent after a lost connection keeps its ID. IDs must be
// unique in the file. Every malformed line is reported, with its line
// number, so a file can be fixed in one pass.
//
// Thread-safety: plain functions and values.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace revis::cli {

struct BatchTicket {
  int line = 0;  // 1-based line number in the input
  std::string id;
  std::string task;
  std::map<std::string, std::string> args;
};

struct BatchFile {
  std::vector<BatchTicket> tickets;  // in input order
  std::vector<std::string> errors;   // "FILE:LINE: what is wrong"
};

// Parses JSONL `text` read from `origin` (named in the errors).
BatchFile parse_batch_file(const std::string& text, const std::string& origin, const std::string& id_prefix);

}  // namespace revis::cli
