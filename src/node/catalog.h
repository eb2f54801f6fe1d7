// The task catalogue: what a node does for each taskType a ticket names.
//
// A ticket carries only a task name and string arguments; everything else
// (which tier of model, the sampling settings, the prompt) lives here, so
// every node with the same catalogue does the same thing for the same
// ticket. The built-in tasks can be overridden and new tasks added from a
// TOML file (format in docs/protocol.md):
//
//   [tasks.haiku]
//   tier = "small"
//   system = "You are a poet."
//   user = "Write a haiku about {{topic}}."
//   required = ["topic"]
//   temperature = 0.9
//
// A task may promise the shape of its answer: `schema` (a JSON Schema, as
// JSON text) or `grammar` (GBNF). Every node then constrains generation to
// it, so each client of the task gets JSON that validates (or a sentence of
// the grammar), whatever the model.
//
// Templates use {{name}} placeholders (spaces inside the braces allowed);
// every placeholder must name a required or optional argument, and optional
// arguments have defaults. A task with raw = true has no system template: its
// user template is the whole prompt, given to the model without a chat
// template.
//
// digest() is "sha256:" + the SHA-256 of canonical_json(): keys sorted, no
// whitespace, numbers in shortest round-trip form. Two catalogues have the
// same digest exactly when every field of every task is equal.
//
// Thread-safety: a Catalog is a plain value; const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "protocol/errors.h"
#include "revis/status.h"
#include "revis/text_span.h"

namespace revis::node {

struct Task {
  std::string name;
  std::string description;
  std::string tier;
  bool raw = false;                 // no chat template: `user` is the prompt
  std::string system;               // system message template (unused when raw)
  std::string user;                 // user message template (the prompt when raw)
  std::vector<std::string> required;              // argument names, in order
  std::map<std::string, std::string> optional;    // argument name -> default
  double temperature = 0.7;
  double top_p = 0.95;
  int top_k = 40;
  double min_p = 0.05;
  int max_tokens = 512;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;     // fixed seed; absent = a fresh one per ticket
  // Speculative decoding with prompt lookup (revis/draft.h): for tasks
  // whose output copies from the prompt (summaries, extraction, reviews).
  bool lookup = false;
  // The answer's shape (at most one; both empty: free text): a JSON Schema
  // as JSON text, or GBNF; in TOML either key replaces the other.
  // compile_output() turns it into output_grammar.
  std::string schema;
  std::string grammar;
  std::shared_ptr<const Grammar> output_grammar;  // null: free text

  bool accepts(const std::string& arg) const;
};

// The prompt of one ticket: the task's templates with the arguments filled in.
struct TaskPrompt {
  std::string system;  // empty when raw
  std::string user;
  // Raw tasks: the byte ranges of `user` that hold argument values. They are
  // the client's text and stay text: a control token's text there is not
  // the token (only the catalogue's own template text may write one).
  std::vector<TextSpan> user_args;
};

class Catalog {
 public:
  // summarize, audit, translate, profile, think_en, chat, complete.
  static Catalog builtin();

  // Applies [tasks.NAME] tables from TOML text: fields given replace the
  // task's fields; a new name adds a task (needs at least tier and user);
  // `enabled = false` removes one. Unknown keys, wrong types, out-of-range
  // values and templates naming undeclared arguments are errors that name
  // the origin, the task and the field. On error the catalogue is unchanged.
  Status apply_toml(std::string_view toml_text, const std::string& origin);
  Status apply_file(const std::string& path);

  const Task* find(std::string_view name) const;
  const std::map<std::string, Task>& tasks() const { return tasks_; }
  const std::string& digest() const { return digest_; }
  std::string canonical_json() const;

  // Checks the arguments of a ticket against the task (unknown argument:
  // bad_request; required one missing or empty: missing_arg) and renders
  // its prompt.
  Outcome<TaskPrompt> render(const Task& task, const std::map<std::string, std::string>& args) const;

 private:
  void update_digest();
  std::map<std::string, Task> tasks_;
  std::string digest_;
};

// Replaces {{name}} placeholders with values[name]. Unknown names and
// malformed braces are errors (catalogue validation reports them at load, so
// a rendered ticket never meets one).
// With `inserted`, the byte range of each value in the result is appended
// to it.
Result<std::string> fill_template(std::string_view tmpl, const std::map<std::string, std::string>& values,
                                  std::vector<TextSpan>* inserted = nullptr);
// Names of the placeholders in a template, or an error for malformed braces.
Result<std::vector<std::string>> template_placeholders(std::string_view tmpl);
// Whether every field is in range and every placeholder is declared.
Status validate_task(const Task& task);
// Compiles the task's schema or grammar into output_grammar; an error names
// the task and the field.
Status compile_output(Task& task);

}  // namespace revis::node
