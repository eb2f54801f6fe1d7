// The Jinja evaluator: runs a parsed template (ast.h) against variables and
// returns the rendered text, with jinja2's semantics where chat templates
// rely on them: scoping (a for loop's iteration and a macro call get their
// own scope; if does not), the loop variable, macros with defaults, varargs,
// kwargs and caller, namespaces, undefined values, Python's operators.
//
// Hostile templates are bounded, never crash and never run forever: Limits
// caps the nesting depth (expressions, blocks, macro recursion), the total
// evaluation steps, the length of any string built (the output included), the
// length of any list built (range(), loops, repetition) and the wall time.
//
// Thread-safety: an Interpreter is one render's state; use one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace revis::jinja {

struct Limits {
  int max_depth = 256;               // nested expressions, blocks and calls
  uint64_t max_steps = 20'000'000;   // expressions and statements evaluated
  size_t max_string = 16u << 20;     // bytes in any string, the output included
  size_t max_items = 1u << 20;       // items in any list
  // Wall time of one render. Steps bound the count of operations but not
  // their size (each may touch a string of max_string bytes), so a clock
  // bounds the rest; only a hostile template gets near it.
  int64_t max_milliseconds = 10'000;
};

// The evaluated arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name`; null when absent.
  const Value* get(size_t index, std::string_view name) const;
  Value get_or(size_t index, std::string_view name, Value fallback) const;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter {
 public:
  Interpreter(Limits limits, std::unordered_map<std::string, Value> globals);
  ~Interpreter();  // breaks the reference cycles a render leaves (macro <-> frame, namespace -> itself)
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Throws TemplateError.
  std::string render(const Template& tpl, const Dict& variables);

  // For builtins: calls a callable value; counts a step; checks sizes.
  Value call(const Value& callee, CallArgs& args);
  void step();
  void check_string(size_t bytes) const;
  void check_items(size_t count) const;
  const Limits& limits() const { return limits_; }
  // A namespace() made by this render: cleared when the Interpreter goes.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  struct DepthGuard {
    Interpreter& in;
    explicit DepthGuard(Interpreter& interp);
    ~DepthGuard() { --in.depth_; }
  };

  Flow exec(const Body& body, const FramePtr& frame, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out);
  Flow exec_for(const Stmt& s, const FramePtr& frame, std::string& out);
  std::string capture(const Body& body, const FramePtr& frame);
  Value eval(const Expr& e, const FramePtr& frame);
  Value eval_binary(const Expr& e, const FramePtr& frame);
  Value eval_compare(const Expr& e, const FramePtr& frame);
  CallArgs eval_args(const std::vector<Arg>& args, const FramePtr& frame);
  Value filter(const Expr& f, Value input, const FramePtr& frame);
  Value lookup(const std::string& name, const FramePtr& frame) const;
  void assign(const Stmt& s, const Value& value, const FramePtr& frame);
  void bind_targets(const std::vector<std::string>& targets, bool tuple, const Value& value, Frame& frame);
  Value make_macro(const Stmt& s, const std::string& name, const FramePtr& frame);
  Value call_macro(const Stmt& s, const FramePtr& defining, CallArgs& args);
  void append(std::string& out, std::string_view text) const;

  Limits limits_;
  std::unordered_map<std::string, Value> globals_;
  std::vector<FramePtr> closure_frames_;  // frames that macros captured
  std::vector<Value> namespaces_;
  std::chrono::steady_clock::time_point deadline_;
  uint64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace revis::jinja
