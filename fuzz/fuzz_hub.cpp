// libFuzzer target for what the Hugging Face hub and the command line hand
// the hub client (src/hub/): a model name and the hub's listing JSON. The
// input is "NAME\nLISTING". No input may crash them, and the answers must
// keep their promises: a name that parses has one slash in ORG/REPO and
// prints back as it was given; every listed file name is safe to join under
// a directory; a chosen model's parts are all listed files ending in .gguf.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hub/file_choice.h"
#include "hub/listing.h"
#include "hub/reference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t newline = text.find('\n');
  const std::string_view name = text.substr(0, newline);
  const std::string_view listing = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);

  const auto ref = revis::hub::parse_reference(name);
  if (ref) {
    if (ref->repo.find('/') != ref->repo.rfind('/') || ref->text() != name) std::abort();
  }
  auto files = revis::hub::parse_listing(listing, "fuzz");
  if (!files.ok()) return 0;
  for (const auto& f : *files)
    if (!revis::hub::is_safe_relative_path(f.name)) std::abort();
  auto chosen = revis::hub::choose_model(*files, "fuzz", ref ? ref->tag : std::string(name));
  if (chosen.ok()) {
    if (chosen->parts.empty()) std::abort();
    for (const auto& part : chosen->parts)
      if (!revis::hub::is_gguf_name(part.name)) std::abort();
  }
  return 0;
}
