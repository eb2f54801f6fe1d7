// The one error of the Jinja engine. Inside src/jinja/ a failure (a syntax
// error, a type error, a limit reached, the template's raise_exception)
// unwinds the lexer, parser or evaluator as a TemplateError; the public entry
// points (chat_template.h) catch it and return it as a revis::Status, so no
// exception leaves the module. Unwinding keeps the evaluator's hundreds of
// nested calls free of error plumbing.
#pragma once

#include <stdexcept>
#include <string>

namespace revis::jinja {

class TemplateError : public std::runtime_error {
 public:
  // `raised`: the template called raise_exception(); its message is shown as is.
  explicit TemplateError(const std::string& message, bool raised = false)
      : std::runtime_error(message), raised_(raised) {}
  bool raised() const { return raised_; }

 private:
  bool raised_;
};

[[noreturn]] inline void fail(const std::string& message) { throw TemplateError(message); }

}  // namespace revis::jinja
