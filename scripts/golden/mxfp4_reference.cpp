// llama.cpp's MXFP4 dequantization as a reference for revis's: writes 255
// MXFP4 blocks (exponents 0..254, every code in both nibbles) to BLOCKS and
// ggml's float values of them to FLOATS.
//   mxfp4_reference BLOCKS FLOATS
// Built against llama.cpp's ggml-base (see tests/testdata/gpt-oss/README.md).
#include <cstdio>
#include <cstdint>
#include <vector>
#include "ggml.h"
int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mxfp4_reference BLOCKS FLOATS\n");
    return 2;
  }
  const int blocks = 255;
  std::vector<uint8_t> q(blocks * 17);
  for (int b = 0; b < blocks; ++b) {
    q[b * 17] = (uint8_t)b;
    for (int j = 0; j < 16; ++j) q[b * 17 + 1 + j] = (uint8_t)((j + b) % 16 | ((15 - j + 3 * b) % 16) << 4);
  }
  std::vector<float> y(blocks * 32);
  ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float(q.data(), y.data(), blocks * 32);
  FILE* f = fopen(argv[1], "wb"); fwrite(q.data(), 1, q.size(), f); fclose(f);
  f = fopen(argv[2], "wb"); fwrite(y.data(), 4, y.size(), f); fclose(f);
}
