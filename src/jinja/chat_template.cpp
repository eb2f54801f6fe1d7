#include "jinja/chat_template.h"

#include <cstdio>
#include <ctime>

#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/parser.h"
#include "jinja/python_text.h"

namespace revis::jinja {
namespace {

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > 256) fail("input JSON nested deeper than 256 levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.items.emplace_back(Value::string(k), from_json(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default: fail("unsupported JSON value in the input");
  }
}

// The broken-down time of an ISO 8601 text ("2024-07-26T09:30:00").
std::tm parse_time(const std::string& iso) {
  std::tm tm{};
  if (iso.empty()) {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
    return tm;
  }
  int y, mo, d, h = 0, mi = 0, s = 0;
  const int n = std::sscanf(iso.c_str(), "%d-%d-%d%*[T ]%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
  if (n < 3 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60)
    fail("now: expected an ISO 8601 time such as 2024-07-26T09:30:00, found '" + iso + "'");
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  std::tm copy = tm;
  timegm(&copy);  // fills in the weekday and the day of the year
  tm.tm_wday = copy.tm_wday;
  tm.tm_yday = copy.tm_yday;
  return tm;
}

// Python's datetime.strftime in the C locale, glibc's "%-d" (no padding) included.
std::string format_time(const std::tm& tm, const std::string& fmt) {
  static const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                        "July",    "August",   "September", "October", "November", "December"};
  static const char* const kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 == fmt.size()) {
      out += fmt[i];
      continue;
    }
    char c = fmt[++i];
    const bool no_pad = c == '-' && i + 1 < fmt.size();
    if (no_pad) c = fmt[++i];
    auto num = [&](int v, int width) {
      char buf[16];
      std::snprintf(buf, sizeof buf, no_pad ? "%d" : "%0*d", width, v);
      if (no_pad) std::snprintf(buf, sizeof buf, "%d", v);
      out += buf;
    };
    switch (c) {
      case 'Y': num(tm.tm_year + 1900, 4); break;
      case 'y': num((tm.tm_year + 1900) % 100, 2); break;
      case 'm': num(tm.tm_mon + 1, 2); break;
      case 'd': num(tm.tm_mday, 2); break;
      case 'e': {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%2d", tm.tm_mday);
        out += buf;
        break;
      }
      case 'H': num(tm.tm_hour, 2); break;
      case 'I': num(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12, 2); break;
      case 'M': num(tm.tm_min, 2); break;
      case 'S': num(tm.tm_sec, 2); break;
      case 'j': num(tm.tm_yday + 1, 3); break;
      case 'p': out += tm.tm_hour < 12 ? "AM" : "PM"; break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'b':
      case 'h': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'A': out += kDays[tm.tm_wday]; break;
      case 'a': out += std::string(kDays[tm.tm_wday]).substr(0, 3); break;
      case 'w': num(tm.tm_wday, 1); break;
      case '%': out += '%'; break;
      default:
        out += '%';
        if (no_pad) out += '-';
        out += c;
    }
  }
  return out;
}

}  // namespace

Result<ChatTemplateInput> chat_input_from_json(const nlohmann::ordered_json& j) {
  if (!j.is_object()) return Status::error("input: expected a JSON object");
  ChatTemplateInput in;
  if (!j.contains("messages") || !j["messages"].is_array()) return Status::error("input: 'messages' must be an array");
  in.messages = j["messages"];
  if (j.contains("tools") && !j["tools"].is_null()) in.tools = j["tools"];
  if (j.contains("add_generation_prompt")) {
    if (!j["add_generation_prompt"].is_boolean()) return Status::error("input: 'add_generation_prompt' must be a boolean");
    in.add_generation_prompt = j["add_generation_prompt"].get<bool>();
  }
  for (const char* key : {"bos_token", "eos_token", "now"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) return Status::error(std::string("input: '") + key + "' must be a string");
  }
  in.bos_token = j.value("bos_token", "");
  in.eos_token = j.value("eos_token", "");
  in.now = j.value("now", "");
  if (j.contains("kwargs") && !j["kwargs"].is_null()) {
    if (!j["kwargs"].is_object()) return Status::error("input: 'kwargs' must be an object");
    in.extra = j["kwargs"];
  }
  return in;
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, const Limits& limits) {
  ChatTemplate t;
  t.limits_ = limits;
  try {
    t.tpl_ = jinja::parse(source, limits.max_depth);
  } catch (const TemplateError& e) {
    return Status::error(std::string("chat template syntax: ") + e.what());
  }
  return t;
}

Result<std::string> ChatTemplate::render(const ChatTemplateInput& input) const {
  try {
    const std::tm now = parse_time(input.now);
    std::unordered_map<std::string, Value> globals = builtin_globals();
    globals["raise_exception"] = Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
      throw TemplateError(a.positional.empty() ? "" : py_str(a.positional[0]), /*raised=*/true);
    });
    globals["strftime_now"] = Value::function("strftime_now", [now](Interpreter&, CallArgs& a) {
      if (a.positional.empty() || !a.positional[0].is_string()) fail("strftime_now expects a format string");
      return Value::string(format_time(now, a.positional[0].str()));
    });
    Dict vars;
    vars.set(Value::string("messages"), from_json(input.messages, 0));
    if (input.tools) vars.set(Value::string("tools"), from_json(*input.tools, 0));
    vars.set(Value::string("add_generation_prompt"), Value::boolean(input.add_generation_prompt));
    vars.set(Value::string("bos_token"), Value::string(input.bos_token));
    vars.set(Value::string("eos_token"), Value::string(input.eos_token));
    if (input.extra.is_object())
      for (const auto& [k, v] : input.extra.items()) vars.set(Value::string(k), from_json(v, 0));
    Interpreter interp(limits_, std::move(globals));
    return interp.render(*tpl_, vars);
  } catch (const TemplateError& e) {
    if (e.raised()) return Status::error(e.what());
    return Status::error(std::string("chat template: ") + e.what());
  }
}

Result<std::string> render_chat_template(std::string_view source, const ChatTemplateInput& input, const Limits& limits) {
  auto t = ChatTemplate::parse(source, limits);
  if (!t.ok()) return t.status();
  return t->render(input);
}

}  // namespace revis::jinja
