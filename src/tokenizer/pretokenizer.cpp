// Regex pre-tokenizers (see pretokenizer.h): the per-name regex lists and a
// PCRE2-based splitter.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/utf8.h"

namespace revis::tok {

// One compiled PCRE2 pattern. The compiled code (and its JIT) is read-only
// once built, so one Regex is shared by every thread.
class Regex {
 public:
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // UCP: \p{..} and \d/\w use Unicode properties. DOLLAR_ENDONLY: "$"
    // means the end of the piece only, as in ECMAScript regexes.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Status::error("pre-tokenizer regex '" + pattern + "' does not compile at offset " +
                           std::to_string(err_off) + ": " + reinterpret_cast<const char*>(msg));
    }
    // JIT is an optimisation only; the interpreter is used where it fails.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return std::shared_ptr<const Regex>(new Regex(code));
  }

  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // First match in `subject` at or after byte `start`; `subject` must be
  // valid UTF-8 (checked by the caller once, not on every call: PCRE2 would
  // otherwise re-validate the rest of the subject each time, O(n^2)).
  // Returns false when there is none or matching failed (e.g. a resource
  // limit), in which case the rest counts as unmatched.
  bool find(std::string_view subject, size_t start, pcre2_match_data* md, size_t& match_begin,
            size_t& match_end) const {
    const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    int rc = pcre2_match(code_, s, subject.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // JIT stack exhaustion and similar: retry with the heap-based interpreter.
      rc = pcre2_match(code_, s, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    }
    if (rc < 0) return false;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    match_begin = ov[0];
    match_end = ov[1];
    return match_begin <= match_end && match_end <= subject.size();
  }

  pcre2_code* code() const { return code_; }

 private:
  explicit Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

namespace {

// ---- regex lists -----------------------------------------------------------
// Written with "\s"/"\S"; expand_whitespace() turns them into the Unicode
// White_Space property before compiling.

// GPT-2's pattern. (llama.cpp's hand-written version also ends in "|\s+";
// the result is the same because unmatched text is kept as its own piece.)
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Contractions spelled out instead of "(?i:...)": case-insensitive matching
// would also accept e.g. U+017F (long s) and U+212A (Kelvin sign).
#define REVIS_CONTRACTIONS R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"

constexpr const char* kLlama3 = REVIS_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 = REVIS_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / Tekken split letters into runs "some uppercase then lowercase".
// Like llama.cpp, "uppercase" means any letter but a-z and "lowercase" any
// letter but A-Z; [^\P{L}a-z] says that in one class (no repeated groups,
// which would need stack per character).
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+)" REVIS_CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*)" REVIS_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

#undef REVIS_CONTRACTIONS

// DeepSeek's letter class (cased letters of many scripts), from its
// tokenizer.json; escapes keep look-alike code points (U+212A KELVIN SIGN,
// U+2126 OHM SIGN, ...) from being normalised into their ASCII/Greek twins.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";

// ASCII and full-width punctuation, curly quotes, U+3000..U+3002.
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
// CJK ideographs, U+0800..U+4E00 and Hangul.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

struct Family {
  const char* name;
  std::vector<const char*> regexes;
  bool ignore_merges;
  bool add_bos;
  bool spm_spelling = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> list = {
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false, false},
      {"llama3", {kLlama3}, true, true},
      {"dbrx", {kLlama3}, false, false},
      {"chatglm", {kLlama3}, false, false},
      {"deepseek-llm",
       {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"((?<!\s)\s+$)", kDeepseekCjk, R"(\p{N}+)"},
       false,
       false},
      {"deepseek-v3",
       {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false,
       false},
      {"deepseek-coder",
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"},
       false,
       false},
      {"falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, false, false},
      {"gpt-2", {kGpt2}, false, false},
      {"starcoder", {R"(\p{N})", kGpt2}, false, false},
      {"qwen2", {kQwen2}, false, false},
      {"poro", {R"( ?[^(\s|.,!?…。，、।۔،)]+)"}, false, false},
      {"gpt-4o", {kGpt4o}, false, false},
      {"tekken", {kTekken}, true, true},
      // Merges run over whole lines: only newline runs are split off.
      {"gemma4", {R"([^\n]+|[\n]+)"}, false, true, true},
  };
  return list;
}

// tokenizer.ggml.pre value -> family. Aliases follow llama.cpp; "gpt-neox"
// (not known to llama.cpp) is GPT-2's byte-level pattern, which is what
// GPT-NeoX's tokenizer.json uses.
const char* family_of(std::string_view pre) {
  static const std::vector<std::pair<std::string_view, const char*>> aliases = {
      {"default", "default"},
      {"llama3", "llama3"},
      {"llama-v3", "llama3"},
      {"llama-bpe", "llama3"},
      {"falcon3", "llama3"},
      {"falcon-h1", "llama3"},
      {"pixtral", "llama3"},
      {"dbrx", "dbrx"},
      {"smaug-bpe", "dbrx"},
      {"chatglm-bpe", "chatglm"},
      {"glm4", "chatglm"},
      {"deepseek-llm", "deepseek-llm"},
      {"deepseek-coder", "deepseek-coder"},
      {"deepseek-v3", "deepseek-v3"},
      {"falcon", "falcon"},
      {"gpt-2", "gpt-2"},
      {"gpt2", "gpt-2"},
      {"mpt", "gpt-2"},
      {"gpt-neox", "gpt-2"},
      {"phi-2", "gpt-2"},
      {"olmo", "gpt-2"},
      {"jais", "gpt-2"},
      {"jina-es", "gpt-2"},
      {"jina-de", "gpt-2"},
      {"jina-v2-es", "gpt-2"},
      {"jina-v2-de", "gpt-2"},
      {"roberta-bpe", "gpt-2"},
      {"exaone4", "gpt-2"},
      {"starcoder", "starcoder"},
      {"refact", "starcoder"},
      {"command-r", "starcoder"},
      {"smollm", "starcoder"},
      {"codeshell", "starcoder"},
      {"exaone", "starcoder"},
      {"minerva-7b", "starcoder"},
      {"qwen2", "qwen2"},
      {"deepseek-r1-qwen", "qwen2"},
      {"stablelm2", "qwen2"},
      {"megrez", "qwen2"},
      {"hunyuan", "qwen2"},
      {"poro-chat", "poro"},
      {"bloom", "poro"},
      {"gpt3-finnish", "poro"},
      {"gpt-4o", "gpt-4o"},
      {"llama4", "gpt-4o"},
      {"tekken", "tekken"},
      {"gemma4", "gemma4"},
  };
  for (const auto& [alias, family] : aliases) {
    if (alias == pre) return family;
  }
  return nullptr;
}

// "\s" -> \p{White_Space}, "\S" -> \P{White_Space}; other escapes are copied
// untouched (so an escaped backslash followed by 's' stays literal).
std::string expand_whitespace(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += R"(\p{White_Space})";
      } else if (next == 'S') {
        out += R"(\P{White_Space})";
      } else {
        out += pattern[i];
        out += next;
      }
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Matches one non-ASCII whitespace character.
const Regex& non_ascii_space() {
  static const std::shared_ptr<const Regex> re =
      Regex::compile(R"((?![\x00-\x7F])\p{White_Space})").value();
  return *re;
}

struct MatchData {
  explicit MatchData(const Regex& re)
      : md(pcre2_match_data_create_from_pattern(re.code(), nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

struct Piece {
  size_t begin, end;
};

}  // namespace

Result<PreTokenizer> PreTokenizer::create(std::string_view name,
                                          std::vector<std::string>* warnings) {
  const char* family_name = family_of(name);
  if (!family_name) {
    if (warnings) {
      warnings->push_back(
          name.empty() ? std::string("tokenizer.ggml.pre is missing; using 'default'")
                       : "unknown pre-tokenizer '" + std::string(name) +
                             "'; using 'default' (tokenization may differ from the model's)");
    }
    family_name = "default";
  }
  const Family* family = nullptr;
  for (const Family& f : families()) {
    if (std::string_view(f.name) == family_name) family = &f;
  }
  PreTokenizer pre;
  pre.name_ = family_of(name) ? std::string(name) : std::string("default");
  pre.ignore_merges_ = family->ignore_merges;
  pre.add_bos_ = family->add_bos;
  pre.spm_spelling_ = family->spm_spelling;
  for (const char* pattern : family->regexes) {
    auto re = Regex::compile(expand_whitespace(pattern));
    if (!re.ok()) return re.status();
    pre.regexes_.push_back(std::move(re.value()));
  }
  return pre;
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (text.empty()) return;

  // Matching text: non-ASCII whitespace replaced by U+000B (one byte), with
  // a map back to offsets in `text`. Skipped when there is none (common).
  std::string folded;
  std::vector<size_t> to_text;  // folded offset -> text offset
  std::string_view subject = text;
  {
    const Regex& space = non_ascii_space();
    MatchData md(space);
    size_t mb = 0, me = 0;
    size_t pos = 0;
    while (pos < text.size() && space.find(text, pos, md.md, mb, me) && me > mb) {
      if (folded.empty() && to_text.empty()) {
        folded.reserve(text.size());
        to_text.reserve(text.size() + 1);
      }
      for (size_t i = pos; i < mb; ++i) {
        folded.push_back(text[i]);
        to_text.push_back(i);
      }
      folded.push_back('\x0B');
      to_text.push_back(mb);
      pos = me;
    }
    if (!to_text.empty()) {
      for (size_t i = pos; i < text.size(); ++i) {
        folded.push_back(text[i]);
        to_text.push_back(i);
      }
      to_text.push_back(text.size());
      subject = folded;
    }
  }

  std::vector<Piece> pieces{{0, subject.size()}};
  std::vector<Piece> next;
  for (const auto& re : regexes_) {
    MatchData md(*re);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const Piece& piece : pieces) {
      // Each piece is matched as a subject of its own, so lookaheads and "$"
      // stop at the piece's end.
      const std::string_view sub = subject.substr(piece.begin, piece.end - piece.begin);
      size_t last = 0;  // end of the previous match
      size_t from = 0;  // where to search next
      size_t mb = 0, me = 0;
      while (from < sub.size() && re->find(sub, from, md.md, mb, me)) {
        if (me == mb) {
          // Empty match: contributes nothing; step over one character.
          if (mb >= sub.size()) break;
          from = mb + lead_byte_length(static_cast<uint8_t>(sub[mb]));
          continue;
        }
        if (mb > last) next.push_back({piece.begin + last, piece.begin + mb});
        next.push_back({piece.begin + mb, piece.begin + me});
        last = from = me;
      }
      if (last < sub.size()) next.push_back({piece.begin + last, piece.end});
    }
    pieces.swap(next);
  }

  words.reserve(words.size() + pieces.size());
  for (const Piece& p : pieces) {
    const size_t b = to_text.empty() ? p.begin : to_text[p.begin];
    const size_t e = to_text.empty() ? p.end : to_text[p.end];
    words.push_back(text.substr(b, e - b));
  }
}

}  // namespace revis::tok
