#include "cli/usage.h"

#include <algorithm>
#include <cctype>

#include <CLI/CLI.hpp>

namespace revis::cli {
namespace {

// Edits (insert, delete, replace, or swap two neighbours: "--tmep" is one
// from "--temp") that turn a into b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

bool is_negative_number(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

// Every spelling of the options of `app`: "--name" and "-n".
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names = {"--help", "-h"};
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string suggestion(const std::string& typed, const std::vector<std::string>& names) {
  const auto near = closest_name(typed, names);
  return near ? "; did you mean '" + *near + "'?" : std::string("; see --help");
}

}  // namespace

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(typed, c);
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Close: a couple of typos, and fewer than half of the letters.
  if (!best || best_distance > 2 || 2 * best_distance >= std::max(typed.size(), best->size())) return std::nullopt;
  return best;
}

void rename_gpu_layers_flag(std::vector<std::string>& args) {
  for (std::string& a : args) {
    if (a == "--") return;
    if (a == "-ngl" || a.rfind("-ngl=", 0) == 0) a = "--gpu-layers" + a.substr(4);
  }
}

std::optional<std::string> find_unknown_name(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* current = &app;
  bool positional_seen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return std::nullopt;
    if (a.size() > 1 && a[0] == '-' && !is_negative_number(a)) {
      const std::string name = a.substr(0, a.find('='));
      const CLI::Option* opt = current->get_option_no_throw(name);
      // "-t4": a short option with its value attached.
      if (!opt && a[1] != '-' && a.size() > 2) opt = current->get_option_no_throw(a.substr(0, 2));
      if (!opt && name != "--help" && name != "-h" && !(current == &app && name == "--version"))
        return "unknown option '" + name + "'" + (current == &app ? "" : " for '" + current->get_name() + "'") +
               suggestion(name, option_names(*current));
      // The value of an option that takes one is not a name.
      const bool value_attached = name.size() < a.size() || (a[1] != '-' && a.size() > 2);
      if (opt && opt->get_type_size() != 0 && !value_attached) ++i;
      continue;
    }
    std::vector<std::string> commands;
    for (const CLI::App* sub : current->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == a) {
        current = sub;
        commands.clear();
        break;
      }
      commands.push_back(sub->get_name());
    }
    if (current->get_name() == a) continue;
    // A word that is no subcommand: a positional argument where the command
    // takes some, else a mistyped command.
    if (!commands.empty() && !positional_seen && current->get_options([](const CLI::Option* o) {
                                                   return o->get_positional();
                                                 }).empty())
      return "unknown command '" + a + "'" + suggestion(a, commands);
    positional_seen = true;
  }
  return std::nullopt;
}

}  // namespace revis::cli
