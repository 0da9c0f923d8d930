// Unit tests of the Jinja interpreter, one construct at a time. Expected strings are
// what Jinja 3 prints with trim_blocks and lstrip_blocks on (Hugging Face's settings).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/chat/jinja_json.h"
#include "core/chat/jinja_template.h"
#include "base/error.h"

namespace tsr::jinja {
namespace {

using nlohmann::ordered_json;

std::string render(std::string_view source, const ordered_json& vars = ordered_json::object(),
                   const LexOptions& options = {}) {
  return Template(source, options).render(from_json(vars).as_dict());
}

// The message of the tsr::Error that rendering throws, or "" when it does not throw.
std::string error_of(std::string_view source, const ordered_json& vars = ordered_json::object()) {
  try {
    render(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Jinja, PrintsValuesLikePython) {
  EXPECT_EQ(render("{{ 1 }} {{ 1.5 }} {{ 2.0 }} {{ 'a' }} {{ true }} {{ none }} {{ undefined_name }}|"),
            "1 1.5 2.0 a True None |");
  EXPECT_EQ(render("{{ [1, 'a', \"it's\"] }} {{ {'k': [none, false]} }}"), "[1, 'a', \"it's\"] {'k': [None, False]}");
  EXPECT_EQ(render("{{ 1e20 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }}"),
            "1e+20 0.0001 1e-05 0.3333333333333333");
  EXPECT_EQ(render(R"({{ 'a\tb\n' ~ "\u00e9" ~ 'c' 'd' }})"), "a\tb\nécd");
}

TEST(Jinja, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }},{{ (1 + 2) * 3 }},{{ 7 // 2 }},{{ -7 // 2 }},{{ 7 % 3 }},{{ -7 % 3 }},"
                   "{{ 2 ** 10 }},{{ 7 / 2 }},{{ 1 + 0.5 }},{{ -(3) }},{{ 10 - 4 - 3 }}"),
            "7,9,3,-4,1,2,1024,3.5,1.5,-3,3");
  EXPECT_EQ(render("{{ 'a' + 'b' }},{{ 'a' ~ 1 ~ none }},{{ 'ab' * 2 }},{{ [1] + [2] }}"), "ab,a1None,abab,[1, 2]");
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand types for +: 'str' and 'int'"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
}

TEST(Jinja, ComparisonAndLogic) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }},{{ 3 > 2 > 2 }},{{ 1 == 1.0 }},{{ 'a' != 'b' }},{{ 2 >= 2 }},{{ 'a' < 'b' }}"),
            "True,False,True,True,True,True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }},{{ 3 not in [1, 2] }},{{ 'k' in {'k': 1} }},{{ not true }},"
                   "{{ 0 or 'x' }},{{ 1 and 0 }},{{ not 1 == 2 }}"),
            "True,True,True,False,x,0,True");
}

TEST(Jinja, AttributeItemAndSlice) {
  ordered_json vars = {{"m", {{"role", "user"}}}, {"l", {1, 2, 3, 4}}};
  EXPECT_EQ(render("{{ m.role }}{{ m['role'] }}{{ l[0] }}{{ l[-1] }}{{ l.1 }}|{{ l[1:3] }}{{ l[::-1] }}{{ l[:-1] }}"
                   "{{ l[5:] }}|{{ 'héllo'[1:] }}{{ 'abc'[-1] }}|{{ m.missing is defined }}{{ l[9] is defined }}",
                   vars),
            "useruser142|[2, 3][4, 3, 2, 1][1, 2, 3][]|élloc|FalseFalse");
}

TEST(Jinja, ConditionalExpression) {
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}|{{ 'y' if not x }}|{{ 'a' if x else 'b' if y else 'c' }}",
                   {{"x", false}, {"y", true}}),
            "n|y|b");
}

TEST(Jinja, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
                   "{{ 1.5 is number }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}"
                   "{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}"
                   "{{ 6 is divisibleby 3 }}{{ 6 is divisibleby(4) == false }}{{ 1 is not string }}"
                   "{{ 'ab' is lower }}{{ x is eq 1 }}{{ x is sameas 1 }}",
                   {{"x", 1}}),
            repeat("True", 20));
  EXPECT_EQ(render("{{ not x is defined }}{{ 'a' is number }}{{ none is string }}{{ 1 is boolean }}"), "TrueFalseFalseFalse");
}

TEST(Jinja, StringMethods) {
  EXPECT_EQ(render("{{ '  a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b'.split(',') }}|"
                   "{{ ' a b  c '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}"
                   "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Ab'.lower() }}{{ 'Ab'.upper() }}|{{ 'hello wORLD'.title() }}|"
                   "{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.find('c') }}|{{ '-'.join(['x', 'y']) }}"),
            "a b|axx|xxa|['a', 'b']|['a', 'b', 'c']|['a', 'b c']|TrueTrue|abAB|Hello World|bba|2|x-y");
}

TEST(Jinja, DictMethods) {
  ordered_json vars = {{"d", {{"a", 1}, {"b", 2}}}};
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() }}{{ d.values() }}"
                   "{{ d.get('a') }}{{ d.get('z', 9) }}{{ d.get('z') }}",
                   vars),
            "a=1;b=2;['a', 'b'][1, 2]19None");
}

TEST(Jinja, StringFilters) {
  EXPECT_EQ(render("{{ '  x '|trim }}|{{ 'a'|upper }}{{ 'B'|lower }}|{{ 'a-b'|replace('-', '+') }}|{{ 'hELLO'|capitalize }}"
                   "{{ 'a b'|title }}|{{ '<b>'|safe }}{{ '<&>'|escape }}{{ '\"'|e }}|{{ 1|string }}{{ 'xax'|trim('x') }}"),
            "x|Ab|a+b|HelloA B|<b>&lt;&amp;&gt;&#34;|1a");
}

TEST(Jinja, SequenceFilters) {
  EXPECT_EQ(render("{{ [1, 2, 3]|length }}{{ 'héllo'|length }}{{ [1, 2]|count }}{{ {'a': 1}|length }}{{ nothing|length }}|"
                   "{{ [1, 2]|first }}{{ [1, 2]|last }}{{ 'ab'|first }}|{{ [1, 2]|join('-') }}{{ ['a', 'b']|join }}|"
                   "{{ 'ab'|list }}|{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(reverse=true) }}|{{ [1, 2]|reverse|list }}|"
                   "{{ [1, 2, 3]|sum }}{{ [3, 1]|min }}{{ [3, 1]|max }}|{{ [3, 1, 3, 'A', 'a']|unique|list }}"),
            "35210|12a|1-2ab|['a', 'b']|[1, 2, 3][3, 2, 1]|[2, 1]|613|[3, 1, 'A']");
}

TEST(Jinja, ConversionFilters) {
  EXPECT_EQ(render("{{ '42'|int + 1 }} {{ '1.5'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '1.5'|float }} "
                   "{{ 2|float }} {{ 'x'|float }}"),
            "43 1 0 7 3 1.5 2.0 0.0");
  EXPECT_EQ(render("{{ x|default('d') }}{{ x|d('e') }}{{ ''|default('f', true) }}{{ ''|default('g') }}{{ none|d('h') }}"),
            "defNone");
}

TEST(Jinja, NumberFilters) {
  EXPECT_EQ(render("{{ 2.5|round }} {{ 3.5|round }} {{ 3.14159|round(2) }} {{ 2.1|round(0, 'ceil') }} "
                   "{{ 2.9|round(method='floor') }} {{ -3|abs }} {{ -2.5|abs }}"),
            "2.0 4.0 3.14 3.0 2.0 3 2.5");
}

TEST(Jinja, MapSelectAndAttributeFilters) {
  ordered_json vars = {{"users", {{{"name", "a"}, {"age", 3}}, {{"name", "b"}, {"age", 1}}, {{"name", "c"}}}}};
  EXPECT_EQ(render("{{ users|map(attribute='name')|join(',') }}|{{ ['a', 'b']|map('upper')|list }}|"
                   "{{ users|map(attribute='age', default=0)|list }}|"
                   "{{ users|selectattr('age', 'defined')|selectattr('age', 'gt', 2)|map(attribute='name')|list }}|"
                   "{{ users|selectattr('age', 'defined')|map(attribute='name')|list }}|"
                   "{{ users|rejectattr('age')|map(attribute='name')|list }}|"
                   "{{ [1, 2, 3, 4]|select('even')|list }}{{ [1, 0, 2]|select|list }}{{ [1, 2, 3]|reject('odd')|list }}|"
                   "{{ ['x', 'code', 'y']|reject('equalto', 'code')|join(', ') }}",
                   vars),
            "a,b,c|['A', 'B']|[3, 1, 0]|['a']|['a', 'b']|['c']|[2, 4][1, 2][2]|x, y");
}

TEST(Jinja, MappingFilters) {
  ordered_json vars = {{"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(render("{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|"
                   "{% for k, v in d|dictsort(by='value', reverse=true) %}{{ k }}{% endfor %}|{{ d|list }}",
                   vars),
            "a2b1|b1a2|ab|['b', 'a']");
}

TEST(Jinja, ToJson) {
  EXPECT_EQ(render(R"({{ {'a': [1, 2.5, 'x"y\n'], 'b': none, 'c': true, 'é': {} }|tojson }})"),
            R"({"a": [1, 2.5, "x\"y\n"], "b": null, "c": true, "é": {}})");
  EXPECT_EQ(render("{{ {'a': [1], 'b': {}, 'c': []}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {},\n  \"c\": []\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
}

TEST(Jinja, IndentFilter) {
  EXPECT_EQ(render(R"({{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent('> ', blank=true) }})"),
            "a\n  b\n\n  c|  a\n  b|a\n> \n> b");
}

TEST(Jinja, IfElifElse) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}{% endfor %}"),
            "onetwomany");
}

TEST(Jinja, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}"),
            "10TrueFalse332;21FalseFalse321;32FalseTrue310;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}{{ loop.nextitem|default('-') }} {% endfor %}"),
            "-2 13 2- ");
  EXPECT_EQ(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"),
            "ab37");
}

TEST(Jinja, ForElseAndFilter) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}"
                   "{{ x }}{{ loop.length }}{% endfor %}|{% for x in nothing %}x{% else %}none{% endfor %}"),
            "empty|2242|none");
}

TEST(Jinja, BreakAndContinue) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}"),
            "023");
}

TEST(Jinja, SetAndScoping) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "12121");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set messages = messages[1:] %}{{ messages|length }}",
                   {{"messages", {1, 2, 3}}}),
            "122");
  EXPECT_EQ(render("{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]"), "[a2b]");
}

TEST(Jinja, Namespace) {
  EXPECT_EQ(render("{% set ns = namespace(found=false, n=0, items=[]) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.n = ns.n + i %}{% set ns.items = ns.items + [i * 2] %}"
                   "{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }}{{ ns.items }}"),
            "True6[2, 4, 6]");
  EXPECT_NE(error_of("{% set d = {} %}{% set d.x = 1 %}").find("non-namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.self = [ns] %}").find("inside itself"), std::string::npos);
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='X', punct='.') }} {{ greet() }}"),
            "Hi Bob! Hi Al? Hi X. Hi !");
  EXPECT_EQ(render("{% set sep = '/' %}{% macro path(a, b) %}{{ a }}{{ sep }}{{ b }}{% endmacro %}{{ path(1, 2) }}"), "1/2");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}"
                   "{{ fact(5) }}"),
            "120");
  EXPECT_NE(error_of("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").find("at most 1"), std::string::npos);
  EXPECT_NE(error_of("{% macro f(a) %}{% endmacro %}{{ f(b=1) }}").find("no parameter 'b'"), std::string::npos);
}

TEST(Jinja, RawAndComments) {
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% if %}{% endraw %}!"), "{{ not evaluated }}{% if %}!");
  EXPECT_EQ(render("a{# comment {{ x }} #}b{#- trimmed -#}  c"), "abc");
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a\n  {%- if true %}x{% endif %}"), "ax");
  EXPECT_EQ(render("{% if true -%}\n\n  x  {%- endif %}."), "x.");
}

TEST(Jinja, TrimAndLstripBlocks) {
  const char* source = "<ul>\n    {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n    {% endfor %}\n</ul>\n";
  EXPECT_EQ(render(source), "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>");
  EXPECT_EQ(render(source, ordered_json::object(), LexOptions{false, false}),
            "<ul>\n    \n    <li>1</li>\n    \n    <li>2</li>\n    \n</ul>");
  // {%+ keeps the indentation; a tag after text on the same line is not stripped either.
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}\nab {% if true %}y{% endif %}"), "  xab y");
  // {{ }} is neither trimmed nor lstripped; comments are.
  EXPECT_EQ(render("  {{ 1 }}\n  {# c #}\nz"), "  1\nz");
}

TEST(Jinja, GlobalFunctions) {
  EXPECT_EQ(render("{{ range(3)|list }}{{ range(1, 7, 2)|list }}{{ range(3, 0, -1)|list }}{{ dict(a=1) }}"),
            "[0, 1, 2][1, 3, 5][3, 2, 1]{'a': 1}");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
  EXPECT_EQ(error_of("{{ raise_exception('bad input') }}"), "bad input");
  EXPECT_NE(error_of("{{ range(1000000)|length }}").find("range too big"), std::string::npos);
}

TEST(Jinja, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line one\n{% if x %}\n{{ foo( }}\n{% endif %}"),
            "chat template line 3, column 9: unexpected end of tag");
  EXPECT_EQ(error_of("{{ x | nosuchfilter }}"), "chat template line 1, column 8: unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{{ x is nosuchtest }}"), "chat template line 1, column 9: unknown test 'nosuchtest'");
  EXPECT_EQ(error_of("\n  {% frobnicate %}"), "chat template line 2, column 6: unknown or misplaced tag 'frobnicate'");
  EXPECT_NE(error_of("{% if x %}never closed").find("expected {% endif %}"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y %}{% endif %}").find("unknown or misplaced tag 'endif'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("{{ x ").find("unterminated {{"), std::string::npos);
  EXPECT_NE(error_of("{# x ").find("unterminated comment"), std::string::npos);
  EXPECT_NE(error_of("{% break %}").find("outside of a loop"), std::string::npos);
  EXPECT_NE(error_of("{{ $ }}").find("unexpected character '$'"), std::string::npos);
}

TEST(Jinja, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("\n{{ nope() }}"), "chat template line 2, column 8: 'nope' is undefined");
  EXPECT_EQ(error_of("{{ 1 }}{{ [1].strip() }}"), "chat template line 1, column 20: 'list' object has no method 'strip'");
  EXPECT_NE(error_of("{% for a, b in [[1]] %}{% endfor %}").find("cannot unpack"), std::string::npos);
}

TEST(Jinja, RunawayTemplatesFailCleanly) {
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}").find("nested too deeply"), std::string::npos);
  std::string nested_ifs;
  for (int i = 0; i < 500; ++i) nested_ifs += "{% if true %}";
  EXPECT_NE(error_of(nested_ifs).find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nesting too deep"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                     "{% endfor %}")
                .find("too large"),
            std::string::npos);
}

TEST(Jinja, RunawayLoopsFailCleanly) {
  EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(20) %}{% endfor %}{% endfor %}")
                .find("too many loop iterations"),
            std::string::npos);
  // A loop's `if` filter probes every item: those probes count too.
  EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) if j < 0 %}{% endfor %}{% endfor %}")
                .find("too many loop iterations"),
            std::string::npos);
}

// Templates come from model files: what would exhaust the stack, memory or time fails with
// a tsr::Error instead.
TEST(Jinja, HostileTemplatesFailCleanly) {
  // A million-link chain would be destroyed one recursion per link.
  EXPECT_NE(error_of("{{ x" + repeat(".a", 1000000) + " }}").find("expression chain longer than"), std::string::npos);
  EXPECT_NE(error_of("{{ 1" + repeat(" + 1", 1000000) + " }}").find("expression chain longer than"), std::string::npos);
  EXPECT_NE(error_of("{{ x" + repeat("|e", 1000) + " }}").find("expression chain longer than"), std::string::npos);
  // Copies of a long string through list repetition and concatenation.
  EXPECT_NE(error_of("{% set s = 'a' * 30000000 %}{% set l = [s] * 1000 %}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[0]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")
                .find("too large"),
            std::string::npos);
  // Shared items: small in memory, exponential to print, compare or search.
  EXPECT_NE(error_of("{% set ns = namespace(l=0) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}")
                .find("value too large to walk"),
            std::string::npos);
  EXPECT_NE(error_of("{% set l = [[[0] * 1000] * 1000] * 1000 %}{{ l }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{% set l = [[[0] * 1000] * 1000] * 1000 %}{{ l == l }}").find("value too large to walk"),
            std::string::npos);
  EXPECT_NE(error_of("{% set l = [[[0] * 1000] * 1000] * 1000 %}{{ l | tojson }}").find("too large"), std::string::npos);
  // Steps without loop iterations: every evaluation counts.
  EXPECT_NE(error_of("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}")
                .find("too many steps"),
            std::string::npos);
  EXPECT_EQ(render("{{ 1e999 }} {{ range(9223372036854775800, 9223372036854775807, 100) }}"), "inf [9223372036854775800]");
}

}  // namespace
}  // namespace tsr::jinja
