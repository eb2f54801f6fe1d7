#include "hub/file_choice.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>

namespace revis::hub {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::vector<std::string> components(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : text) {
    if (c == '-' || c == '.' || c == '/') {
      if (!current.empty()) parts.push_back(lower(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) parts.push_back(lower(current));
  return parts;
}

bool tag_matches(const std::string& tag, const ModelFiles& model) {
  if (is_gguf_name(tag)) {
    for (const RepoFile& f : model.parts) {
      const std::string base = f.name.substr(f.name.rfind('/') + 1);
      if (lower(f.name) == lower(tag) || lower(base) == lower(tag)) return true;
    }
    return false;
  }
  const std::vector<std::string> want = components(tag), have = components(model.label);
  if (want.empty() || want.size() > have.size()) return false;
  for (size_t i = 0; i + want.size() <= have.size(); ++i)
    if (std::equal(want.begin(), want.end(), have.begin() + static_cast<long>(i))) return true;
  return false;
}

// Quantization names as llama.cpp writes them into file names.
std::string quant_of(const std::string& label) {
  static const std::regex quant(R"((I?Q[0-9][A-Z0-9_]*|BF16|F16|F32|MXFP4[A-Z0-9_]*|TQ[0-9][A-Z0-9_]*))", std::regex::icase);
  const std::vector<std::string> parts = components(label);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it)
    if (std::regex_match(*it, quant)) {
      std::string upper = *it;
      std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
      return upper;
    }
  return "";
}

std::string display(const ModelFiles& m) { return m.quant.empty() ? m.label : m.quant + " (" + m.label + ")"; }

bool is_projector(const ModelFiles& m) {
  const std::string base = lower(m.label.substr(m.label.rfind('/') + 1));
  return base.rfind("mmproj", 0) == 0;
}

// A split model lists parts 1..N of N, once each.
Status check_complete(const ModelFiles& m, const std::string& what) {
  static const std::regex split(R"(-([0-9]{5})-of-([0-9]{5})\.gguf$)", std::regex::icase);
  std::smatch found;
  if (!std::regex_search(m.parts.front().name, found, split)) return Status();
  const size_t total = std::stoul(found[2].str());
  if (m.parts.size() != total)
    return Status::error(what + ": " + m.label + " is split in " + std::to_string(total) + " parts but " +
                         std::to_string(m.parts.size()) + " are there");
  return Status();
}

}  // namespace

std::vector<ModelFiles> group_models(const std::vector<RepoFile>& files) {
  static const std::regex split(R"((.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)", std::regex::icase);
  std::map<std::string, ModelFiles> by_label;
  for (const RepoFile& f : files) {
    if (!is_gguf_name(f.name)) continue;
    std::smatch found;
    const bool is_part = std::regex_match(f.name, found, split);
    const std::string label = is_part ? found[1].str() : f.name.substr(0, f.name.size() - 5);
    // A split model and a whole file of the same label stay apart.
    ModelFiles& m = by_label[label + (is_part ? "\x01" : "")];
    m.label = label;
    m.parts.push_back(f);
  }
  std::vector<ModelFiles> models;
  for (auto& [key, m] : by_label) {
    std::sort(m.parts.begin(), m.parts.end(), [](const RepoFile& a, const RepoFile& b) { return a.name < b.name; });
    m.quant = quant_of(m.label);
    models.push_back(std::move(m));
  }
  return models;
}

std::string describe_models(const std::vector<ModelFiles>& models) {
  std::string text;
  for (const ModelFiles& m : models) {
    if (!text.empty()) text += ", ";
    text += display(m);
    if (m.parts.size() > 1) text += " [" + std::to_string(m.parts.size()) + " parts]";
  }
  return text.empty() ? "no .gguf files" : text;
}

std::vector<ModelFiles> match_models(const std::vector<ModelFiles>& models, const std::string& tag) {
  std::vector<ModelFiles> matches;
  for (const ModelFiles& m : models)
    if (tag.empty() ? !is_projector(m) : tag_matches(tag, m)) matches.push_back(m);
  return matches;
}

Result<ModelFiles> choose_model(const std::vector<RepoFile>& files, const std::string& what, const std::string& tag) {
  const std::vector<ModelFiles> models = group_models(files);
  std::vector<ModelFiles> matches = match_models(models, tag);
  if (tag.empty()) {
    // Q4_K_M when there is one, as Ollama and llama.cpp default to.
    const auto q4_k_m = std::find_if(matches.begin(), matches.end(), [](const ModelFiles& m) { return m.quant == "Q4_K_M"; });
    if (q4_k_m != matches.end()) matches = {*q4_k_m};
    if (matches.empty()) return Status::error(what + " has no GGUF model (it has " + std::to_string(files.size()) + " files)");
    if (matches.size() > 1)
      return Status::error(what + " has several models and no Q4_K_M; name one with :QUANT or :FILE: " +
                           describe_models(matches));
  } else {
    if (matches.empty()) return Status::error(what + " has no GGUF matching \"" + tag + "\"; it has: " + describe_models(models));
    if (matches.size() > 1)
      return Status::error(what + ": \"" + tag + "\" matches several models; name one with :FILE: " + describe_models(matches));
  }
  if (Status s = check_complete(matches.front(), what); !s.ok()) return s;
  return matches.front();
}

}  // namespace revis::hub
