// Tests for grammar/grammar.h: GBNF parsing (and its errors) and the
// matcher's acceptance of texts, including characters split across pieces.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>

namespace revis {
namespace {

std::shared_ptr<const Grammar> parse_ok(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : nullptr;
}

// Whether the whole text is a sentence of the grammar.
bool sentence(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

TEST(Grammar, LiteralsAlternativesAndGroups) {
  auto g = parse_ok(R"(root ::= "yes" | "no" ("!" | "?"))");
  EXPECT_TRUE(sentence(g, "yes"));
  EXPECT_TRUE(sentence(g, "no!"));
  EXPECT_TRUE(sentence(g, "no?"));
  EXPECT_FALSE(sentence(g, "no"));
  EXPECT_FALSE(sentence(g, "yes!"));
  EXPECT_FALSE(sentence(g, "maybe"));
}

TEST(Grammar, CharacterClassesAndAny) {
  auto g = parse_ok("root ::= [a-c0-9] [^x\\n] .");
  EXPECT_TRUE(sentence(g, "a \xE2\x82\xAC"));
  EXPECT_TRUE(sentence(g, "9zz"));
  EXPECT_FALSE(sentence(g, "dzz"));
  EXPECT_FALSE(sentence(g, "axz"));
  EXPECT_FALSE(sentence(g, "a\nz"));
}

TEST(Grammar, Repetitions) {
  auto g = parse_ok(R"(root ::= "a"* "b"+ "c"? d{2,3} e{2} f{1,}
d ::= "d"
e ::= "e"
f ::= "f")");
  EXPECT_TRUE(sentence(g, "bddeef"));
  EXPECT_TRUE(sentence(g, "aaabbbcdddeefff"));
  EXPECT_FALSE(sentence(g, "ddeef"));      // no b
  EXPECT_FALSE(sentence(g, "bdeef"));      // one d
  EXPECT_FALSE(sentence(g, "bddddeef"));   // four d
  EXPECT_FALSE(sentence(g, "bddeeef"));    // three e
  EXPECT_FALSE(sentence(g, "bddee"));      // no f
  EXPECT_FALSE(sentence(g, "bccddeef"));   // two c
}

TEST(Grammar, RulesMayReferEachOtherAcrossLines) {
  auto g = parse_ok(R"(# a comment
root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::=
  [0-9]+ | list)");
  EXPECT_TRUE(sentence(g, "[]"));
  EXPECT_TRUE(sentence(g, "[1,[2,[]],33]"));
  EXPECT_FALSE(sentence(g, "[1,]"));
  EXPECT_FALSE(sentence(g, "[[1]"));
}

TEST(Grammar, EscapesInLiteralsAndClasses) {
  auto g = parse_ok(R"(root ::= "\"\\\n\x41\u00e9" [\]\-])");
  EXPECT_TRUE(sentence(g, "\"\\\nA\xC3\xA9]"));
  EXPECT_TRUE(sentence(g, "\"\\\nA\xC3\xA9-"));
}

TEST(Grammar, ErrorsNameWhatIsWrong) {
  auto undefined = Grammar::parse("root ::= thing");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("'thing'"), std::string::npos);
  auto left = Grammar::parse("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.status().message().find("left-recursive"), std::string::npos);
  auto hidden_left = Grammar::parse("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"");
  ASSERT_FALSE(hidden_left.ok());
  EXPECT_NE(hidden_left.status().message().find("left-recursive"), std::string::npos);
  auto no_root = Grammar::parse("start ::= \"a\"");
  ASSERT_FALSE(no_root.ok());
  EXPECT_NE(no_root.status().message().find("root"), std::string::npos);
  auto unclosed = Grammar::parse("root ::= \"abc");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("line 1"), std::string::npos);
  auto twice = Grammar::parse("root ::= \"a\"\nroot ::= \"b\"");
  ASSERT_FALSE(twice.ok());
  EXPECT_FALSE(Grammar::parse("root ::= \"a\"{3,2}").ok());
  EXPECT_FALSE(Grammar::parse("root ::= \"a\"{99999}").ok());
  EXPECT_FALSE(Grammar::parse("").ok());
  EXPECT_FALSE(Grammar::parse("root ::= [z-a]").ok());
}

TEST(Grammar, CharactersSplitAcrossPieces) {
  auto g = parse_ok("root ::= \"\xC3\xA9t\xC3\xA9\"");  // "été"
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("\xC3"));
  EXPECT_FALSE(m.can_end());
  EXPECT_EQ(m.pending(), "\xC3");
  EXPECT_FALSE(m.allows("\xA8"));  // è, not é
  EXPECT_TRUE(m.accept("\xA9t\xC3"));
  EXPECT_TRUE(m.accept("\xA9"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.can_continue());
  // A lead byte whose characters the grammar cannot reach is refused at once.
  GrammarMatcher fresh(g);
  EXPECT_FALSE(fresh.allows("\xE2"));
  EXPECT_FALSE(fresh.allows("\xFF"));
}

TEST(Grammar, OnlyShortestFormUtf8IsAccepted) {
  // Overlong forms, surrogates and values above U+10FFFF decode to U+FFFD
  // in the output, so a grammar must not read them as the character.
  auto g = parse_ok(R"(root ::= " " [^"]* "x")");
  for (const char* bad : {"\xE0\x80\xA0", "\xF0\x80\x80\xA0", "\xC0\xA0"}) {
    GrammarMatcher m(g);
    EXPECT_FALSE(m.accept(bad)) << "an overlong space";
  }
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept(" "));
  EXPECT_FALSE(m.allows("\xED\xA0"));      // a surrogate's start
  EXPECT_FALSE(m.allows("\xF4\x90"));      // above U+10FFFF
  EXPECT_FALSE(m.allows("\xE0\x9F"));      // only overlong forms follow
  EXPECT_TRUE(m.accept("\xE0\xA0\x80x"));  // U+0800, the first 3-byte one
  EXPECT_TRUE(m.can_end());
}

TEST(Grammar, RefusedBytesLeaveTheStateAlone) {
  auto g = parse_ok(R"(root ::= "ab" "c"*)");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("x"));
  EXPECT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.can_continue());
  EXPECT_TRUE(m.accept("ccc"));
  EXPECT_TRUE(m.can_end());
}

TEST(Grammar, AmbiguityStaysBounded) {
  // Every split of a run of a's is a parse; the matcher must not blow up.
  auto g = parse_ok(R"(root ::= ("a" | "aa" | "aaa")*)");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept(std::string(2000, 'a')));
  EXPECT_TRUE(m.can_end());
  EXPECT_LE(m.stacks().size(), 8u);
}

// What a client can send: none of these may end the process (the parser
// and the matcher recurse on nothing a grammar's size decides) or take
// time beyond linear in the text.
TEST(Grammar, TwentyThousandNestedGroupsAreRefusedByTheLimit) {
  const std::string deep = "root ::= " + std::string(20'000, '(') + "\"a\"" + std::string(20'000, ')');
  auto g = Grammar::parse(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("groups nested at most 256 deep"), std::string::npos) << g.status().message();
  const std::string inside = "root ::= " + std::string(256, '(') + "\"a\"" + std::string(256, ')');
  auto ok = parse_ok(inside);
  EXPECT_TRUE(sentence(ok, "a"));
}

TEST(Grammar, RepetitionsAreBoundedInAll) {
  // Each {10000} is written out; a hundred of them pass a small budget.
  std::string text = "root ::=";
  for (int i = 0; i < 100; ++i) text += " [a-z]{0,10000}";
  auto g = Grammar::parse(text, "root", {.max_nesting = 256, .max_elements = 100'000});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("at most 100000 elements"), std::string::npos) << g.status().message();
  EXPECT_TRUE(Grammar::parse("root ::= [a-z]{0,10000}", "root", {.max_nesting = 256, .max_elements = 100'000}).ok());
}

// r0 ::= r1 "x", r1 ::= r2 "x", ...: a chain as long as the grammar. Its
// left-recursion check and its first expansion once recursed once per rule.
TEST(Grammar, LongChainsOfRulesNeitherRecurseNorLoop) {
  const int n = 100'000;
  std::string text;
  for (int i = 0; i < n; ++i) text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  text += "r" + std::to_string(n) + " ::= \"a\"\n";
  auto chain = Grammar::parse(text, "r0");
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  // Deeper than the matcher follows: no way on, and no crash.
  GrammarMatcher m(*chain);
  EXPECT_FALSE(m.accept("a"));

  // The same chain closed into a cycle at its far end is left-recursive.
  std::string cycle = text.substr(0, text.rfind("r" + std::to_string(n) + " ::="));
  cycle += "r" + std::to_string(n) + " ::= r0\n";
  auto looped = Grammar::parse(cycle, "r0");
  ASSERT_FALSE(looped.ok());
  EXPECT_NE(looped.status().message().find("left-recursive"), std::string::npos);

  // A chain the matcher does follow: 1,000 rules deep.
  std::string shallow;
  for (int i = 0; i < 1000; ++i) shallow += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  shallow += "r1000 ::= \"a\"\n";
  auto g = Grammar::parse(shallow, "r0");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(sentence(*g, "a" + std::string(1000, 'x')));
}

}  // namespace
}  // namespace revis
