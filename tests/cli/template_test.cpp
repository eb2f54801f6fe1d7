// `revis template`: renders a shared chat-template case exactly as jinja2
// did (no newline added), and fails with the template's own message when the
// template raises.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

// The first shared case of `template_name` that has `field` ("output" or "error").
nlohmann::ordered_json shared_case(const std::string& template_name, const std::string& field) {
  std::ifstream in(testing::testdata("chat/cases.json"));
  for (const auto& c : nlohmann::ordered_json::parse(in))
    if (c["template"] == template_name && c.contains(field)) return c;
  return {};
}

// Runs `revis template` on one shared case of the template.
testing::CommandResult run_case(const std::string& template_name, const nlohmann::ordered_json& c) {
  TempDir tmp;
  const std::string input = tmp.file("case.json");
  std::ofstream(input) << c["input"].dump();
  return run_revis("template --template " +
                   shell_quote(testing::testdata("chat/templates/" + template_name).string()) + " --input " +
                   shell_quote(input));
}

TEST(TemplateCommand, PrintsTheRenderedPromptExactly) {
  const std::string name = "Qwen-Qwen3-0.6B.jinja";
  const auto c = shared_case(name, "output");
  ASSERT_FALSE(c.is_null());
  const auto r = run_case(name, c);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c["output"].get<std::string>());
}

TEST(TemplateCommand, RaisedTemplateFailsWithItsMessage) {
  const std::string name = "google-gemma-2-2b-it.jinja";
  const auto c = shared_case(name, "error");
  ASSERT_FALSE(c.is_null());
  const auto r = run_case(name, c);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(c["error"].get<std::string>()), std::string::npos) << r.err;
}

TEST(TemplateCommand, SyntaxErrorNamesTheLine) {
  TempDir tmp;
  std::ofstream(tmp.file("t.jinja")) << "ok\n{% if messages %}\nno end";
  std::ofstream(tmp.file("in.json")) << R"({"messages": []})";
  const auto r = run_revis("template --template " + shell_quote(tmp.file("t.jinja")) + " --input " +
                           shell_quote(tmp.file("in.json")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("endif"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 3"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace revis
