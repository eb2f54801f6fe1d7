#!/usr/bin/env bash
# Builds llama.cpp (a public snapshot, commit d32676d, outside the repo) and
# llama_golden.cpp against it. The llama.cpp tree comes from the `fetch`
# tool's bare mirror (docs/ and models/ left out: the mirror lacks some of
# their large files, and neither is needed to build).
#   scripts/golden/build.sh [LLAMA_DIR]   (default /tmp/llamacpp)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
llama=${1:-/tmp/llamacpp}
mirror=${LLAMA_MIRROR:-/work/.mirror/unslothai+llama.cpp/repo}
if [ ! -f "$llama/CMakeLists.txt" ]; then
  mkdir -p "$llama"
  git -C "$mirror" archive HEAD -- . ':(exclude)docs' ':(exclude)models' | tar -x -C "$llama"
fi
cmake -S "$llama" -B "$llama/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF
cmake --build "$llama/build" -j2 --target llama
g++ -O2 -std=c++17 "$here/llama_golden.cpp" -I "$llama/include" -I "$llama/ggml/include" \
  -L "$llama/build/bin" -Wl,-rpath,"$llama/build/bin" -lllama -lggml -lggml-base -o "$llama/build/llama_golden"
# The MTP tool reads llama.cpp's staging API (src/llama-ext.h).
g++ -O2 -std=c++17 "$here/llama_mtp_golden.cpp" -I "$llama/include" -I "$llama/ggml/include" -I "$llama/src" \
  -L "$llama/build/bin" -Wl,-rpath,"$llama/build/bin" -lllama -lggml -lggml-base -o "$llama/build/llama_mtp_golden"
echo "built $llama/build/llama_golden and llama_mtp_golden"
