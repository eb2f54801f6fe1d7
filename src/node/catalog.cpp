#include "node/catalog.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "grammar/json_schema.h"
#include "hash/sha256.h"

namespace revis::node {
namespace {

bool valid_name(std::string_view name, size_t max_len) {
  if (name.empty() || name.size() > max_len) return false;
  if (!(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

Task make_task(std::string name, std::string tier, std::string description, std::string system, std::string user,
               std::vector<std::string> required, std::map<std::string, std::string> optional, double temperature,
               int max_tokens, bool lookup = false) {
  Task t;
  t.name = std::move(name);
  t.tier = std::move(tier);
  t.description = std::move(description);
  t.system = std::move(system);
  t.user = std::move(user);
  t.required = std::move(required);
  t.optional = std::move(optional);
  t.temperature = temperature;
  t.max_tokens = max_tokens;
  t.lookup = lookup;
  return t;
}

// TOML numbers may be written as integers ("temperature = 1").
std::optional<double> as_number(const toml::node& v) {
  if (auto d = v.value_exact<double>()) return *d;
  if (auto i = v.value_exact<int64_t>()) return static_cast<double>(*i);
  return std::nullopt;
}

Result<std::vector<std::string>> string_list(const toml::node& v, const std::string& where) {
  const toml::array* a = v.as_array();
  if (!a) return Status::error(where + ": expected an array of strings");
  std::vector<std::string> out;
  for (const toml::node& item : *a) {
    auto s = item.value_exact<std::string>();
    if (!s) return Status::error(where + ": expected an array of strings, found a non-string item");
    out.push_back(*s);
  }
  return out;
}

// Applies one [tasks.NAME] table onto `task`.
Status apply_fields(const toml::table& table, Task& task, const std::string& where) {
  for (auto&& [key_node, value_node] : table) {
    const toml::node& v = value_node;  // a plain reference: lambdas below capture it (clang 14 cannot capture bindings)
    const std::string key(key_node.str());
    const std::string at = where + "." + key;
    auto need_string = [&](std::string& out) -> Status {
      auto s = v.value_exact<std::string>();
      if (!s) return Status::error(at + ": expected a string");
      out = *s;
      return {};
    };
    auto need_number = [&](double& out) -> Status {
      auto d = as_number(v);
      if (!d) return Status::error(at + ": expected a number");
      out = *d;
      return {};
    };
    auto need_int = [&](int64_t lo, int64_t hi, int64_t& out) -> Status {
      auto i = v.value_exact<int64_t>();
      if (!i) return Status::error(at + ": expected an integer");
      if (*i < lo || *i > hi)
        return Status::error(at + ": " + std::to_string(*i) + " (expected " + std::to_string(lo) + ".." +
                             std::to_string(hi) + ")");
      out = *i;
      return {};
    };
    Status s;
    if (key == "description") {
      s = need_string(task.description);
    } else if (key == "tier") {
      s = need_string(task.tier);
    } else if (key == "system") {
      s = need_string(task.system);
    } else if (key == "user") {
      s = need_string(task.user);
    } else if (key == "raw") {
      auto b = v.value_exact<bool>();
      if (!b) return Status::error(at + ": expected true or false");
      task.raw = *b;
    } else if (key == "enabled") {
      if (!v.value_exact<bool>()) return Status::error(at + ": expected true or false");
    } else if (key == "required") {
      auto list = string_list(v, at);
      if (!list.ok()) return list.status();
      task.required = *list;
    } else if (key == "optional") {
      const toml::table* t = v.as_table();
      if (!t) return Status::error(at + ": expected a table of argument = \"default\"");
      task.optional.clear();
      for (auto&& [name, def] : *t) {
        auto d = def.value_exact<std::string>();
        if (!d) return Status::error(at + "." + std::string(name.str()) + ": expected a string default");
        task.optional[std::string(name.str())] = *d;
      }
    } else if (key == "temperature") {
      s = need_number(task.temperature);
    } else if (key == "top_p") {
      s = need_number(task.top_p);
    } else if (key == "min_p") {
      s = need_number(task.min_p);
    } else if (key == "top_k") {
      int64_t k = 0;
      s = need_int(0, 1 << 20, k);
      task.top_k = static_cast<int>(k);
    } else if (key == "max_tokens") {
      int64_t n = 0;
      s = need_int(1, 1 << 20, n);
      task.max_tokens = static_cast<int>(n);
    } else if (key == "stop") {
      auto list = string_list(v, at);
      if (!list.ok()) return list.status();
      task.stop = *list;
    } else if (key == "lookup") {
      auto on = v.value_exact<bool>();
      if (!on) return Status::error(at + ": expected true or false");
      task.lookup = *on;
    } else if (key == "schema" || key == "grammar") {
      // One shape with two spellings: either replaces the other ("" = none).
      if (table.contains("schema") && table.contains("grammar"))
        return Status::error(where + ": schema and grammar both given (the answer has one shape: keep one)");
      task.schema.clear();
      task.grammar.clear();
      s = need_string(key == "schema" ? task.schema : task.grammar);
    } else if (key == "seed") {
      int64_t seed = 0;
      s = need_int(0, INT64_MAX, seed);
      task.seed = static_cast<uint64_t>(seed);
    } else {
      return Status::error(at + ": unknown key (expected description, tier, raw, system, user, required, "
                                "optional, temperature, top_p, top_k, min_p, max_tokens, stop, seed, lookup, schema, grammar, "
                                "enabled)");
    }
    if (!s.ok()) return s;
  }
  return {};
}

}  // namespace

bool Task::accepts(const std::string& arg) const {
  return optional.count(arg) || std::find(required.begin(), required.end(), arg) != required.end();
}

Result<std::vector<std::string>> template_placeholders(std::string_view tmpl) {
  std::vector<std::string> names;
  size_t i = 0;
  while ((i = tmpl.find("{{", i)) != std::string_view::npos) {
    const size_t end = tmpl.find("}}", i + 2);
    if (end == std::string_view::npos) return Status::error("unclosed {{ at byte " + std::to_string(i));
    std::string_view inner = tmpl.substr(i + 2, end - i - 2);
    while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    while (!inner.empty() && inner.back() == ' ') inner.remove_suffix(1);
    if (!valid_name(inner, 64))
      return Status::error("placeholder {{" + std::string(tmpl.substr(i + 2, end - i - 2)) + "}} at byte " +
                           std::to_string(i) + " is not an argument name ([a-z][a-z0-9_]*)");
    names.emplace_back(inner);
    i = end + 2;
  }
  return names;
}

Result<std::string> fill_template(std::string_view tmpl, const std::map<std::string, std::string>& values,
                                  std::vector<TextSpan>* inserted) {
  std::string out;
  out.reserve(tmpl.size());
  size_t i = 0;
  while (true) {
    const size_t open = tmpl.find("{{", i);
    if (open == std::string_view::npos) break;
    const size_t end = tmpl.find("}}", open + 2);
    if (end == std::string_view::npos) return Status::error("unclosed {{ at byte " + std::to_string(open));
    std::string_view inner = tmpl.substr(open + 2, end - open - 2);
    while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    while (!inner.empty() && inner.back() == ' ') inner.remove_suffix(1);
    auto it = values.find(std::string(inner));
    if (it == values.end()) return Status::error("no value for {{" + std::string(inner) + "}}");
    out.append(tmpl.substr(i, open - i));
    if (inserted && !it->second.empty()) inserted->push_back({out.size(), out.size() + it->second.size()});
    out += it->second;  // values are inserted verbatim, never re-expanded
    i = end + 2;
  }
  out.append(tmpl.substr(i));
  return out;
}

Status validate_task(const Task& t) {
  const std::string at = "task " + t.name;
  if (!valid_name(t.name, 64)) return Status::error(at + ": the name must match [a-z][a-z0-9_]* (at most 64 bytes)");
  if (t.tier.empty()) return Status::error(at + ": tier is empty");
  if (t.user.empty()) return Status::error(at + ": the user template is empty");
  if (t.raw && !t.system.empty()) return Status::error(at + ": a raw task has no system template");
  if (!(t.temperature >= 0 && t.temperature <= 2))
    return Status::error(at + ": temperature " + std::to_string(t.temperature) + " (expected 0..2)");
  if (!(t.top_p > 0 && t.top_p <= 1)) return Status::error(at + ": top_p " + std::to_string(t.top_p) + " (expected (0, 1])");
  if (!(t.min_p >= 0 && t.min_p <= 1)) return Status::error(at + ": min_p " + std::to_string(t.min_p) + " (expected 0..1)");
  if (t.top_k < 0) return Status::error(at + ": top_k must be >= 0");
  if (t.max_tokens < 1) return Status::error(at + ": max_tokens must be >= 1");
  for (const std::string& s : t.stop)
    if (s.empty()) return Status::error(at + ": empty stop string");
  if (!t.schema.empty() && !t.grammar.empty())
    return Status::error(at + ": schema and grammar both given (the answer has one shape: keep one)");
  std::set<std::string> declared;
  for (const std::string& a : t.required) {
    if (!valid_name(a, 64)) return Status::error(at + ": argument name \"" + a + "\" must match [a-z][a-z0-9_]*");
    if (!declared.insert(a).second) return Status::error(at + ": argument " + a + " declared twice");
  }
  for (const auto& [a, def] : t.optional) {
    if (!valid_name(a, 64)) return Status::error(at + ": argument name \"" + a + "\" must match [a-z][a-z0-9_]*");
    if (!declared.insert(a).second) return Status::error(at + ": argument " + a + " is both required and optional");
  }
  const std::pair<const char*, const std::string*> templates[] = {{"system", &t.system}, {"user", &t.user}};
  for (const auto& [field, tmpl] : templates) {
    auto names = template_placeholders(*tmpl);
    if (!names.ok()) return Status::error(at + ": " + field + " template: " + names.status().message());
    for (const std::string& n : *names)
      if (!declared.count(n))
        return Status::error(at + ": " + field + " template uses {{" + n + "}} but the task declares no such argument");
  }
  return {};
}

Status compile_output(Task& t) {
  t.output_grammar = nullptr;
  const std::string at = "task " + t.name;
  if (t.schema.empty() && t.grammar.empty()) return {};
  auto compiled = t.schema.empty() ? Grammar::parse(t.grammar) : compile_json_schema_text(t.schema);
  if (!compiled.ok()) return Status::error(at + ": " + (t.schema.empty() ? "grammar: " : "schema: ") + compiled.status().message());
  t.output_grammar = std::move(*compiled);
  return {};
}

Catalog Catalog::builtin() {
  Catalog c;
  auto add = [&](Task t) { c.tasks_[t.name] = std::move(t); };
  add(make_task("summarize", "small", "Summarize a text.",
                "You are a precise summarizer. Write a faithful summary of the text the user gives you: keep the "
                "key facts, names and numbers, add nothing that is not in the text, and answer in the language of "
                "the text.",
                "Summarize the following text, focusing on {{focus}}.\n\n{{text}}", {"text"},
                {{"focus", "its main points"}}, 0.3, 512, true));
  add(make_task("audit", "large", "Review a text or code for problems.",
                "You are a meticulous reviewer. Find the problems in what the user gives you: errors, bugs, "
                "security issues, inconsistencies and unclear parts. List each problem with where it is, why it is "
                "a problem and how to fix it, most serious first. If you find none, say so.",
                "Review this {{kind}} for problems.\n\n{{text}}", {"text"}, {{"kind", "text or code"}}, 0.2, 1024, true));
  add(make_task("translate", "small", "Translate a text into another language.",
                "You are a professional translator. Translate the user's text faithfully, keeping its meaning, tone "
                "and formatting. Output only the translation.",
                "Translate the following text from {{from}} into {{to}}.\n\n{{text}}", {"text", "to"},
                {{"from", "its original language"}}, 0.2, 1024));
  Task profile = make_task("profile", "large", "Extract a structured profile from a text.",
                "You extract structured data. From the text the user gives you, build a profile of the {{subject}} "
                "it describes as one JSON object with the keys name, role, organization, location, skills (an "
                "array), contact and summary. Use null for anything the text does not say. Output only the JSON.",
                "{{text}}", {"text"}, {{"subject", "person or organization"}}, 0.1, 768, true);
  // The answer the system prompt asks for, enforced while sampling.
  profile.schema = R"({"type": "object", "properties": {)"
                   R"("name": {"type": ["string", "null"]}, "role": {"type": ["string", "null"]}, )"
                   R"("organization": {"type": ["string", "null"]}, "location": {"type": ["string", "null"]}, )"
                   R"("skills": {"type": "array", "items": {"type": "string"}}, )"
                   R"("contact": {"type": ["string", "null"]}, "summary": {"type": ["string", "null"]}}, )"
                   R"("required": ["name", "role", "organization", "location", "skills", "contact", "summary"]})";
  add(std::move(profile));
  add(make_task("think_en", "large", "Reason in English about a question.",
                "You are a careful thinker. Reason about the user's question step by step in English, weigh the "
                "alternatives, check your reasoning, and finish with a line that starts with \"Answer:\".",
                "Question: {{question}}\n\n{{context}}", {"question"}, {{"context", ""}}, 0.6, 1536));
  add(make_task("chat", "small", "Answer one chat message.", "{{system}}", "{{message}}", {"message"},
                {{"system", "You are a helpful assistant."}}, 0.7, 1024));
  Task complete = make_task("complete", "small", "Continue a raw prompt (no chat template).", "", "{{prompt}}",
                            {"prompt"}, {}, 0.8, 256);
  complete.raw = true;
  add(std::move(complete));
  for (auto& [name, task] : c.tasks_)
    if (Status s = compile_output(task); !s.ok()) throw std::logic_error("built-in catalogue: " + s.message());
  c.update_digest();
  return c;
}

Status Catalog::apply_toml(std::string_view toml_text, const std::string& origin) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::error(msg.str());
  }
  std::map<std::string, Task> next = tasks_;
  for (auto&& [key, v] : doc) {
    if (key.str() != "tasks")
      return Status::error(origin + ": unknown top-level key \"" + std::string(key.str()) + "\" (expected [tasks.NAME])");
    const toml::table* tasks = v.as_table();
    if (!tasks) return Status::error(origin + ": tasks must be a table of [tasks.NAME] tables");
    for (auto&& [name_key, tv] : *tasks) {
      const std::string name(name_key.str());
      const std::string where = origin + ": tasks." + name;
      const toml::table* table = tv.as_table();
      if (!table) return Status::error(where + ": expected a table");
      if (auto enabled = (*table)["enabled"].value_exact<bool>(); enabled && !*enabled) {
        next.erase(name);
        continue;
      }
      const bool exists = next.count(name) > 0;
      Task task = exists ? next[name] : Task{};
      task.name = name;
      if (Status s = apply_fields(*table, task, where); !s.ok()) return s;
      if (!exists && (!table->contains("tier") || !table->contains("user")))
        return Status::error(where + ": a new task needs at least tier and user");
      if (Status s = validate_task(task); !s.ok()) return s.with_context(origin);
      if (Status s = compile_output(task); !s.ok()) return s.with_context(origin);
      next[name] = std::move(task);
    }
  }
  tasks_ = std::move(next);
  update_digest();
  return {};
}

Status Catalog::apply_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open the catalogue file");
  std::ostringstream text;
  text << in.rdbuf();
  return apply_toml(text.str(), path);
}

const Task* Catalog::find(std::string_view name) const {
  auto it = tasks_.find(std::string(name));
  return it == tasks_.end() ? nullptr : &it->second;
}

std::string Catalog::canonical_json() const {
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& [name, t] : tasks_) {
    tasks[name] = {
        {"description", t.description}, {"tier", t.tier},
        {"raw", t.raw},                  {"system", t.system},
        {"user", t.user},                {"required", t.required},
        {"optional", t.optional},        {"temperature", t.temperature},
        {"top_p", t.top_p},              {"top_k", t.top_k},
        {"min_p", t.min_p},              {"max_tokens", t.max_tokens},
        {"stop", t.stop},                {"seed", t.seed ? nlohmann::json(*t.seed) : nlohmann::json(nullptr)},
        {"lookup", t.lookup},
    };
    // Only when given, so that catalogues without them keep their digests.
    if (!t.schema.empty()) tasks[name]["schema"] = t.schema;
    if (!t.grammar.empty()) tasks[name]["grammar"] = t.grammar;
  }
  // nlohmann's objects are sorted maps and dump() without indent adds no
  // whitespace, so this text is canonical for a given set of values.
  return nlohmann::json{{"format", "revis-catalog-1"}, {"tasks", tasks}}.dump();
}

void Catalog::update_digest() { digest_ = "sha256:" + sha256_hex(canonical_json()); }

Outcome<TaskPrompt> Catalog::render(const Task& task, const std::map<std::string, std::string>& args) const {
  for (const auto& [name, value] : args)
    if (!task.accepts(name))
      return NodeError{ErrorCode::kBadRequest, "task " + task.name + " has no argument \"" + name + "\""};
  std::map<std::string, std::string> values = task.optional;
  for (const std::string& name : task.required) {
    auto it = args.find(name);
    if (it == args.end()) return NodeError{ErrorCode::kMissingArg, "task " + task.name + " needs the argument " + name};
    if (it->second.empty()) return NodeError{ErrorCode::kMissingArg, "argument " + name + " is empty"};
  }
  for (const auto& [name, value] : args) values[name] = value;
  TaskPrompt prompt;
  // In a raw task the argument values' spans stay text (TaskPrompt).
  auto user = fill_template(task.user, values, task.raw ? &prompt.user_args : nullptr);
  if (!user.ok()) return NodeError{ErrorCode::kInternal, "task " + task.name + ": " + user.status().message()};
  prompt.user = *user;
  if (!task.raw) {
    auto system = fill_template(task.system, values);
    if (!system.ok()) return NodeError{ErrorCode::kInternal, "task " + task.name + ": " + system.status().message()};
    prompt.system = *system;
  }
  return prompt;
}

}  // namespace revis::node
