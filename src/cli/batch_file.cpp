#include "cli/batch_file.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "protocol/ticket.h"

namespace revis::cli {
namespace {

using nlohmann::json;

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// The ticket on one line, or what is wrong with it.
std::string parse_line(const std::string& text, BatchTicket& t) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "not valid JSON (or not valid UTF-8)";
  if (!j.is_object()) return "expected a JSON object {\"taskType\": ..., \"args\": {...}}";
  for (const auto& [key, value] : j.items()) {
    if (key == "taskType") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) return "\"taskType\" must be a non-empty string";
      t.task = value.get<std::string>();
    } else if (key == "args") {
      if (!value.is_object()) return "\"args\" must be an object of strings";
      for (const auto& [name, arg] : value.items()) {
        if (!arg.is_string()) return "args." + name + " must be a string (ticket arguments are strings only)";
        t.args[name] = arg.get<std::string>();
      }
    } else if (key == "ticketID") {
      if (!value.is_string() || !node::valid_ticket_id(value.get_ref<const std::string&>()))
        return "\"ticketID\" must be 1..128 characters of A-Z a-z 0-9 . _ : -";
      t.id = value.get<std::string>();
    } else {
      return "unknown field \"" + key + "\" (a line has taskType, args, ticketID)";
    }
  }
  if (t.task.empty()) return "missing \"taskType\"";
  return {};
}

}  // namespace

BatchFile parse_batch_file(const std::string& text, const std::string& origin, const std::string& id_prefix) {
  BatchFile file;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, int> line_of_id;
  for (int number = 1; std::getline(in, line); ++number) {
    if (blank(line)) continue;
    BatchTicket t;
    t.line = number;
    const std::string at = origin + ":" + std::to_string(number) + ": ";
    if (std::string why = parse_line(line, t); !why.empty()) {
      file.errors.push_back(at + why);
      continue;
    }
    if (t.id.empty()) t.id = id_prefix + "-" + std::to_string(number);
    if (auto [it, fresh] = line_of_id.emplace(t.id, number); !fresh) {
      file.errors.push_back(at + "ticketID \"" + t.id + "\" is already used on line " + std::to_string(it->second));
      continue;
    }
    file.tickets.push_back(std::move(t));
  }
  return file;
}

}  // namespace revis::cli
