#!/usr/bin/env bash
# The test suite, in stages that each print their wall time:
#   release  the layering check (scripts/check-layers.sh), then
#            a Release build (g++) of `revis` and of the two suites whose
#            speed depends on the optimizer: the kernel tests (test_quant) and
#            the llama.cpp golden tests on every kernel backend, scalar
#            included (test_model);
#   web      the dashboard in a real browser (scripts/test-web.sh);
#   package  the release build's .deb installed and checked
#            (scripts/test-package.sh, as root);
#   asan     every test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#            (the node, fabric, broker, CLI and KV store suites run only here:
#            they wait on sockets and processes, not on the optimizer, so a
#            second, unsanitized run of them would find nothing new);
#   arm64    the AArch64 (NEON) kernel and golden tests under QEMU
#            (scripts/test-arm64.sh);
#   fuzz     a bounded libFuzzer run of each parser, when clang is present.
# Needs ../shared/testdata beside the repository (or REVIS_TESTDATA_DIR).
#
# With clang++ the sanitizer build is a clang build with REVIS_FUZZ=ON: one
# tree holds both the sanitized tests and the fuzzers (libFuzzer needs
# clang), instead of a second full build of every library just for the
# fuzzers. Without clang++ the sanitizer build uses g++ and the fuzzers are
# skipped (the script says so).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
testdata=${REVIS_TESTDATA_DIR:-$PWD/../shared/testdata}
fuzz_seconds=${REVIS_FUZZ_SECONDS:-40}

# Each stage's wall time, printed when the next one starts and at the end.
start=$SECONDS stage_start=$SECONDS stage_name=
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
stage() {  # title
  [[ -n $stage_name ]] && echo "-- $stage_name: $(mmss $((SECONDS - stage_start)))"
  stage_name=$1 stage_start=$SECONDS
  echo "== $1"
}

stage "release build: revis, the kernel tests, the golden tests on every backend and on the GPU"
# The include graph against the module order (no build needed).
bash scripts/check-layers.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
cmake --build build -j"$jobs" --target revis test_quant test_model test_gpu
# test_gpu runs on lavapipe (mesa-vulkan-drivers), a Vulkan device on the
# CPU: every shared golden case teacher-forced, greedy for the en prompt,
# the CPU/GPU split for the F16 and Q4_K_M files (tests/gpu/golden_gpu_test.cpp).
ctest --test-dir build -j"$jobs" --output-on-failure -L '^(quant|model|gpu)$'

stage "the dashboard in a browser (chromium, playwright-core)"
bash scripts/test-web.sh build/revis

stage "package: the .deb from the release build, installed and checked"
bash scripts/test-package.sh build

# -g1 (line tables only): the sanitizers' stack traces keep their function
# names, files and lines (inlined frames included); full -g only added the
# variable and type information a debugger wants, at a large cost in compile
# and link time for this tree.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
if command -v clang++ >/dev/null; then
  fuzzers=true
  stage "AddressSanitizer + UndefinedBehaviorSanitizer build (clang, with the fuzzers) + tests"
  cmake -S . -B build-asan -G Ninja "${sanitizer_flags[@]}" -DREVIS_SANITIZE=ON -DREVIS_FUZZ=ON \
    -DCMAKE_CXX_COMPILER=clang++ -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
else
  fuzzers=false
  stage "AddressSanitizer + UndefinedBehaviorSanitizer build (g++: clang++ not found, so no fuzzers) + tests"
  cmake -S . -B build-asan -G Ninja "${sanitizer_flags[@]}" -DREVIS_SANITIZE=ON \
    -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
fi
cmake --build build-asan -j"$jobs"
# The release stage ran every golden case on every backend. Here the
# forward pass is checked for memory errors on the `en` and `long` prompts
# (the `code` and `ja` ones take the same paths with other tokens), and not
# on the scalar backend, whose plain loops took 150 s under the sanitizers.
# The GPU's golden cases (every set: shared, moe2bit, deepseek2, gemma4's
# fallback) ran in the release stage too; here its shader, session and
# memory tests check the host side.
# A parameterized test's ctest name ends in "  # GetParam() = ...", hence
# the ( |$) after each pattern.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure \
    -E '^OtherBackends/.*/scalar_|^Backends/Chunking\..*/scalar( |$)|^(AllCases/Golden|OtherBackends/GoldenOnBackend)\..*_(code|ja)( |$)|^[A-Za-z0-9]+/(Golden|Greedy|Split|Fallback)OnGpu\.'

stage "AArch64 (NEON) cross build + tests under qemu-aarch64"
bash scripts/test-arm64.sh

if $fuzzers; then
  stage "fuzzing the GGUF reader, the tokenizer, the KV checkpoint reader, the ticket parser, the Host/Origin checks, the OpenAI chat parser and tool-call readers, the chat-template engine, the imatrix and KL-divergence base readers, the grammar front ends and the hub listing, ${fuzz_seconds}s each"
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  mkdir -p "$corpus/gguf" "$corpus/tokenizer" "$corpus/checkpoint" "$corpus/ticket" "$corpus/request_guard" "$corpus/openai_chat" "$corpus/jinja" "$corpus/imatrix" "$corpus/kld_base" "$corpus/grammar" "$corpus/hub"
  cp "$testdata"/quant/*.gguf "$corpus/gguf/"
  # The headers of architectures with keys of their own (the fuzzer reads
  # each input's model configuration too); their tensors lie past -max_len.
  head -c 65536 "$testdata"/deepseek4/models/deepseek4-Q8_0.gguf >"$corpus/gguf/deepseek4.gguf"
  head -c 65536 "$testdata"/deepseek2/models/deepseek2-Q8_0.gguf >"$corpus/gguf/deepseek2.gguf"
  head -c 65536 tests/testdata/gemma3/models/gemma3-Q8_0.gguf >"$corpus/gguf/gemma3.gguf"
  head -c 65536 tests/testdata/gpt-oss/models/gpt-oss-Q8_0.gguf >"$corpus/gguf/gpt-oss.gguf"
  head -c 65536 tests/testdata/gemma4/models/gemma4-Q8_0.gguf >"$corpus/gguf/gemma4.gguf"
  head -c 65536 tests/testdata/gemma4moe/models/gemma4moe-Q8_0.gguf >"$corpus/gguf/gemma4moe.gguf"
  head -c 65536 tests/testdata/qwen35/models/qwen35-Q8_0.gguf >"$corpus/gguf/qwen35.gguf"
  head -c 65536 tests/testdata/qwen35moe/models/qwen35moe-Q8_0.gguf >"$corpus/gguf/qwen35moe.gguf"
  head -c 65536 tests/testdata/qwen3next/models/qwen3next-Q8_0.gguf >"$corpus/gguf/qwen3next.gguf"
  cp "$testdata"/moe2bit/imatrix/*.gguf "$corpus/imatrix/"
  # A KL-divergence base of 1 chunk of 4 tokens over a vocabulary of 4: its one scored row is uniform.
  printf 'REVISKLD\x01\0\0\0\x04\0\0\0\x04\0\0\0\x01\0\0\0\0\0\0\0\x01\0\0\0\x02\0\0\0\x03\0\0\0\0\0\x80\xbf\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' \
    >"$corpus/kld_base/seed.kld"
  # The same in llama-perplexity's layout (n_ctx, n_vocab, n_chunks; per row scale, min, q padded to even).
  printf '_logits_\x04\0\0\0\x04\0\0\0\x01\0\0\0\0\0\0\0\x01\0\0\0\x02\0\0\0\x03\0\0\0\0\0\0\0\x18\x72\xb1\xbf\0\0\0\0\0\0\0\0' \
    >"$corpus/kld_base/seed-llama-cpp.kld"
  cp "$testdata"/vocab/*.inp "$corpus/tokenizer/"
  cp "$testdata"/chat/templates/*.jinja "$corpus/jinja/"
  printf '{"type":"ticket","ticketID":"t1","taskType":"summarize","isStreaming":true,"args":{"text":"hi"}}' \
    >"$corpus/ticket/seed.json"
  printf '[::1]:8080\nhttp://[::1]:8080' >"$corpus/request_guard/seed.txt"
  # The first byte picks: byte % 8 == 0 a chat request body, 2 an Anthropic
  # one, 4 a Responses one, 6 an Ollama one; odd = a model's answer in family
  # (byte >> 1) % 11 ("-" = Hermes, ")" = harmony, "+" = generic).
  printf '0{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":"required"}' \
    >"$corpus/openai_chat/request.json"
  printf '2{"max_tokens":4,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"21"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}' \
    >"$corpus/openai_chat/messages.json"
  # 6 Ollama's, the next byte its endpoint ('0' % 4 = 0: /api/chat).
  printf '60{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"2","tool_name":"f"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"format":"json","think":false,"options":{"temperature":0,"num_predict":8,"stop":["x"],"num_ctx":512}}' \
    >"$corpus/openai_chat/ollama.json"
  printf '4{"previous_response_id":"resp_kept","instructions":"s","input":[{"type":"function_call_output","call_id":"c","output":"21"},{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}},{"type":"namespace","name":"ns","description":"d","tools":[{"type":"function","name":"g","parameters":{"type":"object"}}]}],"tool_choice":"required","text":{"format":{"type":"text"}},"reasoning":{"effort":"low"}}' \
    >"$corpus/openai_chat/responses.json"
  printf -- '-Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>' >"$corpus/openai_chat/hermes.txt"
  printf ')<|channel|>analysis<|message|>t<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{"a": 1}' \
    >"$corpus/openai_chat/harmony.txt"
  printf '+{"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}' >"$corpus/openai_chat/generic.txt"
  printf '+{"response": "caf\\u00e9 \\"q\\""}' >"$corpus/openai_chat/generic-words.txt"
  # The first byte picks the front end: even = GBNF, odd = JSON Schema.
  printf '0root ::= "a" [0-9]+ ("," item)*\nitem ::= [a-z]{1,3}' >"$corpus/grammar/gbnf.txt"
  printf '1{"type":"object","properties":{"n":{"type":"integer","minimum":-5}},"required":["n"]}' >"$corpus/grammar/schema.json"
  # Deep seeds, past the depth limits (scripts/hostile-requests.sh): the
  # fuzzers start from inputs that reach the limits instead of having to
  # grow them.
  deep() { local out; printf -v out "%.0s$1" $(seq "$2"); printf '%s' "$out"; }
  printf '0root ::= %s"a"%s' "$(deep '(' 2000)" "$(deep ')' 2000)" >"$corpus/grammar/deep.txt"
  printf '1%s{}%s' "$(deep '{"type":"object","properties":{"a":' 300)" "$(deep '}}' 300)" >"$corpus/grammar/deep.json"
  printf '0{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s{}%s}}}' \
    "$(deep '{"type":"object","properties":{"a":' 40)" "$(deep '}}' 40)" >"$corpus/openai_chat/deep.json"
  # A model name, then the hub's listing of its repository.
  printf 'org/Model-GGUF:q4_k_m\n{"id":"org/Model-GGUF","siblings":[{"rfilename":"Model-Q4_K_M.gguf","size":9,"lfs":{"sha256":"%s","size":9}},{"rfilename":"Model-Q8_0-00001-of-00002.gguf"},{"rfilename":"Model-Q8_0-00002-of-00002.gguf"}]}' \
    "$(printf '%064d' 0)" >"$corpus/hub/seed.txt"
  # Each fuzzer is one single-threaded process: they run side by side, at
  # most $jobs at a time, so each still gets its ${fuzz_seconds}s of a core.
  # Each one's output goes to its own log; its last lines are printed when it
  # ends, all of it when it fails.
  fuzz() {  # name, libFuzzer arguments...
    local name=$1 status=0
    shift
    build-asan/fuzz_"$name" -max_total_time="$fuzz_seconds" "$@" "$corpus/$name" >"$corpus/$name.log" 2>&1 || status=$?
    if ((status == 0)); then
      tail -n 3 "$corpus/$name.log" | sed "s/^/fuzz_$name: /"
    else
      echo "fuzz_$name FAILED (exit $status):"
      tail -n 100 "$corpus/$name.log"
    fi
    return "$status"
  }
  failed=0
  declare -A fuzz_args=([gguf]="-max_len=65536" [tokenizer]="" [checkpoint]="-max_len=16384" [ticket]="" [request_guard]="-max_len=512" [openai_chat]="-max_len=65536" [jinja]="-max_len=20000" [imatrix]="-max_len=65536" [kld_base]="-max_len=16384" [grammar]="-max_len=65536" [hub]="-max_len=4096")
  running=0
  for name in gguf tokenizer checkpoint ticket request_guard openai_chat jinja imatrix kld_base grammar hub; do
    if ((running >= jobs)); then
      wait -n || failed=1
      running=$((running - 1))
    fi
    # shellcheck disable=SC2086  # the arguments are words
    fuzz "$name" ${fuzz_args[$name]} &
    running=$((running + 1))
  done
  for ((; running > 0; running--)); do
    wait -n || failed=1
  done
  ((failed == 0)) || { echo "fuzzing FAILED"; exit 1; }
fi
stage_done=$((SECONDS - stage_start))
echo "-- $stage_name: $(mmss "$stage_done")"
echo "== all passed in $(mmss $((SECONDS - start)))"
