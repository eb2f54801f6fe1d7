// libFuzzer target for the grammar front ends that API clients reach: a
// GBNF text (the `grammar` field) and a JSON Schema (response_format)
// converted to GBNF. The first byte picks which; the rest is the text. A
// grammar that parses is then driven over a small vocabulary by its own
// token masks for a bounded number of steps. Any input must parse or fail
// with a message, and never crash, hang or grow without bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_reader.h"
#include "grammar/grammar.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace revis;
  if (size == 0) return 0;
  static const auto vocabulary = [] {
    std::vector<std::string> tokens = {""};
    for (int c = 1; c < 256; ++c) tokens.push_back(std::string(1, static_cast<char>(c)));
    for (const char* t : {"{\"", "\":", "\"}", "true", "null", "\xC3\xA9", " the", "12", "\\u00"}) tokens.push_back(t);
    return std::make_shared<const TokenVocabulary>(tokens);
  }();
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string gbnf(text);
  if (data[0] & 1) {
    // As compile_json_schema_text reads it: a schema level is two of JSON.
    auto schema = read_ordered_json(text, 512);
    if (!schema.ok()) return 0;
    auto converted = json_schema_to_gbnf(*schema);
    if (!converted.ok()) return 0;
    gbnf = *converted;
  }
  auto grammar = Grammar::parse(gbnf);
  if (!grammar.ok()) return 0;
  GrammarConstraint constraint(*grammar, vocabulary);
  std::vector<float> logits(vocabulary->size());
  for (int step = 0; step < 64; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    constraint.mask(logits);
    // The allowed token picked by the input's bytes, so runs differ.
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < logits.size(); ++id)
      if (logits[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
    if (allowed.empty()) break;
    if (!constraint.accept(allowed[data[step % size] % allowed.size()]).ok()) __builtin_trap();
  }
  return 0;
}
