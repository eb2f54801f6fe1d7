// The vocabulary as the tokenizers see it: token texts, scores, attributes
// and the text -> id index. Internal to the tokenizer module.
//
// Token types come from `tokenizer.ggml.token_type` (1 normal, 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte) and are turned into attribute
// bits, because later rules (special-token matching, end-of-generation
// detection, per-model fixes) add bits on top of the stored type.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace revis::tok {

enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrNormal = 1u << 0,
  kAttrUnknown = 1u << 1,
  kAttrControl = 1u << 2,
  kAttrUserDefined = 1u << 3,
  kAttrUnused = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 6,  // eat whitespace left of the token when matching it in text
  kAttrRstrip = 1u << 7,  // eat whitespace right of it
};

// Maps a stored token_type value to attribute bits (unknown values: none).
uint32_t attr_from_token_type(int64_t type);

// Transparent hash so the text -> id map can be probed with string_views
// (no temporary strings in the hot loops).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint32_t> attr;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  // Id of the token whose text is exactly `s`, or -1.
  int32_t find(std::string_view s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }
  bool has(int32_t id, uint32_t bits) const { return valid(id) && (attr[id] & bits) != 0; }
};

}  // namespace revis::tok
