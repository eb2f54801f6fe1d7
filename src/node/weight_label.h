// A model's weight type as people name it ("Q4_K_M", "Q8_0"): what
// `revis bench` prints and what the Ollama API reports as a model's
// quantization_level.
//
// Thread-safety: pure.
#pragma once

#include <string>

#include "revis/engine.h"

namespace revis::node {

// llama.cpp's general.file_type names the mix; without it, the tensor type
// holding the most bytes; empty when the file says neither.
std::string weight_label(const ModelInfo& info);

}  // namespace revis::node
