// Synthetic model files for the loader tests of one architecture: a good
// file from a spec, the message loading a file gives (or "loaded"), and
// copies without one tensor, each named as missing.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "revis/engine.h"
#include "support/gguf_copy.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis::testing {

// Writes `spec` as tmp's file `name` and returns its path.
inline std::string write_synthetic(const TempDir& tmp, const SyntheticSpec& spec,
                                   const std::string& name = "good.gguf") {
  ThreadPool pool(2);
  const std::string path = tmp.file(name);
  Status s = write_synthetic_model(spec, path, pool, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

// "loaded", or why the engine refuses the file.
inline std::string load_error(const std::string& path) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 64, .n_threads = 2});
  return engine.ok() ? std::string("loaded") : engine.status().message();
}

// Each of `names` dropped from a copy of `good` is named as missing.
inline void expect_missing_tensors_named(const std::string& good, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    TempDir tmp;
    write_gguf_without(good, tmp.file("bad.gguf"), name);
    const std::string error = load_error(tmp.file("bad.gguf"));
    EXPECT_NE(error.find("tensor '" + name + "' is missing"), std::string::npos) << error;
  }
}

}  // namespace revis::testing
