// jinja2's filters as chat templates use them (builtins.h's apply_filter).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/python_text.h"
#include "jinja/str_methods.h"

namespace revis::jinja {
namespace {

using Builtin = std::function<Value(Interpreter&, const Value&, CallArgs&)>;

// jinja2's attribute getter for filters: "a.b.0" looks up item by item.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t p = 0;
  for (;;) {
    const size_t dot = path.find('.', p);
    const std::string part = path.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    p = dot + 1;
  }
}

// Sorting key of jinja2's case-insensitive filters: strings compare lowercased.
Value fold_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_case(v.str(), false)) : v;
}

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined: return 0;
    case Type::kString: return static_cast<int64_t>(utf8_length(v.str()));
    case Type::kList:
      if (v.is_iterator()) break;
      return static_cast<int64_t>(v.items().size());
    case Type::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: break;
  }
  fail(std::string("object of type '") + v.type_name() + "' has no len()");
}

// The text of a number as Python's int() and float() accept it: surrounding
// whitespace and digit-group underscores dropped; empty when nothing is left.
std::string numeric_text(const std::string& text) {
  std::string clean;
  for (char c : py_strip(text, true, true))
    if (c != '_') clean += c;
  return clean;
}

// Python's int() / float() of a string; nullopt when it is not a number.
std::optional<double> parse_float(const std::string& text) {
  const std::string clean = numeric_text(text);
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (clean.empty() || end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(const std::string& text, int base) {
  const std::string clean = numeric_text(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(clean.c_str(), &end, base);
  if (clean.empty() || end != clean.c_str() + clean.size() || errno == ERANGE) return std::nullopt;
  return v;
}

std::string indent_text(const std::string& text, const std::string& pad, bool first, bool blank) {
  const std::vector<std::string> lines = py_splitlines(text + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return out;
}

ValueList filter_items(Interpreter& in, const Value& input, CallArgs& args, bool by_attr, bool keep) {
  ValueList out;
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) fail("selectattr/rejectattr needs an attribute");
    attr = need_str(args.positional[next++], "selectattr");
  }
  const bool has_test = next < args.positional.size();
  const std::string test = has_test ? need_str(args.positional[next++], "select") : "";
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next), args.positional.end());
  test_args.named = args.named;
  if (!input.truthy()) return out;  // jinja2 selects from a falsy value (None) as from nothing
  for (const Value& item : iterate(in, input)) {
    in.step();
    const Value v = by_attr ? attr_path(item, attr) : item;
    const bool pass = has_test ? apply_test(in, test, v, test_args) : v.truthy();
    if (pass == keep) out.push_back(item);
  }
  return out;
}

ValueList sorted(Interpreter& in, ValueList items, bool reverse, bool case_sensitive, const Value& attribute) {
  auto key = [&](const Value& v) {
    return fold_case(attribute.is_none() || attribute.is_undefined() ? v : attr_path(v, py_str(attribute)), case_sensitive);
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    in.step();
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

const std::unordered_map<std::string, Builtin>& filters() {
  static const std::unordered_map<std::string, Builtin> table = [] {
    std::unordered_map<std::string, Builtin> f;
    f["default"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const bool boolean = a.get_or(1, "boolean", Value::boolean(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return a.get_or(0, "default_value", Value::string(""));
      return v;
    };
    f["d"] = f["default"];
    f["length"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::integer(py_len(v)); };
    f["count"] = f["length"];
    f["string"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::string(py_str(v)); };
    f["trim"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value chars = a.get_or(0, "chars", Value::none());
      const std::string set = chars.is_none() ? "" : need_str(chars, "trim");
      return like(v, py_strip(py_str(v), true, true, chars.is_none() ? nullptr : &set));
    };
    f["upper"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, py_case(py_str(v), true)); };
    f["lower"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, py_case(py_str(v), false)); };
    f["capitalize"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, capitalize(py_str(v))); };
    f["title"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, jinja_title(py_str(v))); };
    f["replace"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      if (a.positional.size() < 2) fail("replace takes old and new");
      const int64_t count = a.get(2, "count") ? need_int(*a.get(2, "count"), "count") : -1;
      return like(v, py_replace(py_str(v), py_str(a.positional[0]), py_str(a.positional[1]), count, in));
    };
    f["safe"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_str(v), true); };
    f["escape"] = [](Interpreter&, const Value& v, CallArgs&) {
      return v.is_markup() ? v : Value::string(html_escape(py_str(v)), true);
    };
    f["e"] = f["escape"];
    f["forceescape"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(html_escape(py_str(v)), true); };
    f["pprint"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_repr(v)); };
    f["list"] = [](Interpreter& in, const Value& v, CallArgs&) { return Value::list(iterate(in, v)); };
    f["first"] = [](Interpreter& in, const Value& v, CallArgs&) {
      ValueList items = iterate(in, v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    f["last"] = [](Interpreter& in, const Value& v, CallArgs&) {
      if (v.is_iterator()) fail("'generator' object is not reversible");
      ValueList items = iterate(in, v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    f["reverse"] = [](Interpreter& in, const Value& v, CallArgs&) {
      if (v.is_string()) {
        std::vector<uint32_t> cps = utf8_decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return like(v, utf8_encode(cps));
      }
      ValueList items = iterate(in, v);
      std::reverse(items.begin(), items.end());
      // reversed() of a sequence is an iterator; of an iterator, a list
      return v.is_iterator() ? Value::list(std::move(items)) : Value::iterator(std::move(items));
    };
    f["join"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const std::string sep = py_str(a.get_or(0, "d", Value::string("")));
      const Value attribute = a.get_or(1, "attribute", Value::none());
      std::string out;
      bool first = true;
      for (const Value& item : iterate(in, v)) {
        if (!first) out += sep;
        first = false;
        out += py_str(attribute.is_none() ? item : attr_path(item, py_str(attribute)));
        in.check_string(out.size());
      }
      return Value::string(out);
    };
    f["items"] = [](Interpreter&, const Value& v, CallArgs&) {
      if (v.is_undefined()) return Value::iterator({});
      if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
      return Value::iterator(items_of(v.dict()).items());
    };
    f["dictsort"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      if (!v.is_dict()) fail("dictsort expects a mapping");
      const bool case_sensitive = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
      const std::string by = py_str(a.get_or(1, "by", Value::string("key")));
      const bool reverse = a.get_or(2, "reverse", Value::boolean(false)).truthy();
      if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
      ValueList pairs = items_of(v.dict()).items();
      return Value::list(sorted(in, std::move(pairs), reverse, case_sensitive, Value::string(by == "key" ? "0" : "1")));
    };
    f["sort"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      return Value::list(sorted(in, iterate(in, v), a.get_or(0, "reverse", Value::boolean(false)).truthy(),
                                a.get_or(1, "case_sensitive", Value::boolean(false)).truthy(),
                                a.get_or(2, "attribute", Value::none())));
    };
    f["unique"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const bool case_sensitive = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
      const Value attribute = a.get_or(1, "attribute", Value::none());
      ValueList out, seen;
      for (const Value& item : iterate(in, v)) {
        in.step();
        const Value key = fold_case(attribute.is_none() ? item : attr_path(item, py_str(attribute)), case_sensitive);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
        seen.push_back(key);
        out.push_back(item);
      }
      return Value::iterator(std::move(out));
    };
    f["map"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      ValueList out;
      if (!v.truthy()) return Value::iterator({});  // as jinja2: mapping over None gives nothing
      if (const Value* attribute = a.get(SIZE_MAX, "attribute")) {
        const Value* dflt = a.get(SIZE_MAX, "default");
        for (const Value& item : iterate(in, v)) {
          Value x = attr_path(item, py_str(*attribute));
          out.push_back(x.is_undefined() && dflt ? *dflt : x);
        }
        return Value::iterator(std::move(out));
      }
      if (a.positional.empty()) fail("map needs a filter name or attribute=");
      const std::string name = need_str(a.positional[0], "map");
      CallArgs rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.named = a.named;
      for (const Value& item : iterate(in, v)) {
        CallArgs each = rest;
        out.push_back(apply_filter(in, name, item, each));
      }
      return Value::iterator(std::move(out));
    };
    f["select"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, false, true)); };
    f["reject"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, false, false)); };
    f["selectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, true, true)); };
    f["rejectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, true, false)); };
    f["tojson"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      // Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
      JsonOptions opt;
      opt.ensure_ascii = a.get_or(0, "ensure_ascii", Value::boolean(false)).truthy();
      const Value indent = a.get_or(1, "indent", Value::none());
      if (!indent.is_none()) opt.indent = static_cast<int>(std::clamp<int64_t>(need_int(indent, "tojson indent"), 0, 64));
      const Value separators = a.get_or(2, "separators", Value::none());
      if (!separators.is_none()) {
        if (!separators.is_list() || separators.items().size() != 2) fail("tojson separators must be a pair of strings");
        opt.item_separator = need_str(separators.items()[0], "separators");
        opt.key_separator = need_str(separators.items()[1], "separators");
      }
      opt.sort_keys = a.get_or(3, "sort_keys", Value::boolean(false)).truthy();
      std::string out = json_dumps(v, opt);
      in.check_string(out.size());
      return Value::string(std::move(out));
    };
    f["indent"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value width = a.get_or(0, "width", Value::integer(4));
      const std::string pad = width.is_string() ? width.str()
                                                : std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(width, "indent"), 0, 256)), ' ');
      return like(v, indent_text(need_str(v, "indent"), pad, a.get_or(1, "first", Value::boolean(false)).truthy(),
                                 a.get_or(2, "blank", Value::boolean(false)).truthy()));
    };
    f["int"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value dflt = a.get_or(0, "default", Value::integer(0));
      if (v.is_undefined()) fail(v.undefined_reason());
      if (v.is_int()) return v;
      if (v.is_bool()) return Value::integer(v.as_int());
      if (v.is_float()) {
        if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return dflt;
        return Value::integer(static_cast<int64_t>(v.as_float()));
      }
      if (v.is_string()) {
        if (auto i = parse_int(v.str(), static_cast<int>(need_int(a.get_or(1, "base", Value::integer(10)), "base"))))
          return Value::integer(*i);
        if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
          return Value::integer(static_cast<int64_t>(*d));
      }
      return dflt;
    };
    f["float"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (v.is_undefined()) fail(v.undefined_reason());
      if (v.is_number()) return Value::number(v.to_double());
      if (v.is_string())
        if (auto d = parse_float(v.str())) return Value::number(*d);
      return a.get_or(0, "default", Value::number(0.0));
    };
    f["abs"] = [](Interpreter&, const Value& v, CallArgs&) {
      if (v.is_float()) return Value::number(std::fabs(v.as_float()));
      const int64_t i = need_int(v, "abs");
      if (i == INT64_MIN) fail("integer overflow");
      return Value::integer(i < 0 ? -i : i);
    };
    f["round"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (!v.is_number()) fail("round expects a number");
      if (!v.is_float() && py_str(a.get_or(1, "method", Value::string("common"))) == "common")
        return Value::integer(v.as_int());  // Python's round() of an int is that int
      const int64_t precision = std::clamp<int64_t>(need_int(a.get_or(0, "precision", Value::integer(0)), "round"), -20, 20);
      const std::string method = py_str(a.get_or(1, "method", Value::string("common")));
      const double scale = std::pow(10.0, static_cast<double>(precision));
      const double x = v.to_double() * scale;
      const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
      return Value::number(r / scale);
    };
    f["wordcount"] = [](Interpreter&, const Value& v, CallArgs&) {
      int64_t n = 0;
      bool in_word = false;
      for (uint32_t cp : utf8_decode(py_str(v))) {
        const bool w = is_word(cp);
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::integer(n);
    };
    f["center"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const std::string s = py_str(v);
      const int64_t width = std::min<int64_t>(need_int(a.get_or(0, "width", Value::integer(80)), "center"), 1 << 16);
      const int64_t len = static_cast<int64_t>(utf8_length(s));
      if (width <= len) return like(v, s);
      const int64_t total = width - len, left = total / 2 + (total & width & 1);
      return like(v, std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
    };
    f["batch"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const int64_t n = need_int(a.get_or(0, "linecount", Value::integer(1)), "batch");
      if (n <= 0) fail("batch size must be positive");
      const Value* fill = a.get(1, "fill_with");
      ValueList out, row;
      for (const Value& item : iterate(in, v)) {
        row.push_back(item);
        if (static_cast<int64_t>(row.size()) == n) out.push_back(Value::list(std::exchange(row, {})));
      }
      if (!row.empty()) {
        if (fill && !fill->is_none())
          while (static_cast<int64_t>(row.size()) < n) row.push_back(*fill);
        out.push_back(Value::list(std::move(row)));
      }
      return Value::iterator(std::move(out));
    };
    f["sum"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const Value attribute = a.get_or(0, "attribute", Value::none());
      Value total = a.get_or(1, "start", Value::integer(0));
      for (const Value& item : iterate(in, v))
        total = binary_op(in, "+", total, attribute.is_none() ? item : attr_path(item, py_str(attribute)));
      return total;
    };
    auto extreme = [](bool want_max) {
      return [want_max](Interpreter& in, const Value& v, CallArgs& a) {
        ValueList items = sorted(in, iterate(in, v), false, a.get_or(0, "case_sensitive", Value::boolean(false)).truthy(),
                                 a.get_or(1, "attribute", Value::none()));
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        return want_max ? items.back() : items.front();
      };
    };
    f["max"] = extreme(true);
    f["min"] = extreme(false);
    f["attr"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (a.positional.empty()) fail("attr needs a name");
      return get_attr(v, need_str(a.positional[0], "attr"));
    };
    return f;
  }();
  return table;
}

}  // namespace

bool is_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("No filter named '" + name + "'.");
  return it->second(in, input, args);
}

}  // namespace revis::jinja
