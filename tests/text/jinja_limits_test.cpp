// The render limits of the Jinja engine (jinja_limits.h): hostile templates and variables end
// with an InputError naming the limit, never a stack overflow, a hang or unbounded memory.
#include "handoff/text/jinja_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "handoff/error.h"
#include "handoff/text/jinja.h"

namespace handoff::text {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& source,
                   const ordered_json& context = ordered_json::object()) {
  return JinjaTemplate(source).render(context);
}

// The message of the InputError `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string render_error(const std::string& source,
                         const ordered_json& context = ordered_json::object()) {
  return error_of([&] { render(source, context); });
}

// {"x": [[[...]]]} with the list nested `depth` deep (nlohmann parses without recursion).
ordered_json nested_x(int depth) {
  return ordered_json::parse("{\"x\": " + std::string(depth, '[') + std::string(depth, ']') + "}");
}

TEST(JinjaLimits, DeepVariablesAreRefusedNotOverflowed) {
  // 20,000 levels took the server down through Value::from_json's recursion.
  EXPECT_NE(render_error("{{ x }}", nested_x(20000)).find("nesting deeper than 128"),
            std::string::npos);
  // Within the limit the value still renders.
  EXPECT_EQ(render("{{ x | length }}", nested_x(jinja::kMaxNesting)), "1");
}

TEST(JinjaLimits, LoopIterationsAreBounded) {
  const std::string msg = render_error(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(2) %}{% endfor %}"
      "{% endfor %}{% endfor %}");
  EXPECT_NE(msg.find("iterations"), std::string::npos) << msg;
  // range() itself is bounded before it builds a list of billions.
  EXPECT_NE(render_error("{{ range(9000000000000) | length }}").find("range()"), std::string::npos);
  EXPECT_EQ(render("{% for i in range(3) %}{{ i }}{% endfor %}"), "012");
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  EXPECT_NE(render_error("{{ 'x' * 9000000000000 }}").find("longer than"), std::string::npos);
  // Output grown piece by piece ends at the limit too.
  const std::string msg =
      render_error("{% for i in range(100) %}{{ 'abcdefgh' * 1048576 }}{% endfor %}");
  EXPECT_NE(msg.find("output longer than 67108864 bytes"), std::string::npos) << msg;
  // A list sharing one sub-list 2^40 times is small in memory but huge in print.
  EXPECT_NE(render_error("{% set ns = namespace(x=[1]) %}{% for i in range(40) %}"
                         "{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x | tojson }}")
                .find("longer than"),
            std::string::npos);
  EXPECT_EQ(render("{{ '' * 9000000000000 }}|{{ 'ab' * 3 }}"), "|ababab");
}

TEST(JinjaLimits, RecursiveMacroEndsWithAnError) {
  const std::string msg = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("recursive macro"), std::string::npos) << msg;
}

TEST(JinjaLimits, DeepTemplateExpressionsAreParseErrors) {
  const auto parse_error = [](const std::string& source) {
    return error_of([&] { JinjaTemplate t(source); });
  };
  EXPECT_NE(parse_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}")
                .find("nesting deeper than 128"),
            std::string::npos);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_NE(parse_error(sum + " }}").find("nesting deeper than 128"), std::string::npos);
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_NE(parse_error(attrs + " }}").find("nesting deeper than 128"), std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_NE(parse_error(nots + "1 }}").find("nesting deeper than 128"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
  EXPECT_NE(parse_error(ifs).find("nesting deeper than 128"), std::string::npos);
  std::string elifs = "{% if false %}";
  for (int i = 0; i < 100000; ++i) elifs += "{% elif false %}";
  EXPECT_NE(parse_error(elifs + "{% endif %}").find("nesting deeper than 128"), std::string::npos);
  EXPECT_EQ(render("{{ ((((1)))) + 1 + 1 }}"), "3");
}

TEST(JinjaLimits, DeepValuesBuiltByTheTemplateAreReleasedAndRefused) {
  // A chain of 200,000 lists linked by append: printing it is refused, and freeing it at the
  // end of the render must not recurse per level.
  const std::string chain =
      "{% set ns = namespace(head=[], tail=[]) %}{% set ns.tail = ns.head %}"
      "{% for i in range(200000) %}{% set next = [] %}{{ ns.tail.append(next) or '' }}"
      "{% set ns.tail = next %}{% endfor %}";
  EXPECT_EQ(render(chain + "done"), "done");
  EXPECT_NE(render_error(chain + "{{ ns.head }}").find("nesting deeper than 128"),
            std::string::npos);
  EXPECT_NE(render_error(chain + "{{ ns.head == [ns.head] }}").find("nesting deeper"),
            std::string::npos);
}

TEST(JinjaLimits, CyclesAndStoredFunctionsAreRefused) {
  EXPECT_NE(render_error("{% set x = [] %}{{ x.append(x) }}").find("inside itself"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns.me = ns %}").find("inside itself"),
            std::string::npos);
  // A bound method inside its own list would be a cycle through the function; a macro inside
  // a namespace would outlive the loop scope it captured.
  EXPECT_NE(render_error("{% set x = [] %}{{ x.append([x.append]) }}").find("function"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}x"
                         "{% endmacro %}{% set ns.f = m %}{% endfor %}{{ ns.f() }}")
                .find("function"),
            std::string::npos);
  EXPECT_EQ(render("{% set x = [] %}{{ x.append([1]) or x }}"), "[[1]]");
}

TEST(JinjaLimits, BadOperandsAreInputErrors) {
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ -(-9223372036854775807 - 1) }}").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_NE(render_error("{{ range('a') }}").find("expected an integer but got a string"),
            std::string::npos);
  EXPECT_NE(render_error("{{ [1] | selectattr }}").find("needs 1 argument"), std::string::npos);
  EXPECT_NE(render_error("{{ (1.5 * 9223372036854775807) | int }}").find("does not fit"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 1 | tojson(indent=100000000) }}").find("indent"), std::string::npos);
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % 3 }}|{{ [1,2,3][::9223372036854775807] }}"),
            "1|[1]");
}

}  // namespace
}  // namespace handoff::text
