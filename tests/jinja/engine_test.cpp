// The Jinja engine on its own: jinja2's semantics that chat templates lean
// on (scoping, macros, loop variables, Python's printing and operators,
// whitespace control, filters and tests), and the limits that keep a hostile
// template from crashing or hanging the process. The expected texts are what
// Python's jinja2 3.1 renders with Hugging Face's settings.
#include <gtest/gtest.h>

#include <string>

#include "jinja/chat_template.h"

namespace revis::jinja {
namespace {

struct Case {
  const char* source;
  const char* expected;
};

ChatTemplateInput sample_input() {
  ChatTemplateInput in;
  in.add_generation_prompt = false;
  in.now = "2024-07-26T09:30:00";
  in.extra["msgs"] = nlohmann::ordered_json::parse(R"([{"r": "u", "c": "hi"}, {"r": "a", "c": "yo"}, {"r": "u", "c": "ok"}])");
  return in;
}

Result<std::string> render(const std::string& source, const Limits& limits = {}) {
  return render_chat_template(source, sample_input(), limits);
}

TEST(JinjaSemantics, MatchesJinja2) {
  const Case cases[] = {
      {R"J({% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }})J",
       R"J(01020)J"},
      {R"J({% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})J",
       R"J(10)J"},
      {R"J({% macro m(a, b="B") %}[{{ a }}{{ b }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, 3, k=4) }})J",
       R"J([1B(){}][12(3,){'k': 4}])J"},
      {R"J({% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %})J",
       R"J(<in>)J"},
      {R"J({{ [1, "a", none, true, 1.5, {"k": "v'"}] }}|{{ (1,) }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 10 / 4 }}|{{ 2 ** 10 }})J",
       R"J([1, 'a', None, True, 1.5, {'k': "v'"}]|(1,)|1e+20|0.30000000000000004|3|2|2.5|1024)J"},
      {R"J({{ "héllo"[1:3] }}|{{ [1,2,3][::-1] }}|{{ "abc"[-1] }}|{{ "héllo"|length }})J",
       R"J(él|[3, 2, 1]|c|5)J"},
      {R"J({{ {"b": 1, "a": [1, 2.0, "é\n"]}|tojson }}|{{ {"b": 1, "a": []}|tojson(indent=2) }})J",
       R"J({"b": 1, "a": [1, 2.0, "é\n"]}|{
  "b": 1,
  "a": []
})J"},
      {R"J({% for k, v in {"b": 1, "A": 2}|dictsort %}{{ k }}={{ v }};{% endfor %}{{ ["b", "A", "c"]|sort }})J",
       R"J(A=2;b=1;['A', 'b', 'c'])J"},
      {R"J({% for m in msgs %}{{ loop.index }}/{{ loop.length }}{{ "F" if loop.first }}{{ "L" if loop.last }}{{ loop.previtem.r if not loop.first }}{% endfor %})J",
       R"J(1/3F2/3u3/3La)J"},
      {R"J({{ msgs|selectattr("r", "equalto", "u")|map(attribute="c")|join(",") }}|{{ msgs|rejectattr("r", "equalto", "u")|list|length }})J",
       R"J(hi,ok|1)J"},
      {R"J(  {%- if true %}
  x
  {% endif %}
  {# c #}
y {{- " z " -}} w
{% raw %}{{ r }}{% endraw %})J",
       R"J(  x
y z w
{{ r }})J"},
      {R"J({{ "a,b,,c".split(",") }}|{{ "  a  b ".split() }}|{{ " x ".strip() }}|{{ "abc".startswith(("x", "a")) }}|{{ "{}-{x}".format(1, x=2) }})J",
       R"J(['a', 'b', '', 'c']|['a', 'b']|x|True|1-2)J"},
      {R"J({{ x is defined }}{{ none is none }}{{ "s" is string }}{{ {} is mapping }}{{ 3 is odd }}{{ [] is iterable }}{{ x|default("d") }}{{ ""|default("e", true) }})J",
       R"J(FalseTrueTrueTrueTrueTruede)J"},
      {R"J({{ "<a>"|safe + "<b>" }}|{{ "x" ~ none ~ 1 }}|{{ "a" in "cat" }}|{{ 2 in [1, 2] }}|{{ 1 == 1.0 }}|{{ "Hello World"|lower|title }})J",
       R"J(<a>&lt;b&gt;|xNone1|True|True|True|Hello World)J"},
      {R"J({% for i in range(10) %}{% if i == 3 %}{% continue %}{% endif %}{% if i == 6 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %})J",
       R"J(01245|empty)J"},
      {R"J({% set t %}  body  {% endset %}[{{ t }}]{% filter upper %}up{% endfilter %}{{ "a
b"|indent(2, first=true) }})J",
       R"J([  body  ]UP  a
  b)J"},
      {R"J({{ 1.0 }}|{{ 100.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ -0.0 }}|{{ 3.14159 }}|{{ 1/3 }})J",
       R"J(1.0|100.0|1e+16|1000000000000000.0|0.0001|1e-05|-0.0|3.14159|0.3333333333333333)J"},
      {R"J({{ "it's" }}|{{ ["it's", 'say "hi"', "both ' \""] }}|{{ ["\n\t\\", "é", "\x00", "\u200b"] }})J",
       R"J(it's|["it's", 'say "hi"', 'both \' "']|['\n\t\\', 'é', '\x00', '\u200b'])J"},
      {R"J({{ {"a": {"b": [1, {"c": none}]}}|tojson(indent=4) }})J",
       R"J({
    "a": {
        "b": [
            1,
            {
                "c": null
            }
        ]
    }
})J"},
      {R"J({{ "x"|tojson }}|{{ 1.5|tojson }}|{{ true|tojson }}|{{ none|tojson }}|{{ [1, "a\u0001\u007f"]|tojson }})J",
       R"J("x"|1.5|true|null|[1, "a\u0001"])J"},
      {R"J({{ msgs|map(attribute="r")|unique|list }}|{{ msgs|first }}|{{ msgs|last }}|{{ (msgs|map(attribute="c")|list)[1:] }})J",
       R"J(['u', 'a']|{'r': 'u', 'c': 'hi'}|{'r': 'u', 'c': 'ok'}|['yo', 'ok'])J"},
      {R"J({{ "Hello"|replace("l", "L") }}|{{ "a-b c(d"|title }}|{{ "hELLO wORLD"|capitalize }}|{{ "  x  "|trim }}|{{ "xxaxx"|trim("x") }})J",
       R"J(HeLLo|A-B C(D|Hello world|x|a)J"},
      {R"J({{ [3, 1, 2]|sort(reverse=true) }}|{{ msgs|sort(attribute="c")|map(attribute="c")|join }}|{{ [1, 2, 3]|sum }}|{{ [1,5,2]|max }})J",
       R"J([3, 2, 1]|hiokyo|6|5)J"},
      {R"J({{ "%s" }}|{{ 5 is divisibleby 5 }}|{{ 2 is even }}|{{ none is defined }}|{{ 1 is number }}|{{ true is number }}|{{ true is integer }})J",
       R"J(%s|True|True|True|True|True|False)J"},
      {R"J({{ "a b  c".split(" ") }}|{{ "a b c".split(" ", 1) }}|{{ "a b c".rsplit(" ", 1) }}|{{ "abc".find("c") }}|{{ "aXbXc".count("X") }})J",
       R"J(['a', 'b', '', 'c']|['a', 'b c']|['a b', 'c']|2|2)J"},
      {R"J({{ "<x>"|e }}|{{ ("<x>"|safe).strip() + "<" }}|{{ "a" ~ "<b>"|safe }}|{{ ["a", "b"]|join("<") }})J",
       R"J(&lt;x&gt;|<x>&lt;|a<b>|a<b)J"},
      {R"J({{ "text\nmore\n\nend"|indent(4) }}|{{ "text\nmore"|indent(4, true, true) }}|{{ "x"|center(7) }}|)J",
       R"J(text
    more

    end|    text
    more|   x   |)J"},
      {R"J({{ "5"|int + 1 }}|{{ "3.7"|int }}|{{ "abc"|int(7) }}|{{ "2.5"|float }}|{{ 3.7|int }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ 2.5|round }})J",
       R"J(6|3|7|2.5|3|3|2.57|2.0)J"},
      {R"J({{ (1, 2) + (3,) }}|{{ [1] * 3 }}|{{ "ab" * 2 }}|{{ -7 // 2 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 2 ** 0.5 }}|{{ 2 ** -1 }})J",
       R"J((1, 2, 3)|[1, 1, 1]|abab|-4|3.0|0.5|1.4142135623730951|0.5)J"},
      {R"J({% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}|{% for x in "héé" %}{{ loop.revindex }}{{ x }}{% endfor %}|{% for k in {"a": 1, "b": 2} %}{{ k }}{% endfor %})J",
       R"J(1234|3h2é1é|ab)J"},
      {R"J({% for m in msgs if m.r == "u" %}{{ loop.index }}{{ m.c }}{{ loop.length }}{% endfor %}|{% for i in [1,2,3] %}{{ loop.cycle("a", "b") }}{{ loop.nextitem }}{% endfor %})J",
       R"J(1hi22ok2|a2b3a)J"},
      {R"J({{ msgs[0].get("c") }}|{{ msgs[0].get("zz", "d") }}|{{ msgs[0].items()|list }}|{{ msgs[0].keys()|list }}|{{ msgs[0]|length }}|{{ msgs[0]["r"] }})J",
       R"J(hi|d|[('r', 'u'), ('c', 'hi')]|['r', 'c']|2|u)J"},
      {R"J({{ "abc" if false }}|{{ none }}|{{ [] }}|{{ {} }}|{{ () }}|{{ "a" < "b" }}|{{ [1, 2] < [1, 3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }})J",
       R"J(|None|[]|{}|()|True|True|True|False)J"},
      {R"J({{ "ß".upper() }}|{{ "Ünïcödé"|lower }}|{{ "héllo wörld".title() }}|{{ "abc".upper() }})J",
       R"J(SS|ünïcödé|Héllo Wörld|ABC)J"},
      {R"J({%- set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = (1, 2) %}{{ t[0] }}{{ t|length }}|{{ "{0}{1}{0}".format("a", "b") }}|{{ "{{x}}".format() }})J",
       R"J(12|12|aba|{x})J"},
      {R"J({%+ if true %}plus{% endif %})J",
       R"J(plus)J"},
      {R"J({{ "ß".upper() }}|{{ "Ünïcödé"|lower }}|{{ "héllo wörld".title() }}|{{ "ЖЁЛТЫЙ"|lower }}|{{ "ωmega"|capitalize }}|{{ "ÿ"|upper }})J",
       R"J(SS|ünïcödé|Héllo Wörld|жёлтый|Ωmega|Ÿ)J"},
      {R"J(   {% if true %}
   indented
   {% endif %}
{%+ if true %}plus{% endif %}
    {{ "var" }}
  {# comment #}
tail
)J",
       R"J(   indented
plus    var
tail)J"}
  };
  for (const Case& c : cases) {
    auto out = render(c.source);
    ASSERT_TRUE(out.ok()) << c.source << "\n" << out.status().message();
    EXPECT_EQ(*out, c.expected) << c.source;
  }
}

TEST(JinjaSemantics, StrftimeNowFormatsTheGivenTime) {
  auto out = render(R"({{ strftime_now("%d %b %Y") }}|{{ strftime_now("%B %d, %Y %A %H:%M") }})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "26 Jul 2024|July 26, 2024 Friday 09:30");
}

TEST(JinjaSemantics, RaiseExceptionFailsWithItsMessage) {
  auto out = render(R"(before{{ raise_exception("Only user and assistant roles are supported!") }})");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "Only user and assistant roles are supported!");
}

TEST(JinjaSemantics, ErrorsWhereJinja2Errors) {
  for (const char* source : {"{{ x.y }}", "{{ x + 1 }}", "{{ 1 + 'a' }}", "{{ [].append(1) }}", "{{ 1 // 0 }}",
                             "{{ 'a' | no_such_filter }}", "{{ 1 is no_such_test }}", "{% for %}", "{{ (1 }}",
                             "{% include 'x' %}", "{% if 1 %}"}) {
    auto out = render(source);
    EXPECT_FALSE(out.ok()) << source << " rendered " << *out;
    if (!out.ok()) {
      EXPECT_FALSE(out.status().message().empty());
    }
  }
}

// --- hostile templates ------------------------------------------------------

void expect_refused(const std::string& source, const std::string& why, const Limits& limits = {}) {
  auto out = render(source, limits);
  ASSERT_FALSE(out.ok()) << source.substr(0, 80);
  EXPECT_NE(out.status().message().find(why), std::string::npos) << out.status().message();
}

TEST(JinjaLimits, DeepExpressionNestingIsRefused) {
  expect_refused("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", "nested deeper");
  expect_refused("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}", "nested deeper");
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  expect_refused(nots + "1 }}", "nested deeper");
  // Chains grow the tree in a loop, not by recursion; they are bounded too.
  std::string filters = "{{ x", sums = "{{ 1", attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) filters += "|trim", sums += " + 1", attrs += ".a";
  expect_refused(filters + " }}", "nested deeper");
  expect_refused(sums + " }}", "nested deeper");
  expect_refused(attrs + " }}", "nested deeper");
}

TEST(JinjaLimits, DeepBlockNestingIsRefused) {
  std::string source;
  for (int i = 0; i < 50000; ++i) source += "{% if true %}";
  for (int i = 0; i < 50000; ++i) source += "{% endif %}";
  expect_refused(source, "nested deeper");
}

TEST(JinjaLimits, RecursiveMacroIsRefused) {
  expect_refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nesting deeper");
}

TEST(JinjaLimits, HugeLoopsStopAtTheStepLimit) {
  Limits limits;
  limits.max_steps = 100000;
  expect_refused("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps", limits);
  expect_refused("{{ range(100000000000) | length }}", "list of over");
}

TEST(JinjaLimits, ExplodingStringsAreRefused) {
  Limits limits;
  limits.max_string = 1 << 20;
  expect_refused("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 "string of over", limits);
  expect_refused("{{ 'x' * 100000000000 }}", "string of over", limits);
  expect_refused("{% for i in range(1000000) %}0123456789{% endfor %}", "string of over", limits);
}

TEST(JinjaLimits, BigWorkPerStepStopsAtTheClock) {
  // Few steps, each over a large string: the step limit alone would allow
  // minutes of work.
  Limits limits;
  limits.max_milliseconds = 200;
  expect_refused("{% set s = 'ab' * 4000000 %}{% for i in range(1000000) %}{% set t = s[1:] %}{% endfor %}", "ms",
                 limits);
}

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  expect_refused("{{ 9223372036854775807 + 1 }}", "overflow");
  expect_refused("{{ 2 ** 200 }}", "overflow");
}

}  // namespace
}  // namespace revis::jinja
