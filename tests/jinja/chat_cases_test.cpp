// The shared chat-template cases (../shared/testdata/chat): every template as
// published with a popular model, each rendered on nine conversations by
// Python's jinja2 the way Hugging Face's apply_chat_template renders. A
// judged case must match byte for byte; an `error` case must fail; a `skip`
// case (jinja2's sandbox refused it) is not judged.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"
#include "support/testdata.h"

namespace revis::jinja {
namespace {

using Json = nlohmann::ordered_json;

const Json& all_cases() {
  static const Json cases = [] {
    std::ifstream in(testing::testdata("chat/cases.json"));
    return Json::parse(in);
  }();
  return cases;
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const Json& c : all_cases()) {
    const std::string name = c["template"];
    if (!c.contains("skip") && (names.empty() || names.back() != name)) names.push_back(name);
  }
  return names;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Where two texts first differ, with a little context, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 120)).dump() +
         "\n  got:  " + Json(got.substr(from, 120)).dump();
}

class ChatTemplateCases : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateCases, RendersLikeJinja2) {
  const std::string name = GetParam();
  const std::string source = read_text(testing::testdata("chat/templates/" + name));
  ASSERT_FALSE(source.empty()) << name;
  auto tpl = ChatTemplate::parse(source);
  ASSERT_TRUE(tpl.ok()) << tpl.status().message();
  int judged = 0;
  for (const Json& c : all_cases()) {
    if (c["template"] != name || c.contains("skip")) continue;
    const std::string case_name = c["case"];
    auto input = chat_input_from_json(c["input"]);
    ASSERT_TRUE(input.ok()) << case_name << ": " << input.status().message();
    auto out = tpl->render(*input);
    ++judged;
    if (c.contains("error")) {
      EXPECT_FALSE(out.ok()) << case_name << ": jinja2 raised " << c["error"] << " but this rendered";
      if (!out.ok()) {
        EXPECT_EQ(out.status().message(), c["error"].get<std::string>()) << case_name;
      }
      continue;
    }
    ASSERT_TRUE(out.ok()) << case_name << ": " << out.status().message();
    const std::string want = c["output"];
    EXPECT_TRUE(*out == want) << case_name << ": " << first_difference(want, *out);
  }
  EXPECT_GT(judged, 0) << "no judged case for " << name;
}

INSTANTIATE_TEST_SUITE_P(Shared, ChatTemplateCases, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string id;
                           for (char c : info.param.substr(0, info.param.size() - 6))
                             id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return id;
                         });

}  // namespace
}  // namespace revis::jinja
