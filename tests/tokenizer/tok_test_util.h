// Helpers shared by the tokenizer tests: test-data paths, file reading,
// loading a tokenizer from a GGUF file, and a tiny GGUF writer for building
// hostile metadata in memory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace revis::test {

inline std::filesystem::path testdata() { return REVIS_TESTDATA_DIR; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits `text` on every occurrence of `sep`.
inline std::vector<std::string> split(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t next = text.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(text.substr(pos));
      return out;
    }
    out.push_back(text.substr(pos, next - pos));
    pos = next + sep.size();
  }
}

struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

// Loads the tokenizer of a GGUF file; fails the current test on error.
inline Loaded load(const std::filesystem::path& path) {
  Loaded out;
  auto file = gguf::GgufFile::open(path.string());
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return out;
  out.file = std::move(file.value());
  auto tok = Tokenizer::from_gguf(*out.file);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  if (tok.ok()) out.tok = std::move(tok.value());
  return out;
}

inline std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

// Minimal GGUF v3 writer (metadata only, no tensors).
class GgufWriter {
 public:
  void str(const std::string& key, const std::string& value) {
    header(key, 8);
    put_str(value);
    ++n_kv_;
  }
  void u32(const std::string& key, uint32_t value) {
    header(key, 4);
    put(value);
    ++n_kv_;
  }
  void i32(const std::string& key, int32_t value) {
    header(key, 5);
    put(value);
    ++n_kv_;
  }
  void boolean(const std::string& key, bool value) {
    header(key, 7);
    put(static_cast<uint8_t>(value));
    ++n_kv_;
  }
  void str_array(const std::string& key, const std::vector<std::string>& values) {
    header(key, 9);
    put(uint32_t{8});
    put(static_cast<uint64_t>(values.size()));
    for (const auto& v : values) put_str(v);
    ++n_kv_;
  }
  void f32_array(const std::string& key, const std::vector<float>& values) {
    header(key, 9);
    put(uint32_t{6});
    put(static_cast<uint64_t>(values.size()));
    for (float v : values) put(v);
    ++n_kv_;
  }
  void i32_array(const std::string& key, const std::vector<int32_t>& values) {
    header(key, 9);
    put(uint32_t{5});
    put(static_cast<uint64_t>(values.size()));
    for (int32_t v : values) put(v);
    ++n_kv_;
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    auto put_raw = [&](const void* p, size_t n) {
      const auto* b = static_cast<const uint8_t*>(p);
      out.insert(out.end(), b, b + n);
    };
    put_raw("GGUF", 4);
    const uint32_t version = 3;
    const uint64_t n_tensors = 0;
    put_raw(&version, 4);
    put_raw(&n_tensors, 8);
    put_raw(&n_kv_, 8);
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

  Result<std::unique_ptr<gguf::GgufFile>> parse() const {
    const auto b = bytes();
    return gguf::GgufFile::parse(b.data(), b.size(), "<test>");
  }

 private:
  template <typename T>
  void put(T v) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    body_.insert(body_.end(), b, b + sizeof v);
  }
  void put_str(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void header(const std::string& key, uint32_t type) {
    put_str(key);
    put(type);
  }
  std::vector<uint8_t> body_;
  uint64_t n_kv_ = 0;
};

// The vocabularies under testdata/vocab, and a gtest parameter-name printer
// for them ("deepseek-llm" -> "deepseek_llm": names may not hold '-').
inline const std::vector<std::string>& vocab_names() {
  static const std::vector<std::string> names = {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "deepseek-llm",
                                                 "gemma4"};
  return names;
}

// ggml-vocab-NAME.gguf: the shared test data's, or for gemma4 this
// repository's (scripts/golden/gemma4_vocab.sh). Its .inp and .out lie
// beside it.
inline std::filesystem::path vocab_file(const std::string& name) {
  const std::filesystem::path dir = name == "gemma4"
                                        ? std::filesystem::path(REVIS_REPO_TESTDATA_DIR) / "gemma4-vocab"
                                        : testdata() / "vocab";
  return dir / ("ggml-vocab-" + name + ".gguf");
}

inline std::string vocab_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace revis::test
