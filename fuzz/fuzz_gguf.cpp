// libFuzzer target for the GGUF reader. Any byte string must either be
// refused with a non-empty message or yield a GgufFile whose every value can
// be formatted, whose every getter answers (value or error) for every key,
// and whose every tensor's first and last data byte can be read. The input is
// parsed from a heap copy, so AddressSanitizer reports any tensor extent or
// string that reaches past the bytes actually given. The model
// configuration is then read from it, which must succeed or say why.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"

namespace {

using revis::gguf::Array;
using revis::gguf::GgufFile;
using revis::gguf::TensorInfo;
using revis::gguf::Value;
using revis::gguf::ValueType;

// Renders a value as a metadata viewer would, recursing into arrays; the
// numeric accessors are called on every value since they are documented to
// accept any integer or float.
void format_value(const Value& value, std::string& out) {
  out += revis::gguf::value_type_name(value.type);
  out += ' ';
  if (const std::string* s = value.as_string()) {
    out += *s;
  } else if (const Array* array = value.as_array()) {
    out += '[';
    for (const Value& item : array->items) {
      format_value(item, out);
      out += ',';
    }
    out += ']';
  } else if (const bool* b = std::get_if<bool>(&value.data)) {
    out += *b ? "true" : "false";
  } else {
    out += std::to_string(value.as_int());
    out += '/';
    out += std::to_string(value.as_double());
  }
  // Keep memory flat on inputs with huge arrays: only the work matters, not the text.
  if (out.size() > (1u << 16)) out.clear();
}

// Results are discarded: a getter may legitimately refuse a key of another
// type, but it must not crash, and a refusal must say why.
template <typename T>
void require_answer(const revis::Result<T>& result) {
  if (!result.ok() && result.status().message().empty()) __builtin_trap();
}

void call_every_getter(const GgufFile& file, const std::string& key) {
  require_answer(file.get_string(key));
  require_answer(file.get_int(key, 0));
  require_answer(file.get_float(key, 0.0));
  require_answer(file.get_bool(key, false));
  require_answer(file.get_string_array(key));
  require_answer(file.get_float_array(key));
  require_answer(file.get_int_array(key));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  revis::Result<std::unique_ptr<GgufFile>> result = GgufFile::parse(data, size, "fuzz");
  if (!result.ok()) {
    if (result.status().message().empty()) __builtin_trap();
    return 0;
  }
  const GgufFile& file = *result.value();

  std::string text;
  for (const revis::gguf::KeyValue& kv : file.metadata()) {
    text += kv.key;
    format_value(kv.value, text);
    if (file.find(kv.key) != &kv.value) __builtin_trap();  // keys are unique, so find() returns this entry
    call_every_getter(file, kv.key);
  }
  call_every_getter(file, "no such key");
  // The model's keys, every architecture's checks (deepseek4's compression
  // ratios and indexer, gemma3's and gpt-oss's windows, qwen35's delta-net
  // shape, ...): a config or a message.
  if (auto config = revis::read_model_config(file); !config.ok() && config.status().message().empty()) __builtin_trap();

  volatile uint8_t sink = 0;
  for (const TensorInfo& t : file.tensors()) {
    if (t.n_bytes == 0 || t.data == nullptr) __builtin_trap();  // every accepted dimension is at least 1
    if (file.data_offset() + t.offset + t.n_bytes > file.file_size()) __builtin_trap();
    sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
    text += t.shape_string();
    text += std::to_string(t.n_elements() + t.rows());
    if (file.tensor(t.name) != &t) __builtin_trap();
  }
  return 0;
}
