// The task catalogue: built-ins, TOML overrides, validation, the digest and
// argument checking.
#include <gtest/gtest.h>

#include "node/catalog.h"

namespace revis::node {
namespace {

TEST(Catalog, BuiltinsAreValidAndComplete) {
  const Catalog c = Catalog::builtin();
  for (const char* name : {"summarize", "audit", "translate", "profile", "think_en", "chat", "complete"}) {
    const Task* t = c.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_TRUE(validate_task(*t).ok()) << name << ": " << validate_task(*t).message();
  }
  EXPECT_TRUE(c.find("translate")->accepts("to"));
  EXPECT_TRUE(c.find("complete")->raw);
  EXPECT_EQ(c.find("nope"), nullptr);
  EXPECT_EQ(c.digest().rfind("sha256:", 0), 0u);
  EXPECT_EQ(c.digest().size(), 7u + 64u);
}

TEST(Catalog, DigestIsStableAndFollowsContent) {
  const Catalog a = Catalog::builtin(), b = Catalog::builtin();
  EXPECT_EQ(a.digest(), b.digest());
  Catalog c = Catalog::builtin();
  ASSERT_TRUE(c.apply_toml("[tasks.summarize]\nmax_tokens = 100\n", "t.toml").ok());
  EXPECT_NE(c.digest(), a.digest());
  Catalog d = Catalog::builtin();
  ASSERT_TRUE(d.apply_toml("[tasks.summarize]\nmax_tokens = 100\n", "other.toml").ok());
  EXPECT_EQ(c.digest(), d.digest()) << "the digest depends on content only";
  // An override equal to the built-in value changes nothing.
  Catalog e = Catalog::builtin();
  ASSERT_TRUE(e.apply_toml("[tasks.summarize]\ntemperature = 0.3\n", "t.toml").ok());
  EXPECT_EQ(e.digest(), a.digest());
  EXPECT_NE(a.canonical_json().find("\"format\":\"revis-catalog-1\""), std::string::npos);
}

TEST(Catalog, ASchemaOrGrammarShapesTheAnswer) {
  const Catalog builtin = Catalog::builtin();
  ASSERT_NE(builtin.find("profile")->output_grammar, nullptr) << "profile promises its JSON";
  EXPECT_EQ(builtin.find("summarize")->output_grammar, nullptr);

  Catalog c = Catalog::builtin();
  Status applied = c.apply_toml(R"([tasks.rate]
tier = "small"
user = "Rate {{text}}"
required = ["text"]
schema = '''{"type": "object", "properties": {"stars": {"type": "integer", "minimum": 1, "maximum": 5}},
           "required": ["stars"]}'''
[tasks.yes_no]
tier = "small"
user = "{{q}}"
required = ["q"]
grammar = 'root ::= "yes" | "no"'
)",
                                "t.toml");
  ASSERT_TRUE(applied.ok()) << applied.message();
  ASSERT_NE(c.find("rate")->output_grammar, nullptr);
  ASSERT_NE(c.find("yes_no")->output_grammar, nullptr);
  EXPECT_NE(c.canonical_json().find("\"schema\":"), std::string::npos) << "the shape is part of the digest";

  // A catalogue without shapes keeps the digest it had before they existed.
  Catalog plain = Catalog::builtin();
  ASSERT_TRUE(plain.apply_toml("[tasks.profile]\nenabled = false\n", "t.toml").ok());
  EXPECT_EQ(plain.canonical_json().find("\"schema\""), std::string::npos);
  EXPECT_EQ(plain.canonical_json().find("\"grammar\""), std::string::npos);

  // Either spelling replaces the shape a task had; "" leaves it free text.
  Catalog reshaped = Catalog::builtin();
  ASSERT_TRUE(reshaped.apply_toml("[tasks.profile]\ngrammar = 'root ::= \"{}\"'\n[tasks.audit]\nschema = '{}'\n", "t.toml").ok());
  EXPECT_TRUE(reshaped.find("profile")->schema.empty());
  EXPECT_NE(reshaped.find("profile")->output_grammar, nullptr);
  ASSERT_TRUE(reshaped.apply_toml("[tasks.profile]\nschema = ''\n", "t.toml").ok());
  EXPECT_EQ(reshaped.find("profile")->output_grammar, nullptr);
  EXPECT_NE(reshaped.find("audit")->output_grammar, nullptr);

  const std::pair<const char*, const char*> bad[] = {
      {"schema = '{\"type\": \"object\"'", "schema: expected a JSON Schema"},
      {"schema = '{\"type\": \"string\", \"pattern\": \"a+\"}'", "pattern"},
      {"schema = 3", "expected a string"},
      {"grammar = 'root ::= answer'", "grammar: "},
      {"grammar = 'root ::= \"a\"'\nschema = '{}'", "schema and grammar both given"},
  };
  for (const auto& [field, expected] : bad) {
    Catalog d = Catalog::builtin();
    const std::string toml = std::string("[tasks.shaped]\ntier = \"small\"\nuser = \"x\"\n") + field + "\n";
    Status s = d.apply_toml(toml, "shapes.toml");
    ASSERT_FALSE(s.ok()) << field;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("shaped"), std::string::npos) << "names the task: " << s.message();
    EXPECT_EQ(d.digest(), builtin.digest()) << "a refused file changes nothing";
  }
}

TEST(Catalog, OverridesAndNewTasks) {
  Catalog c = Catalog::builtin();
  const Status s = c.apply_toml(R"(
[tasks.summarize]
tier = "large"
stop = ["END"]
temperature = 1

[tasks.haiku]
tier = "small"
system = "You are a poet."
user = "Write a haiku about {{ topic }} in {{lang}}."
required = ["topic"]
optional = { lang = "English" }
max_tokens = 64
seed = 7

[tasks.complete]
enabled = false
)", "tasks.toml");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.find("summarize")->tier, "large");
  EXPECT_EQ(c.find("summarize")->stop, std::vector<std::string>{"END"});
  EXPECT_DOUBLE_EQ(c.find("summarize")->temperature, 1.0);
  EXPECT_EQ(c.find("summarize")->max_tokens, 512) << "fields not given keep the built-in value";
  EXPECT_EQ(c.find("complete"), nullptr);
  const Task* haiku = c.find("haiku");
  ASSERT_NE(haiku, nullptr);
  EXPECT_EQ(*haiku->seed, 7u);
  auto p = c.render(*haiku, {{"topic", "rain"}});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->system, "You are a poet.");
  EXPECT_EQ(p->user, "Write a haiku about rain in English.");
  p = c.render(*haiku, {{"topic", "rain"}, {"lang", "Japanese"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->user, "Write a haiku about rain in Japanese.");
}

TEST(Catalog, ATaskTurnsPromptLookupOn) {
  Catalog c = Catalog::builtin();
  EXPECT_TRUE(c.find("summarize")->lookup) << "summaries copy from the prompt";
  EXPECT_FALSE(c.find("chat")->lookup);
  const std::string before = c.digest();
  ASSERT_TRUE(c.apply_toml("[tasks.chat]\nlookup = true\n[tasks.summarize]\nlookup = false\n", "t.toml").ok());
  EXPECT_TRUE(c.find("chat")->lookup);
  EXPECT_FALSE(c.find("summarize")->lookup);
  EXPECT_NE(c.digest(), before);
  const Status bad = c.apply_toml("[tasks.chat]\nlookup = 1\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("lookup"), std::string::npos) << bad.message();
}

TEST(Catalog, BadFilesAreRefusedWithWhereAndWhy) {
  struct Case {
    const char* toml;
    const char* expect;  // part of the message
  } cases[] = {
      {"[tasks.summarize]\ncolour = 1\n", "tasks.summarize.colour: unknown key"},
      {"[tasks.summarize]\ntemperature = \"hot\"\n", "temperature: expected a number"},
      {"[tasks.summarize]\ntemperature = 3.5\n", "temperature"},
      {"[tasks.summarize]\nmax_tokens = 0\n", "max_tokens"},
      {"[tasks.summarize]\nrequired = [1]\n", "array of strings"},
      {"[tasks.summarize]\nuser = \"{{nope}}\"\n", "{{nope}}"},
      {"[tasks.summarize]\nuser = \"{{text\"\n", "unclosed"},
      {"[tasks.fresh]\nuser = \"hi\"\n", "needs at least tier and user"},
      {"[tasks.Bad-Name]\ntier = \"s\"\nuser = \"x\"\n", "must match"},
      {"[tasks.raw1]\ntier = \"s\"\nuser = \"x\"\nraw = true\nsystem = \"y\"\n", "raw task"},
      {"name = 1\n", "unknown top-level key"},
      {"[tasks\n", "t.toml:1"},
  };
  for (const Case& c : cases) {
    Catalog cat = Catalog::builtin();
    const std::string before = cat.digest();
    const Status s = cat.apply_toml(c.toml, "t.toml");
    ASSERT_FALSE(s.ok()) << c.toml;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
    EXPECT_EQ(cat.digest(), before) << "a failed apply changes nothing";
  }
  Catalog cat = Catalog::builtin();
  EXPECT_FALSE(cat.apply_file("/nonexistent/tasks.toml").ok());
}

TEST(Catalog, ArgumentsAreChecked) {
  const Catalog c = Catalog::builtin();
  const Task& translate = *c.find("translate");
  auto missing = c.render(translate, {{"text", "hola"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kMissingArg);
  EXPECT_NE(missing.error().message.find("to"), std::string::npos);
  auto empty = c.render(translate, {{"text", ""}, {"to", "English"}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kMissingArg);
  auto unknown = c.render(translate, {{"text", "hola"}, {"to", "English"}, {"tone", "formal"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kBadRequest);
  auto ok = c.render(translate, {{"text", "hola {{to}}"}, {"to", "English"}});
  ASSERT_TRUE(ok.ok());
  EXPECT_NE(ok->user.find("into English"), std::string::npos);
  EXPECT_NE(ok->user.find("hola {{to}}"), std::string::npos) << "argument values are never expanded";
  auto raw = c.render(*c.find("complete"), {{"prompt", "Once upon"}});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->user, "Once upon");
  EXPECT_EQ(raw->system, "");
}

TEST(Catalog, TemplateFilling) {
  auto r = fill_template("a {{x}} b {{ y }}{{x}}", {{"x", "1"}, {"y", "2"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "a 1 b 21");
  EXPECT_FALSE(fill_template("{{z}}", {{"x", "1"}}).ok());
  auto names = template_placeholders("{{a}} {{b_2}} {{a}}");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 3u);
  EXPECT_FALSE(template_placeholders("{{A}}").ok());
  EXPECT_FALSE(template_placeholders("{{}}").ok());
}

}  // namespace
}  // namespace revis::node
