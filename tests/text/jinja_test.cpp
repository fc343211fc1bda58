// Unit tests of the Jinja subset used by chat templates.
#include "handoff/text/jinja.h"

#include <gtest/gtest.h>

#include "handoff/error.h"

namespace handoff::text {
namespace {

std::string render(const std::string& source,
                   const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  return JinjaTemplate(source).render(context);
}

TEST(JinjaTemplate, OutputsAndWhitespaceControl) {
  EXPECT_EQ(render("a {{ 1 + 2 }} b"), "a 3 b");
  EXPECT_EQ(render("a   {{- 'x' -}}   b"), "axb");
  EXPECT_EQ(render("{# comment #}x"), "x");
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\n"), "  yes\n");
}

TEST(JinjaTemplate, LoopsAndConditions) {
  nlohmann::ordered_json ctx = {{"xs", {1, 2, 3}}};
  EXPECT_EQ(
      render(
          "{% for x in xs %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
          ctx),
      "1:1,2:2,3:3");
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ loop.length }}{% endfor %}", ctx), "22");
  EXPECT_EQ(render("{% if 1 > 2 %}a{% elif 2 > 1 %}b{% else %}c{% endif %}"), "b");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"a", 1}, {"b", 2}}}}),
            "a=1;b=2;");
}

TEST(JinjaTemplate, NamespaceSetAndScopes) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% "
                   "endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
}

TEST(JinjaTemplate, ExpressionsFiltersAndMethods) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ -7 // 2 }}"), "3 1 3.5 -4");
  EXPECT_EQ(render("{{ 'ab' ~ 1 }} {{ 'x' * 3 }}"), "ab1 xxx");
  EXPECT_EQ(render("{{ '  hi  ' | trim }}|{{ 'Hi' | upper }}|{{ [1,2] | length }}"), "hi|HI|2");
  EXPECT_EQ(render("{{ 'abcdef'[1:3] }} {{ [1,2,3][-1] }} {{ [1,2,3][::-1] | join(',') }}"),
            "bc 3 3,2,1");
  EXPECT_EQ(render("{{ 'a<b'.startswith('a') }} {{ 'x.y.z'.split('.') | last }}"), "True z");
  EXPECT_EQ(render("{{ u | default('none') }} {{ 'b' in 'abc' }} {{ 3 not in [1,2] }}"),
            "none True True");
  EXPECT_EQ(render("{{ x is defined }} {{ none is none }} {{ 's' is string }}"), "False True True");
  EXPECT_EQ(render("{{ {'a': [1, 'x']} | tojson }}"), "{\"a\": [1, \"x\"]}");
  EXPECT_EQ(render("{{ 'a' if false else 'b' }}"), "b");
  EXPECT_EQ(render("{{ 'x'.replace('x', 'y') }} {{ ' a '.strip() }}"), "y a");
}

TEST(JinjaTemplate, MacrosAndErrors) {
  EXPECT_EQ(render("{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('Bob') "
                   "}}/{{ greet('Al', p='Yo') }}"),
            "Hi Bob/Yo Al");
  try {
    render("{{ raise_exception('bad role') }}");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "bad role");
  }
  EXPECT_THROW(JinjaTemplate("{% if x %}"), InputError);
  EXPECT_THROW(JinjaTemplate("{{ 'unterminated }}"), InputError);
}

}  // namespace
}  // namespace handoff::text
