// Generic: the whole answer is one JSON object, for templates with no
// tool-call syntax (the prompt describes the tools and this shape:
// generic_tool_prompt.h).
//   {"tool_calls": [{"name": ..., "arguments": {...}}, ...]}   calls
//   {"response": "text"}                                        words (tool_choice auto)
// The grammar writes exactly these; the reader also takes any spacing, and
// keeps whatever else the model wrote as content. A `response` streams as
// content while it is decoded (held_content), so a client sees the words
// as they come rather than at the end.
#include <algorithm>
#include <cstdint>

#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"
#include "jinja/python_text.h"

namespace revis::node {
namespace {

using namespace toolcalls;

constexpr size_t kNone = std::string_view::npos;

// Where the `response` text of an answer that opens {"response": " begins
// (just past that quote); 0 while `text` may still open so; kNone when it
// does not.
size_t response_start(std::string_view text) {
  static constexpr std::string_view kParts[] = {"{", "\"response\"", ":", "\""};
  size_t at = 0;
  for (std::string_view part : kParts) {
    at = std::min(text.size(), text.find_first_not_of(kSpace, at));
    const std::string_view rest = text.substr(at);
    if (rest.size() < part.size()) return part.starts_with(rest) ? 0 : kNone;
    if (!rest.starts_with(part)) return kNone;
    at += part.size();
  }
  return at;
}

// How reading a JSON string's body stopped.
enum class StringEnd {
  kOpen,    // the text ended (at: the end, or an escape cut off there)
  kClosed,  // at its closing quote (at)
  kBroken,  // at an escape JSON does not have (at: its backslash)
};
struct StringStop {
  size_t at;
  StringEnd end;
};

// The code unit of the \uXXXX escape at text[at]: kCutOff when the text ends
// inside what could still be one, kNotOne when it is not one.
constexpr int32_t kCutOff = -1, kNotOne = -2;
int32_t unicode_escape(std::string_view text, size_t at) {
  int32_t unit = 0;
  for (size_t k = 0; k < 6; ++k) {
    if (at + k >= text.size()) return kCutOff;
    const char c = text[at + k];
    if (k == 0 || k == 1) {
      if (c != "\\u"[k]) return kNotOne;
      continue;
    }
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return kNotOne;
    unit = unit * 16 + digit;
  }
  return unit;
}

// Decodes the body of a JSON string from text[from] (just past its opening
// quote) into `out`, up to where it stops. A lone surrogate decodes as
// U+FFFD; raw control bytes are kept as they are.
StringStop read_json_string(std::string_view text, size_t from, std::string& out) {
  size_t i = from;
  for (;;) {
    const size_t stop = std::min(text.size(), text.find_first_of("\"\\", i));
    out.append(text.substr(i, stop - i));
    i = stop;
    if (i == text.size()) return {i, StringEnd::kOpen};
    if (text[i] == '"') return {i, StringEnd::kClosed};
    if (i + 1 == text.size()) return {i, StringEnd::kOpen};
    static constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeant = "\"\\/\b\f\n\r\t";
    if (const size_t e = kEscaped.find(text[i + 1]); e != kNone) {
      out += kMeant[e];
      i += 2;
      continue;
    }
    const int32_t unit = unicode_escape(text, i);
    if (unit == kCutOff) return {i, StringEnd::kOpen};
    if (unit == kNotOne) return {i, StringEnd::kBroken};
    i += 6;
    if (unit >= 0xD800 && unit < 0xDC00) {
      // A high surrogate: the low one must follow as the next escape.
      const int32_t low = unicode_escape(text, i);
      if (low == kCutOff) return {i - 6, StringEnd::kOpen};
      if (low >= 0xDC00 && low < 0xE000) {
        jinja::utf8_append(out, 0x10000 + ((static_cast<uint32_t>(unit) - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00));
        i += 6;
        continue;
      }
    }
    jinja::utf8_append(out, unit >= 0xD800 && unit < 0xE000 ? 0xFFFD : static_cast<uint32_t>(unit));
  }
}

std::string held_response(std::string_view held, size_t* from) {
  if (*from == kNone) return {};
  if (*from == 0) {
    *from = response_start(held);
    if (*from == 0 || *from == kNone) return {};
  }
  std::string content;
  const StringStop stop = read_json_string(held, *from, content);
  *from = stop.end == StringEnd::kOpen ? stop.at : kNone;
  return content;
}

ParsedAnswer parse_generic(std::string_view text, const nlohmann::ordered_json&) {
  // Words: the decoded text, and anything after it but the object's close
  // (what held_response streamed is a prefix of this).
  if (const size_t start = response_start(text); start != 0 && start != kNone) {
    ParsedAnswer out;
    const StringStop stop = read_json_string(text, start, out.content);
    const std::string_view rest = text.substr(stop.end == StringEnd::kClosed ? stop.at + 1 : stop.at);
    if (stop.end != StringEnd::kClosed || trim(rest) != "}") out.content += rest;
    return out;
  }
  const auto j = parse_json(trim(text));
  if (!j || !j->is_object()) return {std::string(text), {}};
  const auto calls = j->find(kGenericCallsKey);
  if (calls == j->end() || !calls->is_array() || calls->empty()) return {std::string(text), {}};
  ParsedAnswer out;
  for (const nlohmann::ordered_json& c : *calls) {
    auto call = call_from_object(c);
    if (!call) return {std::string(text), {}};  // not calls after all: all of it is content
    out.calls.push_back(std::move(*call));
  }
  if (auto words = j->find(kGenericResponseKey); words != j->end() && words->is_string()) out.content = *words;
  return out;
}

}  // namespace

ToolCallFamily generic_tool_calls() {
  return {
      .format = ToolFormat::kGeneric,
      .name = "generic",
      .written_by = [](std::string_view) { return false; },
      .markers = {},
      .hold = ToolCallFamily::Hold::kOpeningAnswer,
      .openers = {"{"},
      .parse = parse_generic,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal("{\"name\": \"" + name + "\", \"arguments\": ") + arguments + gbnf_literal("}");
          },
      .answer_gbnf =
          [](const ToolRequest& request, const std::string& one_call, const std::string& text) {
            // Appended piece by piece: "x" + string makes GCC 12 warn falsely (-Wrestrict).
            std::string answer = gbnf_literal(kGenericCallsOpen);
            answer += ' ';
            answer += one_call;
            if (request.parallel) {
              answer += " (";
              answer += gbnf_literal(", ");
              answer += ' ';
              answer += one_call;
              answer += ")*";
            }
            answer += ' ';
            answer += gbnf_literal(kGenericListClose);
            if (text.empty()) return answer;
            answer += " | ";
            answer += gbnf_literal(kGenericResponseOpen);
            answer += ' ';
            answer += text;
            answer += ' ';
            answer += gbnf_literal("}");
            return answer;
          },
      .held_content = held_response,
  };
}

}  // namespace revis::node
