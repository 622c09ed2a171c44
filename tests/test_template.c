/* test_template.c — the chat-template interpreter (src/template/):
 * every fixture template rendered as Python's Jinja2 did it (goldens in
 * fixtures/chat-templates/expected), unit tests whose expected outputs come
 * from Jinja2 semantics worked out by hand (whitespace control, trim_blocks /
 * lstrip_blocks, scoping, loop variables, filters, tests, Python value
 * formatting), and hostile templates that must fail cleanly with a message. */
#include "theseus.h"
#include "check.h"
#include <dirent.h>
#include <stdbool.h>

static const char *CTX = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 3, \"f\": 2.5, "
                         "\"s\": \"  Hello World  \", \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [true, null]}, "
                         "\"u\": \"h\u00e9llo\", \"e\": []}";

static th_status render_opts(const char *tmpl, const char *ctx, const th_chat_opts *o, char **out) {
    return th_chat_render(tmpl, ctx ? ctx : CTX, o, out);
}

/* Render tmpl with CTX and compare with want. */
#define EXPECT(tmpl, want) expect_(__LINE__, tmpl, NULL, want)
#define EXPECT_CTX(tmpl, ctx, want) expect_(__LINE__, tmpl, ctx, want)
static void expect_(int line, const char *tmpl, const char *ctx, const char *want) {
    th_chat_opts o = { .add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>" };
    char *out = NULL;
    th_status s = render_opts(tmpl, ctx, &o, &out);
    CHECK(s == TH_OK, "line %d: %s: %s", line, tmpl, th_last_error());
    if (s == TH_OK) CHECK(!strcmp(out, want), "line %d: %s\n    got  [%s]\n    want [%s]", line, tmpl, out, want);
    free(out);
}

/* The render must fail with TH_ERR_FORMAT and a message containing want. */
#define EXPECT_ERR(tmpl, want) expect_err_(__LINE__, tmpl, NULL, want, 0)
static void expect_err_(int line, const char *tmpl, const char *ctx, const char *want, size_t max_output) {
    th_chat_opts o = { .add_generation_prompt = true, .max_output = max_output };
    char *out = NULL;
    th_status s = render_opts(tmpl, ctx, &o, &out);
    CHECK(s == TH_ERR_FORMAT, "line %d: %s: expected an error, got status %d output [%.100s]", line, tmpl, s,
          out ? out : "");
    CHECK(out == NULL, "line %d: output on error", line);
    if (s != TH_OK) CHECK(strstr(th_last_error(), want) != NULL, "line %d: %s\n    error [%s]\n    want  [%s]", line,
                          tmpl, th_last_error(), want);
    free(out);
}

/* ---------------------------------------------------------------- fixtures */

static void test_fixture_templates(void) {
    const char *dir = fixture("chat-templates");
    char path[2048];
    snprintf(path, sizeof path, "%s/messages.json", dir);
    char *messages = check_read_file(path, NULL);
    if (!messages) SKIP("no fixtures at %s", dir);
    setenv("SOURCE_DATE_EPOCH", "1767312000", 1);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jinja")) continue;
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *tmpl = check_read_file(path, NULL);
        snprintf(path, sizeof path, "%s/expected/%s.txt", dir, name);
        size_t want_len = 0;
        char *want = check_read_file(path, &want_len);
        snprintf(path, sizeof path, "%s/expected/%s.error", dir, name);
        char *want_err = want ? NULL : check_read_file(path, NULL);
        CHECK(want || want_err, "%s: no expected output", name);
        th_chat_opts o = { .add_generation_prompt = true, .bos_token = "<BOS>", .eos_token = "<EOS>" };
        char *out = NULL;
        th_status s = th_chat_render(tmpl, messages, &o, &out);
        if (want) {
            CHECK(s == TH_OK, "%s: %s", name, th_last_error());
            if (s == TH_OK) CHECK(strlen(out) == want_len && !memcmp(out, want, want_len),
                                  "%s: output differs\n---- got\n%s\n---- want\n%s\n----", name, out, want);
        } else if (want_err) {
            size_t el = strlen(want_err);
            while (el && (want_err[el - 1] == '\n' || want_err[el - 1] == '\r')) want_err[--el] = 0;
            CHECK(s == TH_ERR_FORMAT && out == NULL, "%s: expected error '%s', got status %d", name, want_err, s);
            CHECK(!strcmp(th_last_error(), want_err), "%s: error [%s] want [%s]", name, th_last_error(), want_err);
        }
        n++;
        free(out); free(tmpl); free(want); free(want_err);
    }
    if (d) closedir(d);
    CHECK(n >= 12, "only %d fixture templates found", n);
    free(messages);
}

/* ---------------------------------------------------------------- Jinja semantics
 * Each template is rendered with CTX, add_generation_prompt=true, bos "<s>", eos "</s>",
 * SOURCE_DATE_EPOCH=1767312000. Expected texts are what Python's Jinja2 3.1.6 produced
 * for the same input in an ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, loopcontrols) with HF's tojson/raise_exception/strftime_now.
 * ok=false rows must fail; the text is (part of) Jinja2's message. Two rows keep only a
 * key word because our message differs: the unsupported 'batch' filter and an
 * unterminated string literal. */
static const struct { const char *tmpl; bool ok; const char *want; } UNIT[] = {
    { "{{ \"a\" }}",
      true, "a" },
    { "{% if true %}",
      false, "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'." },
    { "x",
      true, "x" },
    { "{% endif %}",
      false, "Encountered unknown tag 'endif'." },
    { "y",
      true, "y" },
    { "    {% if true %}",
      false, "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'." },
    { "    indented",
      true, "    indented" },
    { "    {% endif %}",
      false, "Encountered unknown tag 'endif'." },
    { "  {{ \"var keeps\" }} ",
      true, "  var keeps " },
    { "a {%- if true %} b {% endif -%} c",
      true, "a b c" },
    { "{# comment #}",
      true, "" },
    { "line",
      true, "line" },
    { "  {#- c2 -#}  z",
      true, "z" },
    { "{%+ if true %}plus{% endif %}",
      true, "plus" },
    { "{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}",
      true, "10TrueFalse332|21FalseFalse321|32FalseTrue310|" },
    { "{% for i in l %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
      true, "-1;3-2;1-;" },
    { "{% for i in e %}x{% else %}empty{% endfor %}",
      true, "empty" },
    { "{% for i in l if i > 1 %}{{ i }}{{ loop.length }}{% endfor %}",
      true, "3222" },
    { "{% for i in l %}{% if i == 1 %}{% break %}{% endif %}{{ i }}{% endfor %}",
      true, "3" },
    { "{% for i in l %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
      true, "32" },
    { "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
      true, "b=1;a=[True, None];" },
    { "{% for k in d %}{{ k }}{% endfor %}",
      true, "ba" },
    { "{% for c in u %}[{{ c }}]{% endfor %}",
      true, "[h][\303\251][l][l][o]" },
    { "{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}",
      true, "1" },
    { "{% set ns = namespace(x=1) %}{% for i in l %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
      true, "7" },
    { "{% set y %}block {{ n }}{% endset %}[{{ y }}]",
      true, "[block 3]" },
    { "{% set y | upper %}block {{ n }}{% endset %}[{{ y }}]",
      true, "[BLOCK 3]" },
    { "{% macro m(a, b=2, c='z') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='q') }} {{ m(a=5) }}",
      true, "1-2-z 1-3-z 1-2-q 5-2-z" },
    { "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
      true, "54321" },
    { "{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}inside{% endcall %}",
      true, "<inside>" },
    { "{% macro w2(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) w2(4) %}got {{ v }}{% endcall %}",
      true, "<got 8>" },
    { "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 4 / 2 }}",
      true, "7 3 -4 1 2 3.5 1024 2.0" },
    { "{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 123456789.0 * 1000 }} {{ 1/3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }}",
      true, "2.5 0.30000000000000004 1e+20 1e-05 123456789000.0 0.3333333333333333 1e+16 1000000000000000.0 0.0001" },
    { "{{ \"a\" ~ 1 ~ none ~ true }} {{ \"ab\" * 3 }} {{ [1] + [2] }} {{ \"x\" + \"y\" }}",
      true, "a1NoneTrue ababab [1, 2] xy" },
    { "{{ l }} {{ d }} {{ none }} {{ true }} {{ \"it's\" }} {{ [\"it's\", 'say \"hi\"', \"both ' \\\"\"] }} {{ (1, 2) }}",
      true, "[3, 1, 2] {'b': 1, 'a': [True, None]} None True it's [\"it's\", 'say \"hi\"', 'both \\' \"'] (1, 2)" },
    { "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s|trim }}|{{ \"xxhixx\".strip(\"x\") }}",
      true, "Hello World|Hello World  |  Hello World|Hello World|hi" },
    { "{{ \"a,b,,c\".split(\",\") }} {{ \" a  b \".split() }} {{ \"a b c\".split(\" \", 1) }}",
      true, "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']" },
    { "{{ \"Hello\".startswith(\"He\") }} {{ \"Hello\".endswith((\"x\", \"lo\")) }} {{ \"hello world\".title() }} {{ \"hELLO\".capitalize() }}",
      true, "True True Hello World Hello" },
    { "{{ \"abc\".upper() }} {{ u.upper() }} {{ \"ABC\".lower() }} {{ \"aXa\".replace(\"a\", \"b\") }} {{ \"{} and {}\".format(1, \"two\") }}",
      true, "ABC H\303\211LLO abc bXb 1 and two" },
    { "{{ l|length }} {{ u|length }} {{ d|length }} {{ l|join(\", \") }} {{ l|first }} {{ l|last }} {{ l|sort }} {{ l|reverse|list }} {{ l|sum }} {{ l|min }} {{ l|max }}",
      true, "3 5 2 3, 1, 2 3 2 [1, 2, 3] [2, 1, 3] 6 1 3" },
    { "{{ undefined_var|default(\"dflt\") }} {{ \"\"|default(\"e\", true) }} {{ n|string ~ \"x\" }} {{ \"42\"|int + 1 }} {{ \"4.7\"|float }} {{ 3.9|int }} {{ \"x\"|int }}",
      true, "dflt e 3x 43 4.7 3 0" },
    { "{{ d|items|list }} {{ d|tojson }} {{ d|tojson(indent=2) }} {{ \"\303\251\\n\\\"q\\\"\"|tojson }} {{ [1.5, 2, none, false]|tojson }} {{ {}|tojson(indent=2) }}",
      true, "[('b', 1), ('a', [True, None])] {\"b\": 1, \"a\": [true, null]} {\n  \"b\": 1,\n  \"a\": [\n    true,\n    null\n  ]\n} \"\303\251\\n\\\"q\\\"\" [1.5, 2, null, false] {}" },
    { "{{ messages|selectattr(\"role\", \"equalto\", \"user\")|list|length }} {{ messages|map(attribute=\"role\")|list }} {{ [1,2,3,4]|select(\"odd\")|list }} {{ [1,2,3,4]|reject(\"even\")|list }}",
      true, "1 ['user'] [1, 3] [1, 3]" },
    { "{{ \"a\\nb\\n\\nc\"|indent(2) }}|{{ \"a\\nb\"|indent(2, true) }}|{{ \"<&>'\\\"\"|e }} {{ \"hello world\"|capitalize }} {{ [3,1,1,2]|unique|list }}",
      true, "a\n  b\n\n  c|  a\n  b|&lt;&amp;&gt;&#39;&#34; Hello world [3, 1, 2]" },
    { "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ none is none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ n is number }} {{ n is integer }} {{ f is float }} {{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ false is false }} {{ 0 is false }} {{ l is sequence }} {{ zz is iterable }}",
      true, "True False True True True True True True True True True True True False True True" },
    { "{{ 1 in l }} {{ 5 not in l }} {{ \"ell\" in s }} {{ \"b\" in d }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ \"a\" < \"b\" }} {{ [1,2] < [1,3] }}",
      true, "True True True True True False True True" },
    { "{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ u[1] }} {{ u[::-1] }} {{ u[1:3] }} {{ \"hello\"[1:-1] }} {{ l[5:] }} {{ l[-10:1] }}",
      true, "3 2 [1, 2] [3, 1] [2, 1, 3] [3, 2] \303\251 oll\303\251h \303\251l ell [] [3]" },
    { "{{ d.b }} {{ d['a'] }} {{ d.a.0 }} {{ d.zz }}|{{ d.get('b') }} {{ d.get('zz', 7) }} {{ d.keys()|list }} {{ d.values()|list }}",
      true, "1 [True, None] True |1 7 ['b', 'a'] [1, [True, None]]" },
    { "{{ \"yes\" if n > 2 else \"no\" }} {{ \"yes\" if n > 5 }}| {{ n > 2 and \"A\" or \"B\" }} {{ 0 or \"\" or \"last\" }} {{ not n }}",
      true, "yes | A last False" },
    { "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
      true, "[0, 1, 2] [1, 4, 7] [5, 3, 1]" },
    { "{%- for i in range(3) -%}",
      false, "Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'." },
    { "  {{ i }}",
      true, "  " },
    { "{%- endfor %}",
      false, "Encountered unknown tag 'endfor'." },
    { "{{ strftime_now(\"%Y-%m-%d %B %b %d\") }}",
      true, "2026-01-02 January Jan 02" },
    { "{% for m in messages %}{{ m.role }}:{{ m['content'] }}{% endfor %}",
      true, "user:hi" },
    { "{{ \"%s-%d\" % (\"a\", 5) }} {{ \"%s\" % \"x\" }}",
      true, "a-5 x" },
    { "{{ l|map(\"string\")|join }} {{ l|batch is defined }}",
      false, "batch" },
    { "{{ [1, [2, 3]]|tojson }} {{ {\"a\": {\"b\": [1, {}]}}|tojson(indent=4) }}",
      true, "[1, [2, 3]] {\n    \"a\": {\n        \"b\": [\n            1,\n            {}\n        ]\n    }\n}" },
    { "{{ \"  x  \"|trim(\"x \") }} {{ \"x\"|center is defined }}",
      true, " True" },
    { "{{ \"abc\"[5] is defined }} {{ messages[5] is defined }}",
      true, "False False" },
    { "{{ n|abs }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.4|round(0, 'ceil') }}",
      true, "3 3 2.57 2.0 4.0 3.0" },
    { "{{ \"A-b c(d\"|title }} {{ \"x\"|wordcount }} {{ \"one two  three\"|wordcount }}",
      true, "A-B C(D 1 3" },
    { "{{ {\"b\": 2, \"a\": 1}|dictsort }} {{ [{\"k\": 2}, {\"k\": 1}]|sort(attribute=\"k\") }} {{ [\"b\", \"A\", \"c\"]|sort }} {{ [\"b\", \"A\", \"c\"]|sort(case_sensitive=true) }}",
      true, "[('a', 1), ('b', 2)] [{'k': 1}, {'k': 2}] ['A', 'b', 'c'] ['A', 'b', 'c']" },
    { "{{ loop is defined }} {{ l.count(1) }} {{ l.index(2) }} {{ \"abcabc\".count(\"b\") }} {{ \"abc\".find(\"c\") }} {{ \"abc\".rfind(\"x\") }}",
      true, "False 1 2 2 2 -1" },
    { "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}{% endfor %}",
      true, "113 214 1123 224 2" },
    { "{{ \"a\" \"b\" 'c' }} {{ 1_000 }} {{ 0.5e1 }} {{ 'tab\\there' }} {{ \"\\u00e9\\x41\" }} {{ '\\q' }}",
      true, "abc 1000 5.0 tab\there \303\251A \\q" },
    { "{% if n == 3 %}three{% elif n == 4 %}four{% else %}other{% endif %} {% if n == 4 %}four{% elif n == 3 %}three{% endif %}",
      true, "three three" },
    { "{% raw %}{{ not evaluated }} {% if %}{% endraw %}",
      true, "{{ not evaluated }} {% if %}" },
    { "{{ [1,2,3]|join }} {{ d|dictsort(by=\"value\") is defined }}",
      false, "'<' not supported between instances of 'list' and 'int'" },
    { "{{ \"abc\"|list }} {{ \"ab\"|reverse }} {{ n ~ \"\" }} {{ (n ~ \"\")|length }}",
      true, "['a', 'b', 'c'] ba 3 1" },
    { "{{ {\"a\": 1} == {\"a\": 1} }} {{ [1, 2] == [1, 2] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ \"1\" == 1 }}",
      true, "True True True True False" },
    { "{{ messages[0] == messages[-1] }}",
      true, "True" },
    { "{% for m in messages %}\n  <{{ m.role }}>\n{% endfor %}\nend\n",
      true, "  <user>\nend" },
    { "  {% if true %}\n    a\n  {% endif %}\n  b\n",
      true, "    a\n  b" },
    { "{%- if true -%}\n\n   a   \n\n{%- endif -%}\n\nb",
      true, "ab" },
    { "x\n{# c #}\ny\n  {# c #}  \nz",
      true, "x\ny\n  \nz" },
    { "{% if true %}a{% endif %}\n{{ 'b' }}\n{{ 'c' }}\n\n",
      true, "ab\nc\n" },
    { "start\n\t {% set x = 1 %}\nafter",
      true, "start\nafter" },
    { "a  {% if true %}b{% endif %}  c\n  {{- 'd' -}}  \n  e",
      true, "a  b  cde" },
    { "{% macro f(x) %}\n  [{{ x }}]\n{% endmacro %}\n{{ f(1) }}{{ f(2) }}\n",
      true, "  [1]\n  [2]\n" },
    { "{{ 'a' -}}\n\n  {{ 'b' }}",
      true, "ab" },
    { "{%- set x = 'v' %}\n{{ x }}\n",
      true, "v" },
    { "text\r\nmore\r\n{% if true %}\r\nin\r\n{% endif %}\r\n",
      true, "text\nmore\nin\n" },
    { "{% for i in [1,2] %}\n{{ i }}\n{% endfor %}",
      true, "1\n2\n" },
    { "{% if true %}   \n a{% endif %}",
      true, "   \n a" },
    { "a{%+ if true %}\n  b\n  {%+ endif %}c",
      true, "a  b\n  c" },
    { "   {% for i in [1] +%}\n{{ i }}{% endfor %}",
      true, "\n1" },
    { "{{ raise_exception('boom ' ~ n) }}",
      false, "boom 3" },
    { "{{ zz + 1 }}",
      false, "'zz' is undefined" },
    { "{{ zz.attr }}",
      false, "'zz' is undefined" },
    { "{{ d.zz.attr }}",
      false, "'dict object' has no attribute 'zz'" },
    { "{{ messages[9].role }}",
      false, "list object has no element 9" },
    { "{{ 'a' + 1 }}",
      false, "can only concatenate str (not \"int\") to str" },
    { "{{ 1 + 'a' }}",
      false, "unsupported operand type(s) for +: 'int' and 'str'" },
    { "{{ 1 / 0 }}",
      false, "division by zero" },
    { "{{ none.x }}x",
      true, "x" },
    { "{% for %}",
      false, "Expected an expression, got 'end of statement block'" },
    { "{% if true %}",
      false, "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'." },
    { "{{ 1 + }}",
      false, "unexpected 'end of print statement'" },
    { "{% endfor %}",
      false, "Encountered unknown tag 'endfor'." },
    { "{% foo %}",
      false, "Encountered unknown tag 'foo'." },
    { "{{ 1 < 'a' }}",
      false, "'<' not supported between instances of 'int' and 'str'" },
    { "{{ n() }}",
      false, "'int' object is not callable" },
    { "{% set x.y = 1 %}",
      false, "cannot assign attribute on non-namespace object" },
    { "{{ 1 in 2 }}",
      false, "argument of type 'int' is not iterable" },
    { "{{ l.append(1) }}",
      false, "access to attribute 'append' of 'list' object is unsafe." },
    { "{{ 'x' | nofilter }}",
      false, "No filter named 'nofilter'." },
    { "{{ x is notatest }}",
      false, "No test named 'notatest'." },
    { "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
      false, "macro 'm' takes not more than 1 argument(s)" },
    { "{{ 'abc'.split('') }}",
      false, "empty separator" },
    { "{{ d|tojson }}{{ ns|tojson }}",
      false, "Object of type Undefined is not JSON serializable" },
    { "{% for a, b in l %}{% endfor %}",
      false, "cannot unpack non-iterable int object" },
    { "{{ zz|length }}",
      true, "0" },
    { "{{ zz|tojson }}",
      false, "Object of type Undefined is not JSON serializable" },
    { "{{ '{' }}",
      true, "{" },
    { "{{ 'unterminated }}",
      false, "unexpected char" },
    { "{# never closed",
      false, "Missing end of comment tag" },
    { "{{ -'a' }}",
      false, "bad operand type for unary -: 'str'" },
    { "{{ {'b': 1, 'a': '\303\251\360\237\230\200'}|tojson(sort_keys=true) }}",
      true, "{\"a\": \"\303\251\360\237\230\200\", \"b\": 1}" },
    { "{{ {'b': 1, 'a': '\303\251\360\237\230\200'}|tojson(true) }}",
      true, "{\"b\": 1, \"a\": \"\\u00e9\\ud83d\\ude00\"}" },
    { "{{ {'b': 1, 'a': '\303\251\360\237\230\200'}|tojson(separators=(',', ':')) }}",
      true, "{\"b\":1,\"a\":\"\303\251\360\237\230\200\"}" },
    { "{{ {'b': 1, 'a': '\303\251\360\237\230\200'}|tojson(indent=0) }}",
      true, "{\n\"b\": 1,\n\"a\": \"\303\251\360\237\230\200\"\n}" },
    { "{{ '%5.2f|%-4d|%03d|%s|%r|%x' % (f, n, n, 'a', 'b', 255) }}",
      true, " 2.50|3   |003|a|'b'|ff" },
    { "{{ '%.3s' % 'abcdef' }}",
      true, "abc" },
    { "{{ '%d%%' % 50 }}",
      true, "50%" },
    { "{% with a = 1, b = n %}{{ a + b }}{% endwith %}{{ a is defined }}",
      true, "4False" },
    { "{% with x = [1,2] %}{% for i in x %}{{ i }}{% endfor %}{% endwith %}",
      true, "12" },
    { "{{ '%e' % 12345.678 }} {{ '%g' % 0.00001 }} {{ '%+d' % 5 }}",
      true, "1.234568e+04 1e-05 +5" },
};

static void test_jinja_semantics(void) {
    setenv("SOURCE_DATE_EPOCH", "1767312000", 1);
    for (size_t i = 0; i < sizeof UNIT / sizeof UNIT[0]; i++) {
        if (UNIT[i].ok) expect_(1000 + (int)i, UNIT[i].tmpl, NULL, UNIT[i].want);
        else expect_err_(1000 + (int)i, UNIT[i].tmpl, NULL, UNIT[i].want, 0);
    }
}

/* ---------------------------------------------------------------- tool conversations
 * The fixture templates with tools, tool calls, tool results, no system message,
 * add_generation_prompt=false and <think> content. Expected texts from the same
 * Python Jinja2 3.1.6 setup as above (bos "<s>", eos "</s>"). */
static const char *const TOOL_CTX[] = {
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\"}, {\"role\": \"user\", \"content\": \"Weather in Paris\?\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is 21\302\260C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. \\\"Paris\\\".\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], \"description\": \"Unit.\"}, \"days\": {\"type\": \"integer\", \"description\": \"How many days\", \"default\": 1}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Tags\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"noop\", \"description\": \"Does nothing.\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}]}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}, {\"role\": \"assistant\", \"content\": \"Hi there\"}, {\"role\": \"user\", \"content\": \"Bye\"}], \"add_generation_prompt\": false}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Q1\"}, {\"role\": \"assistant\", \"content\": \"<think>\\nreasoning here\\n</think>\\n\\nAnswer 1\"}, {\"role\": \"user\", \"content\": \"Q2\"}, {\"role\": \"assistant\", \"content\": \"<think>r2</think>A2\"}]}",
};
static const struct { const char *name; int ctx; bool ok; const char *want; } TOOL_CASES[] = {
    { "HuggingFaceTB-SmolLM3-3B.jinja", 0, true,
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n## Custom Instructions\n\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\n\n<|im_end|>\n<|im_start|>user\nWeather in Paris\?<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\n{\"temp\": 21}<|im_end|>\n<|im_start|>assistant\nIt is 21\302\260C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n" },
    { "HuggingFaceTB-SmolLM3-3B.jinja", 1, true,
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring questions through a systematic thinking process before providing the final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, explorations, and reflections from the Thought section, systematically present the final solution that you deem correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" },
    { "HuggingFaceTB-SmolLM3-3B.jinja", 2, true,
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring questions through a systematic thinking process before providing the final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, explorations, and reflections from the Thought section, systematically present the final solution that you deem correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nreasoning here\n</think>\n\nAnswer 1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>r2</think>A2<|im_end|>\n<|im_start|>assistant\n" },
    { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", 0, true,
      "<s><|im_start|>system\nYou are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about what values to plug into functions. Here are the available tools: <tools> {\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"get_weather(city: str, unit: str, days: int, tags: list[Union[]]) - Get the weather for a city.\n\n    Args:\n        city(str): City name, e.g. \"Paris\".        unit(str): Unit.        days(int): How many days        tags(list[Union[]]): Tags\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. \\\"Paris\\\".\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], \"description\": \"Unit.\"}, \"days\": {\"type\": \"integer\", \"description\": \"How many days\", \"default\": 1}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Tags\"}}, \"required\": [\"city\"]}}\n{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"description\": \"noop() - Does nothing.\n\n\", \"parameters\": {}} </tools>Use the following pydantic model json schema for each tool call you will make: {\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\nFor each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-dict>}\n</tool_call><|im_end|>\n<|im_start|>system\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<|im_end|>\n<|im_start|>user\nWeather in Paris\?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n<|im_start|>tool\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<|im_end|><|im_start|>assistant\nIt is 21\302\260C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n" },
    { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", 1, true,
      "<s><|im_start|>system\nYou are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about what values to plug into functions. Here are the available tools: <tools>  </tools>Use the following pydantic model json schema for each tool call you will make: {\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\nFor each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-dict>}\n</tool_call><|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" },
    { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", 2, true,
      "<s><|im_start|>system\nYou are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about what values to plug into functions. Here are the available tools: <tools>  </tools>Use the following pydantic model json schema for each tool call you will make: {\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\nFor each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-dict>}\n</tool_call><|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nreasoning here\n</think>\n\nAnswer 1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>r2</think>A2<|im_end|>\n<|im_start|>assistant\n" },
    { "Qwen-Qwen2.5-7B-Instruct.jinja", 0, true,
      "<|im_start|>system\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. \\\"Paris\\\".\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], \"description\": \"Unit.\"}, \"days\": {\"type\": \"integer\", \"description\": \"How many days\", \"default\": 1}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Tags\"}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"description\": \"Does nothing.\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris\?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 21\302\260C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n" },
    { "Qwen-Qwen2.5-7B-Instruct.jinja", 1, true,
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" },
    { "Qwen-Qwen2.5-7B-Instruct.jinja", 2, true,
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nreasoning here\n</think>\n\nAnswer 1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>r2</think>A2<|im_end|>\n<|im_start|>assistant\n" },
    { "Qwen-Qwen3-0.6B.jinja", 0, true,
      "<|im_start|>system\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. \\\"Paris\\\".\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], \"description\": \"Unit.\"}, \"days\": {\"type\": \"integer\", \"description\": \"How many days\", \"default\": 1}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Tags\"}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"description\": \"Does nothing.\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris\?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 21\302\260C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n" },
    { "Qwen-Qwen3-0.6B.jinja", 1, true,
      "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" },
    { "Qwen-Qwen3-0.6B.jinja", 2, true,
      "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nAnswer 1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n<|im_start|>assistant\n" },
    { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 0, true,
      "<s>You are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<\357\275\234User\357\275\234>Weather in Paris\?<\357\275\234Assistant\357\275\234><\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>get_weather\n```json\n{\"city\": \"Paris\", \"unit\": \"celsius\"}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234><\357\275\234tool\342\226\201calls\342\226\201end\357\275\234><\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234Assistant\357\275\234><\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234tool\342\226\201outputs\342\226\201begin\357\275\234><\357\275\234tool\342\226\201output\342\226\201begin\357\275\234>{\"temp\": 21}<\357\275\234tool\342\226\201output\342\226\201end\357\275\234><\357\275\234tool\342\226\201outputs\342\226\201end\357\275\234>It is 21\302\260C.<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234User\357\275\234>Thanks!<\357\275\234Assistant\357\275\234><think>\n</think>" },
    { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 1, true,
      "<s><\357\275\234User\357\275\234>Hello<\357\275\234Assistant\357\275\234>Hi there<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234User\357\275\234>Bye" },
    { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 2, true,
      "<s><\357\275\234User\357\275\234>Q1<\357\275\234Assistant\357\275\234>\n\nAnswer 1<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234User\357\275\234>Q2<\357\275\234Assistant\357\275\234>A2<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234><\357\275\234Assistant\357\275\234><think>\n</think>" },
    { "google-gemma-2-2b-it.jinja", 0, false,
      "System role not supported" },
    { "google-gemma-2-2b-it.jinja", 1, true,
      "<s><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n" },
    { "google-gemma-2-2b-it.jinja", 2, true,
      "<s><start_of_turn>user\nQ1<end_of_turn>\n<start_of_turn>model\n<think>\nreasoning here\n</think>\n\nAnswer 1<end_of_turn>\n<start_of_turn>user\nQ2<end_of_turn>\n<start_of_turn>model\n<think>r2</think>A2<end_of_turn>\n<start_of_turn>model\n" },
    { "ibm-granite-granite-3.3-2B-Instruct.jinja", 0, true,
      "<|start_of_role|>system<|end_of_role|>You are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<|end_of_text|>\n<|start_of_role|>available_tools<|end_of_role|>[\n    {\n        \"type\": \"function\",\n        \"function\": {\n            \"name\": \"get_weather\",\n            \"description\": \"Get the weather for a city.\",\n            \"parameters\": {\n                \"type\": \"object\",\n                \"properties\": {\n                    \"city\": {\n                        \"type\": \"string\",\n                        \"description\": \"City name, e.g. \\\"Paris\\\".\"\n                    },\n                    \"unit\": {\n                        \"type\": \"string\",\n                        \"enum\": [\n                            \"celsius\",\n                            \"fahrenheit\"\n                        ],\n                        \"description\": \"Unit.\"\n                    },\n                    \"days\": {\n                        \"type\": \"integer\",\n                        \"description\": \"How many days\",\n                        \"default\": 1\n                    },\n                    \"tags\": {\n                        \"type\": \"array\",\n                        \"items\": {\n                            \"type\": \"string\"\n                        },\n                        \"description\": \"Tags\"\n                    }\n                },\n                \"required\": [\n                    \"city\"\n                ]\n            }\n        }\n    },\n    {\n        \"type\": \"function\",\n        \"function\": {\n            \"name\": \"noop\",\n            \"description\": \"Does nothing.\",\n            \"parameters\": {\n                \"type\": \"object\",\n                \"properties\": {}\n            }\n        }\n    }\n]<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Weather in Paris\?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>{\"temp\": 21}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>It is 21\302\260C.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Thanks!<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>" },
    { "ibm-granite-granite-3.3-2B-Instruct.jinja", 1, true,
      "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: January 02, 2026. You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Bye<|end_of_text|>\n" },
    { "ibm-granite-granite-3.3-2B-Instruct.jinja", 2, true,
      "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: January 02, 2026. You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Q1<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><think>\nreasoning here\n</think>\n\nAnswer 1<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Q2<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><think>r2</think>A2<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>" },
    { "meta-llama-Llama-3.1-8B-Instruct.jinja", 0, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get the weather for a city.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n                    \"description\": \"City name, e.g. \\\"Paris\\\".\"\n                },\n                \"unit\": {\n                    \"type\": \"string\",\n                    \"enum\": [\n                        \"celsius\",\n                        \"fahrenheit\"\n                    ],\n                    \"description\": \"Unit.\"\n                },\n                \"days\": {\n                    \"type\": \"integer\",\n                    \"description\": \"How many days\",\n                    \"default\": 1\n                },\n                \"tags\": {\n                    \"type\": \"array\",\n                    \"items\": {\n                        \"type\": \"string\"\n                    },\n                    \"description\": \"Tags\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"noop\",\n        \"description\": \"Does nothing.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}\n\nWeather in Paris\?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nIt is 21\302\260C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThanks!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "meta-llama-Llama-3.1-8B-Instruct.jinja", 1, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" },
    { "meta-llama-Llama-3.1-8B-Instruct.jinja", 2, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nreasoning here\n</think>\n\nAnswer 1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>r2</think>A2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "meta-llama-Llama-3.2-3B-Instruct.jinja", 0, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 02 Jan 2026\n\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get the weather for a city.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n                    \"description\": \"City name, e.g. \\\"Paris\\\".\"\n                },\n                \"unit\": {\n                    \"type\": \"string\",\n                    \"enum\": [\n                        \"celsius\",\n                        \"fahrenheit\"\n                    ],\n                    \"description\": \"Unit.\"\n                },\n                \"days\": {\n                    \"type\": \"integer\",\n                    \"description\": \"How many days\",\n                    \"default\": 1\n                },\n                \"tags\": {\n                    \"type\": \"array\",\n                    \"items\": {\n                        \"type\": \"string\"\n                    },\n                    \"description\": \"Tags\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"noop\",\n        \"description\": \"Does nothing.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}\n\nWeather in Paris\?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nIt is 21\302\260C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThanks!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "meta-llama-Llama-3.2-3B-Instruct.jinja", 1, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 02 Jan 2026\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" },
    { "meta-llama-Llama-3.2-3B-Instruct.jinja", 2, true,
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 02 Jan 2026\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nreasoning here\n</think>\n\nAnswer 1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>r2</think>A2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "microsoft-Phi-3.5-mini-instruct.jinja", 0, true,
      "<|system|>\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223<|end|>\n<|user|>\nWeather in Paris\?<|end|>\n<|assistant|>\n<|end|>\n<|assistant|>\nIt is 21\302\260C.<|end|>\n<|user|>\nThanks!<|end|>\n<|assistant|>\n" },
    { "microsoft-Phi-3.5-mini-instruct.jinja", 1, true,
      "<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nBye<|end|>\n</s>" },
    { "microsoft-Phi-3.5-mini-instruct.jinja", 2, true,
      "<|user|>\nQ1<|end|>\n<|assistant|>\n<think>\nreasoning here\n</think>\n\nAnswer 1<|end|>\n<|user|>\nQ2<|end|>\n<|assistant|>\n<think>r2</think>A2<|end|>\n<|assistant|>\n" },
    { "mistralai-Mistral-Nemo-Instruct-2407.jinja", 0, true,
      "<s>[INST]Weather in Paris\?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}, \"id\": \"call12345\"}]</s>[TOOL_RESULTS]{\"content\": {\"temp\": 21}, \"call_id\": \"call12345\"}[/TOOL_RESULTS]It is 21\302\260C.</s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. \\\"Paris\\\".\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"], \"description\": \"Unit.\"}, \"days\": {\"type\": \"integer\", \"description\": \"How many days\", \"default\": 1}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Tags\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"noop\", \"description\": \"Does nothing.\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}][/AVAILABLE_TOOLS][INST]You are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\n\nThanks![/INST]" },
    { "mistralai-Mistral-Nemo-Instruct-2407.jinja", 1, true,
      "<s>[INST]Hello[/INST]Hi there</s>[INST]Bye[/INST]" },
    { "mistralai-Mistral-Nemo-Instruct-2407.jinja", 2, true,
      "<s>[INST]Q1[/INST]<think>\nreasoning here\n</think>\n\nAnswer 1</s>[INST]Q2[/INST]<think>r2</think>A2</s>" },
    { "openai-gpt-oss-120b.jinja", 0, true,
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-01-02\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions\n\nYou are helpful. \303\274n\303\257c\303\266d\303\251 \342\234\223\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n// Get the weather for a city.\ntype get_weather = (_: {\n// City name, e.g. \"Paris\".\ncity: string,\n// Unit.\nunit\?: \"celsius\" | \"fahrenheit\",\n// How many days\ndays\?: number, // default: 1,\n// Tags\ntags\?: string[],\n}) => any;\n\n// Does nothing.\ntype noop = () => any;\n\n} // namespace functions<|end|><|start|>user<|message|>Weather in Paris\?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\": 21}\"<|end|><|start|>assistant<|channel|>final<|message|>It is 21\302\260C.<|end|><|start|>user<|message|>Thanks!<|end|><|start|>assistant" },
    { "openai-gpt-oss-120b.jinja", 1, true,
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-01-02\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|channel|>final<|message|>Hi there<|end|><|start|>user<|message|>Bye<|end|>" },
    { "openai-gpt-oss-120b.jinja", 2, true,
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-01-02\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>Q1<|end|><|start|>assistant<|channel|>final<|message|><think>\nreasoning here\n</think>\n\nAnswer 1<|end|><|start|>user<|message|>Q2<|end|><|start|>assistant<|channel|>final<|message|><think>r2</think>A2<|end|><|start|>assistant" },
};

static void test_fixture_templates_tools(void) {
    const char *dir = fixture("chat-templates");
    setenv("SOURCE_DATE_EPOCH", "1767312000", 1);
    for (size_t i = 0; i < sizeof TOOL_CASES / sizeof TOOL_CASES[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, TOOL_CASES[i].name);
        char *tmpl = check_read_file(path, NULL);
        if (!tmpl) SKIP("no fixtures at %s", dir);
        const char *ctx = TOOL_CTX[TOOL_CASES[i].ctx];
        bool gen = strstr(ctx, "\"add_generation_prompt\": false") == NULL;
        th_chat_opts o = { .add_generation_prompt = gen, .bos_token = "<s>", .eos_token = "</s>" };
        char *out = NULL;
        th_status s = th_chat_render(tmpl, ctx, &o, &out);
        if (TOOL_CASES[i].ok) {
            CHECK(s == TH_OK, "%s ctx %d: %s", TOOL_CASES[i].name, TOOL_CASES[i].ctx, th_last_error());
            if (s == TH_OK) CHECK(!strcmp(out, TOOL_CASES[i].want), "%s ctx %d:\n---- got\n%s\n---- want\n%s\n----",
                                  TOOL_CASES[i].name, TOOL_CASES[i].ctx, out, TOOL_CASES[i].want);
        } else {
            CHECK(s == TH_ERR_FORMAT && !strcmp(th_last_error(), TOOL_CASES[i].want), "%s ctx %d: status %d [%s]",
                  TOOL_CASES[i].name, TOOL_CASES[i].ctx, s, th_last_error());
        }
        free(out);
        free(tmpl);
    }
}

/* Random combinations of text, {% if/for/set %}, {{ }} and {# #} with every whitespace
 * control sign ("-", "+", none), blank lines and CRLF; outputs from the same Python
 * Jinja2 setup (3000 such cases were compared during development; these 40 stay as
 * a regression test of the lexer's trim_blocks / lstrip_blocks handling). */
static const struct { const char *tmpl, *want; } WS_RANDOM[] = {
    { "{% if true %}{% set v = 1 %}ac  {% for i in [1, 2] +%}{{ 'x' -}}\n\n\n {%- endfor %}{% if true -%}{% endif +%}b\n \nc {%- endif -%}\n{% if true %}\n\n \n{%- if true %}{{- 'x' }}\n  a\r\n{{- 'x' -}}c  \n{%+ if true %}{% set v = 1 %}\r\nc \t \t \n  {%- endif %}b\n\nc {% else %}\n \t {%+ set v = 1 %} \n{%+ endif -%}\n  {%- for i in [1, 2] +%}\r\n\n  {{ 'x' }}\r\n{% endfor %}c \n\t{% else +%}c c {% for i in [1, 2] +%}\n  \n  \n  {%+ endfor +%}{{ 'x' -}} {%- endif %}",
      "ac  xxb\n \ncx\n  axc  \ncb\n\nc \n\n  x\n\n\n  x\nc \n" },
    { "\n\r\n\t{%+ if true %}{%+ for i in [1, 2] +%}\t \n{%- endfor -%} \t \n\n\n{{- 'x' }}{%- for i in [1, 2] %}\n\nb\n{% set v = 1 -%}c {% endfor %} \t     {%- endif %}{%+ for i in [1, 2] -%} \t {%- set v = 1 -%}{# c +#}b\n{% endfor +%} ",
      "\n\n\tx\nb\nc \nb\nc b\nb\n " },
    { "\n  {% for i in [1, 2] %}  \t{%- for i in [1, 2] -%}\na \t {%+ for i in [1, 2] %}\n\n{%+ endfor %}{% for i in [1, 2] %} \n{% endfor -%} \n\na{% endfor %}a {%+ endfor %} ",
      "\na \t \n\n \n \naa \t \n\n \n \naa a \t \n\n \n \naa \t \n\n \n \naa  " },
    { "c \n\n{%+ if true +%} \t {% for i in [1, 2] +%}\n  {%+ endfor +%} \r\n{# c #} \n{%- endif %}\n \n\n",
      "c \n\n \t \n  \n   \n \n" },
    { "{% for i in [1, 2] %} \t {%+ for i in [1, 2] -%}  b\nb\n{%- endfor %}\n\n \n{% set v = 1 +%}\n\nc {# c #} {% endfor -%}a\n{# c +#}\n  \n{%+ if true -%}{{ 'x' -}}{# c #} c {% endif -%} ",
      " \t b\nbb\nb\n \n\n\nc   \t b\nbb\nb\n \n\n\nc  a\n\n  \nx c " },
    { "{%+ for i in [1, 2] -%}a{% for i in [1, 2] -%}{#- c -#}\t{%+ endfor %}b\na{%- endfor %}{{ 'x' -}} \n",
      "ab\naab\nax" },
    { "\r\n \n\n\n{%- for i in [1, 2] %}b\n{% for i in [1, 2] +%}a\n{% endfor -%}\na {%+ endfor -%} \t {#+ c #}\t{%- set v = 1 -%}\n\nb\n\n",
      "b\na\na\na b\na\na\na b\n" },
    { " \n{%+ if true %}\t\r\n{{ 'x' -}} \t  \n{% else %} \t  \t \n\n{% for i in [1, 2] %}{% endfor %} \n  {%+ endif %}{% if true +%}a \n{% endif %}\t \t{# c #} \n\n    ",
      " \n\t\nxa \n\t \t \n\n    " },
    { "{%+ for i in [1, 2] %} \t {%- endfor -%} \n  {% set v = 1 -%}\ta\t",
      "a\t" },
    { "{% if true %}\n  \n\n{{- 'x' -}}{%+ for i in [1, 2] %}{%+ endfor +%}\r\n{%+ endif %}\n{%- set v = 1 -%}\t \t \n\n",
      "x\n" },
    { "\r\n  \t{%+ if true %}\r\n{{- 'x' }}b\n \n\n  {% else %}{# c -#}b\n{%- endif %}{%+ if true +%} \t \n\n  {# c +#}c b\n{{ 'x' }}  \n  {%+ set v = 1 +%}a\n{%+ else +%}{%+ endif +%}     {{ 'x' -}}",
      "\n  \txb\n \n\n \t \n\nc b\nx  \n  a\n     x" },
    { "\n  {# c #} \n\t{% for i in [1, 2] +%}\n\n{{- 'x' -}}{% endfor %}\r\n\r\n\n  ",
      "\n \nxx\n\n  " },
    { "  \r\n{% for i in [1, 2] +%}{%- if true +%}a{% if true %}  \t  {%- set v = 1 -%}{%+ endif %} \n{% set v = 1 %}a  a{% endif +%}{% if true +%} \t b\n \t {% endif -%}\n{%+ endfor %}\r\n \t {%- set v = 1 -%}\n a{{ 'x' -}} \n\n   ",
      "  \na \na  a \t b\na \na  a \t b\nax" },
    { "  b\n\n\n{{- 'x' -}}{% if true +%}{{ 'x' }}   \t {{- 'x' -}}b\nc {{- 'x' -}}a \t {% endif %} {%+ set v = 1 +%}\n   \n\n",
      "  bxxxb\ncxa \t  \n   \n" },
    { "\na \t {% for i in [1, 2] %}b\n \n{% for i in [1, 2] %}\n  \n  {% endfor +%}\n\n  {% for i in [1, 2] -%}{{- 'x' -}}  {% endfor +%}c \r\n  {% endfor -%}\tc {#- c -#} \n\n",
      "\na \t b\n \n  \n  \n\n\nxxc \nb\n \n  \n  \n\n\nxxc \nc" },
    { "\r\nb\n\n{{ 'x' -}} \n   {% for i in [1, 2] %}\n  {%- set v = 1 -%}a\t \t {%- if true +%}ab\n\r\n{%+ set v = 1 %}{% endif +%}{% endfor +%} \n\n\n",
      "\nb\n\nxaab\n\naab\n\n \n\n" },
    { " c c {% if true %}\t\n{% for i in [1, 2] +%}  \t\n{%+ endfor -%}{%+ endif %}\r\n{% for i in [1, 2] +%} \n{% if true +%}\n  {{ 'x' }}{% for i in [1, 2] -%}\r\n\n  {# c +#}\r\nb\n \na{% endfor +%}   \nc {%+ endif %}\n    {% endfor -%}b\n  \n",
      " c c \t\n  \t\n  \t\n \n\n  x\nb\n \na\nb\n \na   \nc  \n\n  x\nb\n \na\nb\n \na   \nc b\n  " },
    { "\n{# c #}{%- for i in [1, 2] %}c \t{{- 'x' }}c \n\n{#- c #}\n{%- set v = 1 -%}\n\t {% endfor -%}\n\n\n\nc {% if true -%} \t b\n\t{% for i in [1, 2] -%}  \n{{ 'x' -}}\t\r\n{%- endfor %}{#- c +#}\n\nb\na{{ 'x' }}{%- else -%}{%+ if true -%}  {%+ if true %}a  \r\n{%- else +%}aac \n\n \t {% set v = 1 %}{% endif %}\n  \n{{ 'x' }}\n{%+ endif %} \t{%+ if true %}\n   \t  \n{%+ endif %} {%- endif %}",
      "\ncxccxcc b\nxx\n\nb\nax" },
    { " \t  \t {%- if true +%}\t\r\n{{ 'x' }}   \t {% else -%}\n  {%+ if true +%}\n\n \t a{% endif -%}\n  {% if true %}a{% else -%} \t {% endif %} \t {% endif %}{{- 'x' }} ",
      "\t\nx   \t x " },
    { "\n\n\n\n\n{% for i in [1, 2] +%}\n\n{%- endfor -%} \n{%- if true %} \n \t \t{{- 'x' }}\t{% endif %} \t {#- c #}b\n\n",
      "\n\n\n\n\nx\tb\n" },
    { " \t  {% for i in [1, 2] %}\n\n\t{% set v = 1 %}{#+ c +#}{% endfor +%} \t   \n\n\n\n",
      "\n\n \t   \n\n\n" },
    { "a\n\t{{ 'x' -}}  \r\n \t {% if true %}{%- set v = 1 %}  \n   \t {% if true -%} \n \na{% if true -%}{{ 'x' }}\n\n{#+ c #}\n\na\r\n{%- endif -%} \t  \n  {% for i in [1, 2] +%}\t\n  {% set v = 1 %}\n  \r\n \t {%- endfor -%}{#+ c #} \n  \n{% else %}\r\n\n\n \t {% for i in [1, 2] -%} \n\t\n\nb\n  \t{%+ endfor -%}\r\n\n \n{% endif -%}  \r\n{#+ c +#}c \r\n {%- endif %}\n  a{{- 'x' }}\r\nc ",
      "a\n\tx  \nax\n\n\na\t\n\t\n \n  \nc  ax\nc " },
    { "{%- for i in [1, 2] -%}{% for i in [1, 2] +%}\n  {% for i in [1, 2] %}   \n\r\n \n\n{% endfor -%}  \n \n{% set v = 1 +%}\n \t  \n{# c #}b\n{%+ endfor +%} \nb\n{%+ endfor +%}\n",
      "\n   \n\n \n\n   \n\n \n\n\n \t  \nb\n\n   \n\n \n\n   \n\n \n\n\n \t  \nb\n \nb\n\n   \n\n \n\n   \n\n \n\n\n \t  \nb\n\n   \n\n \n\n   \n\n \n\n\n \t  \nb\n \nb\n" },
    { "{% for i in [1, 2] +%}\na  {%- if true %}b\n \n{#- c +#}\n\na{%- endif -%}\n  b\n\n\n{%- for i in [1, 2] %} b\n  {% if true %}\n\nc a{% set v = 1 %}{{- 'x' }}c \n\r\n{% endif %}{%+ if true %} \r\na{% endif -%}\t\n{%+ endfor %}a\n  {% if true +%}{%+ endif +%} a\r\n{%+ endfor %}\n  \n\n {{- 'x' }}\r\n",
      "\nab\n\nab b\n\nc axc \n\n \na b\n\nc axc \n\n \naa\n a\n\nab\n\nab b\n\nc axc \n\n \na b\n\nc axc \n\n \naa\n a\nx" },
    { "\t\t \t {%+ for i in [1, 2] %}b\nc {% set v = 1 %}{% set v = 1 +%}\n   \n\t{%- for i in [1, 2] -%}ac {% for i in [1, 2] %}c \n  {%+ set v = 1 %}\t \t a{%- endfor -%}\n  \n{% if true -%}c {#+ c -#}{%+ endif +%} \t {% endfor -%}{%+ endfor +%}\t",
      "\t\t \t b\nc ac c \n  \t \t ac \n  \t \t ac  \t ac c \n  \t \t ac \n  \t \t ac  \t b\nc ac c \n  \t \t ac \n  \t \t ac  \t ac c \n  \t \t ac \n  \t \t ac  \t \t" },
    { " \n\n\n {% for i in [1, 2] +%}\n\nb\n{% if true %}  {%- else -%}\n  \n\n{#+ c -#}{%- endif +%}{{ 'x' -}}\n\nc {{ 'x' }}c c   {%- endfor -%}  \nc {% for i in [1, 2] -%}{# c +#}{{ 'x' -}} \n c {%+ endfor %}\n\n",
      " \n\n\n\n\nb\nxc xc c\n\nb\nxc xc cc xc xc " },
    { "\n\n \t {{ 'x' -}}{%- for i in [1, 2] +%}{#- c +#}{%+ set v = 1 %}  \n\r\n{%+ for i in [1, 2] %}{% for i in [1, 2] %} \t \na\r\n {%- set v = 1 -%} \n{{- 'x' }}   \t {% endfor %}\n\n\n \n{% endfor -%}\n    \n{% endfor -%}b\n\n{# c -#} \n \n",
      "\n\n \t x  \n\n \t \nax   \t  \t \nax   \t \n\n \n \t \nax   \t  \t \nax   \t \n\n \n  \n\n \t \nax   \t  \t \nax   \t \n\n \n \t \nax   \t  \t \nax   \t \n\n \nb\n\n" },
    { "\n\n{% for i in [1, 2] -%}b\n{% for i in [1, 2] %}{# c #}\n\r\n{{- 'x' }}a\n\n\t{{- 'x' }}  \tc {% endfor %}\n\n{% for i in [1, 2] %}{%+ endfor -%}  {{ 'x' -}}a{% endfor +%}{%- if true -%}\r\n \n{%+ else %}  \n{{- 'x' }}\n\n \n{% for i in [1, 2] %} \t   {%+ for i in [1, 2] %}  \t {% set v = 1 %}{# c #}\n{{- 'x' }}{% endfor %}ac {%+ if true %} b\n {{ 'x' -}}c \n\n\t{% else +%}\n\n\r\n{%+ endif +%}a{%+ endfor +%}{%+ endif %}b\n\n  {#- c +#}\n  \n\n",
      "\n\nb\nxax  \tc xax  \tc \nxab\nxax  \tc xax  \tc \nxab\n  \n" },
    { "\n{%+ for i in [1, 2] %}{%- endfor -%}{%- if true %}{# c -#}{# c #}{%- if true %}c \n\n\n{{ 'x' -}}c \t\t{# c -#}c  \t c {#+ c #} \n\n\n{%+ endif +%}a  {% endif +%}ab\n\n{% for i in [1, 2] -%} \n\t{% for i in [1, 2] -%}{% endfor %} \n\r\n{{- 'x' -}} \t  {% endfor %}b\n\r\nb\n\n",
      "\nc \n\n\nxc \t\tc  \t c  \n\n\na  ab\n\nxxb\n\nb\n" },
    { "c {% for i in [1, 2] +%}\r\n \t {% set v = 1 %}\n\nc  {%+ endfor +%}\n  {%- for i in [1, 2] %} \n \t  \n{%- if true -%}\n\n\n\nc {% if true +%} \n\t\nc \n  c {#- c -#}b\n{%+ else %}{%- endif +%}\n\n\t{%+ if true +%} \nb\na{% set v = 1 %} {%+ set v = 1 %}\n  {%+ endif -%}{{- 'x' -}}{% endif %} \t b\n{%+ for i in [1, 2] %}\n\n  {% set v = 1 %}c \r\n{% endfor +%}{% endfor -%}\n\n",
      "c \n\nc  \n\nc  c  \n\t\nc \n  cb\n\n\n\t \nb\na   x \t b\n\nc \n\nc \nc  \n\t\nc \n  cb\n\n\n\t \nb\na   x \t b\n\nc \n\nc \n" },
    { " \n{% for i in [1, 2] %}c  \n{% if true %}{%+ else +%}a\r\na{{ 'x' -}}\na{# c #}   \n{%+ endif %}{% endfor +%}{% set v = 1 %}a\n",
      " \nc  \nc  \na" },
    { "\n  c {%+ for i in [1, 2] %}\r\n{% if true +%}\n   \t {{ 'x' }}\n{% set v = 1 %}\n  \n\n{%- set v = 1 +%}\n  \r\n{% else +%}\n\n  {{- 'x' -}}\n  {{ 'x' -}}  {% if true %}\n\n\n{% set v = 1 %}b\n  \r\nc   {#+ c #} \n{%- endif +%}\n\n  {%+ endif %} {% if true -%}a\r\n \t {#+ c #}  {% endif %}\n\n\t{{- 'x' }}\t{% endfor +%}b\n\n  {%+ for i in [1, 2] %}\na{%- if true +%}{#+ c -#}{{ 'x' -}} \t {%+ if true %}\n  \n  {%- endif %}c {%- endif +%}a {%- for i in [1, 2] %}{% if true -%}b\n{%+ endif %}\n\n {%- endfor +%}b\n \t \n\n{%+ endfor %}\n  \n",
      "\n  c \n   \t x\n\n  \n a\n \t   x\t\n   \t x\n\n  \n a\n \t   x\tb\n\n  axcab\nb\nb\n \t \n\naxcab\nb\nb\n \t \n\n  " },
    { "\n\n{% if true %}{{- 'x' -}} \t {{ 'x' -}}{% if true %}\n     {{- 'x' }}{{- 'x' -}} {%+ endif %}b\n{%- endif -%}\n\n{{ 'x' -}}  \t  \t {#- c #}\n   \n  \n\n",
      "\n\nxxxxbx   \n  \n" },
    { "{%- for i in [1, 2] -%} {% if true +%}\t{{ 'x' }} \t c {# c -#}  b\n{%- else -%}a{% endif +%}{% endfor +%} \n \t \n{% for i in [1, 2] %}\n{%+ set v = 1 %}{%+ endfor +%}  \n\n",
      "\tx \t c b\tx \t c b \n \t \n  \n" },
    { "\r\n{% if true -%}b\n\n\n  {% set v = 1 %}  {% if true %}\r\n {%- if true +%}\n\n{# c #}\r\n  \n{{ 'x' }}\r\n\n  \n\n{{ 'x' -}}{% else +%}a{{ 'x' -}}  \t {{ 'x' }}{%- endif %} \t b\n{% endif -%}{#- c +#}{%- endif %}\n\nb\n{% for i in [1, 2] %}\t{{- 'x' }} a \n{{- 'x' }}\n\n{%- endfor +%}c {%- for i in [1, 2] +%}{%- endfor %}\n\n \na",
      "\nb\n\n\n  \n\n  \nx\n\n  \n\nx \t b\n\nb\nx axx axc\n \na" },
    { "{%+ if true +%} \t {% set v = 1 -%}\n\n  {# c #}\n{%+ for i in [1, 2] -%}\n  b\nb\n{%- endfor +%}  a{% else %}\t{#- c -#} \t {{ 'x' }}\r\nc \r\n{{- 'x' }}\r\n{% endif -%} \t b\n\n",
      " \t b\nbb\nb  ab\n" },
    { "\n\n \t {#- c -#}\n\nb\n  {%- for i in [1, 2] %}  {%+ endfor +%}\n  c \t{% for i in [1, 2] %} \t \t{%- if true %}c {%- endif -%}b\n \t \n  {% if true +%}\n\t{% if true -%} \t {%+ else +%}c {{ 'x' }}{% endif %} \t \n{{- 'x' }}a  {% endif +%}c \r\nb\n{% endfor %}a \r\n\n\n",
      "b    \n  c \tcb\n \t \n\nxa  c \nb\ncb\n \t \n\nxa  c \nb\na \n\n" },
    { "c \n  \t{% for i in [1, 2] -%}a\n  {{ 'x' }}\n{% if true -%}\n  b\n{%- if true %} \t  \n{%- endif +%}b\n\n\n{%- endif %}a\n\n{%+ endfor %}\n\r\n{# c #} {{ 'x' }}c b\n\n",
      "c \na\n  x\nbba\n\na\n  x\nbba\n\n\n xc b\n" },
    { " \t {%- if true %} \n  \r\n{%+ for i in [1, 2] +%}b\n{% endfor %}{%+ for i in [1, 2] -%}{%+ if true +%}a{{- 'x' }}b\n{#+ c -#} \n  {% endif +%}\n\t{%- endfor %}a \n{% endif %}\r\nc  ",
      " \n  \nb\nb\naxb\naxb\na \nc  " },
    { "b\n\n\n\n  {%+ for i in [1, 2] +%}\n\r\na{%- if true +%}  {% else %} \t \n\nb\n{%- if true +%}\n\nb\nc   \r\n \t  \t  {%- endif -%}{% if true -%} \n \t c   \n{{- 'x' }}b\n{% else %}\n\r\n\r\n{%- endif +%}\n   {%- set v = 1 +%}{%- endif -%} \n\r\n{% endfor -%}\t \n \t {{- 'x' }}a{%- if true +%}c {%+ if true -%}{{- 'x' }}\t{%- endif -%}  \t{% for i in [1, 2] +%}{{- 'x' -}}{%+ endfor +%}a \t {%+ endif +%}b\n   ",
      "b\n\n\n\n  \n\na  \n\na  xac xxxa \t b\n   " },
};

static void test_whitespace_random(void) {
    for (size_t i = 0; i < sizeof WS_RANDOM / sizeof WS_RANDOM[0]; i++)
        expect_(2000 + (int)i, WS_RANDOM[i].tmpl, "{}", WS_RANDOM[i].want);
}

/* Statement semantics on a conversation with tools and tool calls: macros and call
 * blocks, scoping of set in loops / ifs / macros, loop variables of nested and filtered
 * loops, break/continue, namespaces, filter and set blocks, selectattr/map chains.
 * Expected outputs from the same Python Jinja2 3.1.6 setup. */
static const char *STMT_CTX = "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U1\"}, {\"role\": \"assistant\", \"content\": \"A1\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"T\"}, {\"role\": \"user\", \"content\": \"U2\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}}}], \"n\": 3}";
static const struct { const char *tmpl, *want; } STMTS[] = {
    { "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% macro inner(x) %}{% call outer() %}in{{ x }}{% endcall %}{% endmacro %}{{ inner(1) }}{{ inner(2) }}",
      "[in1][in2]" },
    { "{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ m() }}",
      "H" },
    { "{% macro m() %}{% set g = 'L' %}{{ g }}{% endmacro %}{% set g = 'G' %}{{ m() }}{{ g }}",
      "LG" },
    { "{% for m in messages %}{% for k in m %}{{ loop.index }}{% endfor %}/{{ loop.index }} {% endfor %}",
      "12/1 12/2 123/3 12/4 12/5 " },
    { "{% for m in messages %}{% set outer = loop %}{% for x in [1] %}{{ outer.index }}{% endfor %}{% endfor %}",
      "12345" },
    { "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role[0] }}{% if loop.last %}!{% endif %}{% endfor %}",
      "1u2a3t4u!" },
    { "{% for m in messages %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}",
      "abcab" },
    { "{% for m in messages %}{% if m.tool_calls is defined %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){% endfor %}{% endif %}{% endfor %}",
      "f({\"x\": 1})" },
    { "{% set ns = namespace(found=false, last=none) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.last }}",
      "4" },
    { "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for m in messages|reverse %}{{ m.role[0] }}{% endfor %}",
      "utaus|utaus" },
    { "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}",
      "U1,U2" },
    { "{{ messages|rejectattr('role', 'in', ['user', 'system'])|map(attribute='role')|list }}",
      "['assistant', 'tool']" },
    { "{{ messages|selectattr('tool_calls', 'defined')|list|length }} {{ messages|selectattr('tool_calls')|list|length }}",
      "1 1" },
    { "{{ tools|map(attribute='function.name')|list }} {{ tools[0]|tojson }}",
      "['f'] {\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}}}" },
    { "{% for t in tools %}{{ t.function.parameters.properties|items|list }}{% endfor %}",
      "[('x', {'type': 'integer'})]" },
    { "{% set x = namespace() %}{% set x.a = 1 %}{% set x.b = x.a + 1 %}{{ x.b }}",
      "2" },
    { "{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set msgs = messages[1:] %}{% else %}{% set msgs = messages %}{% endif %}{{ sys }}{{ msgs|length }}",
      "S4" },
    { "{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}",
      "00 10 11 20 21 22 " },
    { "{% for i in range(5) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% else %}none{% endfor %}",
      "024" },
    { "{% macro f(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ f(b=1, a=2) }}",
      "21" },
    { "{% macro f(a) %}{{ a }}{% endmacro %}{{ f() }}|",
      "|" },
    { "{%- for message in messages %}\n    {%- if message.role == 'user' %}\n        {{- '<u>' + message.content }}\n    {%- else %}\n        {{- '<o>' }}\n    {%- endif %}\n{%- endfor %}\n",
      "<o><u>U1<o><o><u>U2" },
    { "{% filter upper %}abc {{ n }}{% endfilter %}",
      "ABC 3" },
    { "{% set s %}\n  line1\n  {% if true %}line2{% endif %}\n{% endset %}[{{ s }}]",
      "[  line1\nline2]" },
    { "{{ messages[1:3]|map(attribute='content')|list }} {{ (messages|last).content }} {{ (messages|first)['role'] }}",
      "['U1', 'A1'] U2 system" },
    { "{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}{{ k }}{{ v|tojson }}{% endfor %}",
      "a1b[1, 2]" },
    { "{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b') }}{{ {'a': 1}.get('b', 'dflt') }}",
      "1Nonedflt" },
    { "{% if n > 2 %}{% set n = n - 1 %}{% endif %}{{ n }}",
      "2" },
    { "{{ n if n is defined else 0 }}{{ m if m is defined else 'nm' }}",
      "3nm" },
    { "{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}{{ loop.nextitem|default('-') }};{% endfor %}",
      "-2;13;2-;" },
    { "{% macro r(n) %}{% if n %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(10) }}",
      "10987654321" },
    { "{{ '\\n'.join(['a', 'b']) }}|{{ ', '.join(messages|map(attribute='role')) }}",
      "a\nb|system, user, assistant, tool, user" },
    { "{% set a = [1, 2] %}{% set b = a + [3] %}{{ a }}{{ b }}",
      "[1, 2][1, 2, 3]" },
    { "{{ 'x' ~ none ~ 1.0 ~ [1] ~ {'a': none} }}",
      "xNone1.0[1]{'a': None}" },
    { "{% for m in messages %}{{ '<|' ~ m.role ~ '|>' if m.role != 'tool' else '' }}{% endfor %}",
      "<|system|><|user|><|assistant|><|user|>" },
    { "{{ messages[0].content.split('')|length if false else 'ok' }}",
      "ok" },
    { "{% for x in 'ab' %}{% for y in 'cd' %}{{ loop.index0 }}{{ x }}{{ y }}{% endfor %}{% endfor %}",
      "0ac1ad0bc1bd" },
    { "{% set y = 5 %}{% for x in [1] %}{{ y }}{% set y = 7 %}{{ y }}{% endfor %}{{ y }}",
      "575" },
    { "{% for x in [1, 2] %}{% if loop.first %}{% set z = 'first' %}{% endif %}{{ z }};{% endfor %}",
      "first;;" },
};

static void test_statements(void) {
    for (size_t i = 0; i < sizeof STMTS / sizeof STMTS[0]; i++)
        expect_(3000 + (int)i, STMTS[i].tmpl, STMT_CTX, STMTS[i].want);
}

/* select/reject/map/unique/items give generators in Jinja: always true, no len(), not
 * reversible, not JSON. Expected outputs from the same Python Jinja2 setup. */
static const char *GEN_CTX = "{\"messages\": [{\"role\": \"user\"}]}";
static const struct { const char *tmpl; bool ok; const char *want; } GENS[] = {
    { "{{ [1,2]|select|length }}",
      false, "object of type 'generator' has no len()" },
    { "{% if []|select %}T{% else %}F{% endif %}",
      true, "T" },
    { "{{ [1,2]|select|first }}",
      true, "1" },
    { "{{ [1,2]|select|last }}",
      false, "'generator' object is not reversible" },
    { "{{ [1,2]|map(\"string\")|join(\",\") }}",
      true, "1,2" },
    { "{{ [3,1]|select|sort }}",
      true, "[1, 3]" },
    { "{{ [1]|select is iterable }}{{ [1]|select is sequence }}",
      true, "TrueFalse" },
    { "{{ [1,2]|select|list|length }}",
      true, "2" },
    { "{{ [1,2]|unique|length }}",
      false, "object of type 'generator' has no len()" },
    { "{{ {\"a\":1}|items|length }}",
      false, "object of type 'generator' has no len()" },
    { "{{ [1,2]|select|tojson }}",
      false, "Object of type generator is not JSON serializable" },
    { "{{ [1,2]|select|reverse|list }}",
      true, "[2, 1]" },
    { "{{ [1,2]|select|count }}",
      false, "object of type 'generator' has no len()" },
    { "{{ 1 in [1,2]|select }}",
      true, "True" },
    { "{{ [1,2]|select|sum }}",
      true, "3" },
    { "{{ ([1,2]|select)[0] }}",
      true, "" },
    { "{{ [2,1]|select|max }}",
      true, "2" },
    { "{% if messages|selectattr(\"role\", \"equalto\", \"tool\") %}has{% endif %}",
      true, "has" },
    { "{{ {\"a\": 1}|items|list }}",
      true, "[('a', 1)]" },
    { "{% for k, v in {\"a\": 1}|items %}{{ k }}{{ v }}{% endfor %}",
      true, "a1" },
    { "{{ [1,2]|select + [3] }}",
      false, "unsupported operand type(s) for +: 'generator' and 'list'" },
};

static void test_generator_filters(void) {
    for (size_t i = 0; i < sizeof GENS / sizeof GENS[0]; i++) {
        if (GENS[i].ok) expect_(4000 + (int)i, GENS[i].tmpl, GEN_CTX, GENS[i].want);
        else expect_err_(4000 + (int)i, GENS[i].tmpl, GEN_CTX, GENS[i].want, 0);
    }
}

/* Random programs of set / namespace set / if / for / break / continue / macro / with /
 * set blocks over three variables, printing them at the end: scoping rules (loop bodies,
 * macros, with and set-block bodies are inner scopes; if is not). Outputs from the same
 * Python Jinja2 setup (3000 such programs were compared during development). */
static const struct { const char *tmpl, *want; } STMT_RANDOM[] = {
    { "{% set ns = namespace(x=0) %}[{{ ns.x }}]{% set b %}{% set a %}{% for c in [] %}[{{ c }}]{% set ns.x = (a|default(0)|string|length) %}{% endfor %}[{{ a }}]{% for i in range(3) %}{% set a = (a|default(0)|string|length) %}[{{ loop.index0 if loop is defined else 'n' }}]{% set ns.x = (a|default(0)|string|length) %}{% endfor %}{% endset %}{% set b = (c|default(0)|string|length) %}{% set b %}{% if true == 1 %}{% set a = 2 %}{% else %}{% set b = 1 %}{% set b = ns.x %}{% endif %}{% for a in range(3) %}[{{ ns.x }}]{% endfor %}{% if true %}[{{ b }}][{{ a }}]{% set ns.x = b %}{% else %}[{{ c }}]{% set b = loop.index if loop is defined else -1 %}{% endif %}{% with b = ns.x %}{% set a = a %}{% endwith %}{% endset %}{% for a in 'ab' %}{% set b %}{% set a = c %}{% if a is defined %}{% break %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% endset %}{% for i in range(3) %}{% if b is defined %}{% continue %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% endfor %}{% if a == 1 %}{% if a is defined %}{% break %}{% endif %}{% else %}{% set c = b %}{% set b = c %}{% endif %}{% if true %}{% set b = c %}{% if b is defined %}{% continue %}{% endif %}{% else %}{% set ns.x = ns.x %}{% set ns.x = c ~ 'x' %}{% endif %}{% endfor %}{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[0]|1" },
    { "{% set ns = namespace(x=0) %}[{{ ns.x }}]{% set c %}{% set c %}{% set a = a %}{% set b = loop.index if loop is defined else -1 %}{% endset %}[{{ loop.index0 if loop is defined else 'n' }}]{% endset %}{% set b = b %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[0]|[n]0" },
    { "{% set ns = namespace(x=0) %}[{{ c }}]{% set b %}[{{ c }}]{% set c = (c|default(0)|string|length) %}[{{ loop.index0 if loop is defined else 'n' }}]{% for b in [] %}{% for c in range(3) %}{% if a is defined %}{% break %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% set c = 3 %}{% endfor %}{% for b in [] %}{% set a = loop.index if loop is defined else -1 %}{% if b is defined %}{% continue %}{% endif %}{% set a = (c|default(0)|string|length) %}{% endfor %}{% endfor %}{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|[][n]0" },
    { "{% set ns = namespace(x=0) %}{% set b = ns.x %}{% set b %}{% set a = b %}{% macro m1(a, b=2) %}[{{ b }}]{% endmacro %}{{ m1(b=5, a=0) }}{% if true %}{% set c = c %}[{{ loop.index0 if loop is defined else 'n' }}]{% for a in 'ab' %}{% endfor %}{% set a = 3 %}{% else %}{% set a = loop.index if loop is defined else -1 %}{% set a = (b|default(0)|string|length) %}[{{ b }}]{% set c = b %}{% endif %}{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|[5][n]0" },
    { "{% set ns = namespace(x=0) %}[{{ loop.index0 if loop is defined else 'n' }}]{% set a %}{% set c = a %}{% set c = ns.x %}{% endset %}{% for a in 'ab' %}{% for i in 'ab' %}[{{ b }}]{% endfor %}{% set ns.x = ns.x %}{% set c = a %}{% endfor %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[n][][][][]|0" },
    { "{% set ns = namespace(x=0) %}[{{ a }}]{% set c = 1 %}{% for b in [] %}[{{ c }}]{% set ns.x = (c|default(0)|string|length) %}{% set ns.x = 2 %}{% for b in [] %}[{{ c }}]{% with c = loop.index if loop is defined else -1 %}[{{ a }}]{% endwith %}[{{ c }}]{% for c in 'ab' %}[{{ b }}]{% set a = 3 %}{% set ns.x = b ~ 'x' %}{% endfor %}{% endfor %}{% endfor %}{% set a %}{% if false == 1 %}{% if a is defined %}[{{ c }}]{% else %}[{{ c }}]{% endif %}{% set c = (b|default(0)|string|length) %}[{{ c }}]{% else %}{% with c = a %}{% endwith %}{% set c = ns.x %}{% endif %}[{{ ns.x }}]{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|[0]10" },
    { "{% set ns = namespace(x=0) %}{% macro m0(a, b=2) %}{% for a in 'ab' %}{% set a = 2 %}{% endfor %}{% for c in range(3) %}{% set b %}{% if a is defined %}{% break %}{% endif %}{% set c = c ~ 'x' %}[{{ ns.x }}]{% endset %}{% endfor %}{% set ns.x = a %}{% set c = b %}{% endmacro %}{{ m0(1) }}{% set b %}{% macro m1(a, b=2) %}{% with b = b %}{% set c = c %}{% endwith %}{% set c = ns.x %}{% endmacro %}{{ m1(b=5, a=0) }}{% set c = loop.index if loop is defined else -1 %}{% endset %}{% set a = (a|default(0)|string|length) %}{% set a %}[{{ c }}]{% set c %}{% set ns.x = loop.index if loop is defined else -1 %}{% if false %}{% else %}{% endif %}{% for i in [] %}{% if b is defined %}{% continue %}{% endif %}{% set c = b ~ 'y' %}{% endfor %}{% endset %}{% set b %}{% set c = ns.x %}[{{ c }}]{% endset %}{% macro m1(a, b=2) %}{% set c %}[{{ c }}]{% endset %}{% set ns.x = (b|default(0)|string|length) %}{% with a = b %}{% set ns.x = c %}{% endwith %}{% endmacro %}{{ m1(1) }}{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|[][]" },
    { "{% set ns = namespace(x=0) %}{% for a in [] %}{% set c = 1 %}{% set ns.x = (c|default(0)|string|length) %}{% endfor %}{% set ns.x = 1 %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|1" },
    { "{% set ns = namespace(x=0) %}[{{ c }}]{% if c == 1 %}{% set b = c %}{% else %}{% set ns.x = (c|default(0)|string|length) %}{% endif %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|1" },
    { "{% set ns = namespace(x=0) %}{% set ns.x = (c|default(0)|string|length) %}{% set b = c %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|1" },
    { "{% set ns = namespace(x=0) %}{% with a = c ~ 'z' %}{% set c = (a|default(0)|string|length) %}{% endwith %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}{% set a = b %}{% set ns.x = (c|default(0)|string|length) %}{% set c = ns.x %}{% set a = ns.x %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|111" },
    { "{% set ns = namespace(x=0) %}{% for c in [] %}[{{ b }}]{% if a is defined %}{% break %}{% endif %}{% endfor %}[{{ b }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|0" },
    { "{% set ns = namespace(x=0) %}[{{ b }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|0" },
    { "{% set ns = namespace(x=0) %}{% set ns.x = ns.x %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}{% for c in 'ab' %}{% for b in [1, 2] %}{% set a = c %}[{{ b }}]{% set ns.x = (b|default(0)|string|length) %}{% endfor %}{% endfor %}{% set ns.x = b %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[1][2][1][2]|" },
    { "{% set ns = namespace(x=0) %}[{{ a }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|0" },
    { "{% set ns = namespace(x=0) %}{% macro m0(a, b=2) %}{% set a = 0 %}{% set ns.x = loop.index if loop is defined else -1 %}{% endmacro %}{{ m0(1) }}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|-1" },
    { "{% set ns = namespace(x=0) %}[{{ c }}]{% for i in [1, 2] %}{% set ns.x = (a|default(0)|string|length) %}[{{ c }}]{% endfor %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[][][]|1" },
    { "{% set ns = namespace(x=0) %}{% set ns.x = (c|default(0)|string|length) %}{% if c is defined %}{% set a = b %}{% else %}{% set ns.x = c %}{% endif %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|" },
    { "{% set ns = namespace(x=0) %}[{{ ns.x }}]{% set c %}{% set c %}{% set a = a %}{% set b = loop.index if loop is defined else -1 %}{% endset %}[{{ loop.index0 if loop is defined else 'n' }}]{% endset %}{% set b = b %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[0]|[n]0" },
    { "{% set ns = namespace(x=0) %}{% set a = c %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}[{{ a }}]{% macro m0(a, b=2) %}{% set ns.x = loop.index if loop is defined else -1 %}{% endmacro %}{{ m0(c) }}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|-1" },
    { "{% set ns = namespace(x=0) %}{% set b = a %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}[{{ b }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|0" },
    { "{% set ns = namespace(x=0) %}[{{ loop.index0 if loop is defined else 'n' }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[n]|0" },
    { "{% set ns = namespace(x=0) %}{% with c = (c|default(0)|string|length) %}{% set b = c %}{% endwith %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}{% set a = (c|default(0)|string|length) %}{% for i in 'ab' %}{% set c = (a|default(0)|string|length) %}{% endfor %}[{{ ns.x }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[0]|10" },
    { "{% set ns = namespace(x=0) %}[{{ loop.index0 if loop is defined else 'n' }}]{% set ns.x = 2 %}[{{ c }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[n][]|2" },
    { "{% set ns = namespace(x=0) %}{% macro m0(a, b=2) %}[{{ a }}]{% endmacro %}{{ m0(1) }}{% set ns.x = 2 %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[1]|2" },
    { "{% set ns = namespace(x=0) %}{% set c = (a|default(0)|string|length) %}{% set ns.x = 3 %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|13" },
    { "{% set ns = namespace(x=0) %}{% set b = a %}{% set b = b %}{% with c = c %}[{{ loop.index0 if loop is defined else 'n' }}]{% set b = (b|default(0)|string|length) %}{% endwith %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[n]|0" },
    /* with call blocks and filtered for-else loops */
    { "{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set a = b ~ 'z' %}{% if b is defined %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set c = (c|default(0)|string|length) %}{% set b = (c|default(0)|string|length) %}{% endcall %}{% for c in range(3) %}{% if a is defined %}{% break %}{% endif %}{% set ns.x = 1 %}{% if a is defined %}{% break %}{% endif %}{% endfor %}{% set ns.x = loop.index if loop is defined else -1 %}{% set b = loop.index if loop is defined else -1 %}{% else %}{% if a is defined %}{% break %}{% endif %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% endcall %}{% for b in 'ab' %}{% if a is defined %}{% break %}{% endif %}{% set ns.x = a %}{% set c = ns.x %}{% if a is defined %}{% break %}{% endif %}{% endfor %}{% for b in [] %}{% set ns.x = ns.x %}{% set c = b %}{% endfor %}{% endif %}{% for i in 'ab' %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}[{{ ns.x }}]{% endcall %}{% if a %}{% if b is defined %}{% continue %}{% endif %}{% set c = (a|default(0)|string|length) %}{% set c = 1 %}{% else %}[{{ b }}]{% set a = loop.index if loop is defined else -1 %}{% set c = c %}{% set c = (c|default(0)|string|length) %}{% endif %}{% endfor %}{% endfor %}[{{ a }}]{% for c in [1, 2, 3] if loop is defined %}{% set a = ns.x %}{% set b %}{% if c == 1 %}{% set ns.x = c ~ 'z' %}{% else %}{% set ns.x = b ~ 'y' %}{% set b = c %}{% set c = (c|default(0)|string|length) %}[{{ a }}]{% endif %}{% endset %}{% set c = a ~ 'x' %}{% else %}E{% set a = loop.index if loop is defined else -1 %}{% set ns.x = (c|default(0)|string|length) %}[{{ ns.x }}]{% macro m1(a, b=2) %}{% for b in 'xy' if true %}{% if b is defined %}{% continue %}{% endif %}{% else %}E{% set c = c ~ 'z' %}{% endfor %}{% endmacro %}{{ m1(b=5, a=0) }}{% endfor %}{% set a = (c|default(0)|string|length) %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]E[1]E|11" },
    { "{% set ns = namespace(x=0) %}{% if a == 1 %}{% set c %}{% set c = (b|default(0)|string|length) %}[{{ loop.index0 if loop is defined else 'n' }}][{{ ns.x }}]{% endset %}{% set a = ns.x %}[{{ a }}]{% else %}{% for a in 'ab' %}{% for b in 'xy' if a is defined %}[{{ a }}]{% if b is defined %}{% continue %}{% endif %}{% else %}E{% set ns.x = ns.x %}{% set b = b %}{% endfor %}{% endfor %}{% set a = (c|default(0)|string|length) %}{% macro m1(a, b=2) %}{% set a = 1 %}{% set ns.x = a ~ 'x' %}{% set ns.x = c ~ 'y' %}{% endmacro %}{{ m1(1) }}{% set b %}[{{ b }}]{% endset %}{% endif %}{% if a %}{% for a in 'ab' %}{% set ns.x = b ~ 'y' %}{% set b = (a|default(0)|string|length) %}{% set a = (a|default(0)|string|length) %}{% endfor %}{% for c in [] %}{% if true == 1 %}{% set ns.x = b %}{% if a is defined %}{% break %}{% endif %}{% set c = ns.x %}{% else %}[{{ c }}]{% set b = c ~ 'y' %}{% set c = loop.index if loop is defined else -1 %}{% endif %}[{{ c }}]{% endfor %}{% set c %}{% set ns.x = 3 %}{% if false == 1 %}{% set c = 0 %}[{{ c }}][{{ a }}]{% else %}{% set b = a %}{% endif %}[{{ loop.index0 if loop is defined else 'n' }}]{% endset %}{% else %}{% set b %}[{{ a }}]{% endset %}{% macro m1(a, b=2) %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set b = b %}{% endcall %}{% if false is defined %}{% set a = (b|default(0)|string|length) %}{% set c = loop.index if loop is defined else -1 %}{% else %}{% endif %}{% for b in 'ab' %}[{{ a }}]{% endfor %}[{{ a }}]{% endmacro %}{{ m1(c) }}{% endif %}{% set ns.x = c %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[a][a]E[b][b]E|1[][n][n]" },
    { "{% set ns = namespace(x=0) %}{% for c in [] if true %}{% set ns.x = a %}{% else %}E{% for b in range(3) %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set a = ns.x %}[{{ b }}]{% endcall %}{% if a == 1 %}{% if b is defined %}{% continue %}{% endif %}{% else %}{% if b is defined %}{% continue %}{% endif %}{% endif %}{% if b is defined %}{% continue %}{% endif %}{% if true %}{% if a is defined %}{% break %}{% endif %}{% set b = a ~ 'z' %}{% set b = (c|default(0)|string|length) %}[{{ b }}]{% else %}{% set c = ns.x %}{% set a = ns.x %}{% endif %}{% endfor %}{% with c = c %}{% for b in [1, 2, 3] if true %}{% if b is defined %}{% continue %}{% endif %}{% else %}E[{{ ns.x }}]{% set b = b %}{% endfor %}{% set a = (c|default(0)|string|length) %}[{{ ns.x }}]{% set b = a %}{% endwith %}[{{ a }}]{% macro m1(a, b=2) %}{% set c = a ~ 'x' %}{% endmacro %}{{ m1(1) }}{% endfor %}{% for b in [] %}{% set ns.x = loop.index if loop is defined else -1 %}{% if false %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% endcall %}{% if true == 1 %}{% if b is defined %}{% continue %}{% endif %}{% else %}[{{ ns.x }}]{% if b is defined %}{% continue %}{% endif %}{% endif %}{% if b is defined %}{% continue %}{% endif %}{% else %}{% set c = b %}{% set b = a %}[{{ loop.index0 if loop is defined else 'n' }}]{% set a %}{% set a = a %}{% if a is defined %}{% break %}{% endif %}{% set c = b %}{% endset %}{% endif %}{% set b = (a|default(0)|string|length) %}{% endfor %}{% if b == 1 %}{% set a = (c|default(0)|string|length) %}[{{ loop.index0 if loop is defined else 'n' }}]{% set ns.x = (a|default(0)|string|length) %}{% else %}{% set a = (a|default(0)|string|length) %}{% set b = ns.x %}[{{ a }}]{% set b = ns.x %}{% endif %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "E<[0]><[1]><[2]>E[0][0][][1]|100" },
    { "{% set ns = namespace(x=0) %}{% for c in 'ab' %}{% if false %}{% if b is defined %}{% continue %}{% endif %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set c = 3 %}{% endcall %}{% if b == 1 %}{% set ns.x = ns.x %}{% else %}{% if b is defined %}{% continue %}{% endif %}{% set ns.x = b %}{% endif %}[{{ loop.index0 if loop is defined else 'n' }}]{% else %}{% set b = b %}{% for c in [1, 2, 3] if loop is defined %}{% set a = 1 %}{% if b is defined %}{% continue %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% else %}E{% set b = (a|default(0)|string|length) %}{% if b is defined %}{% continue %}{% endif %}[{{ loop.index0 if loop is defined else 'n' }}]{% endfor %}[{{ ns.x }}]{% endif %}{% set b = b %}{% set b %}[{{ b }}]{% set a = (a|default(0)|string|length) %}{% if true %}{% if a is defined %}{% break %}{% endif %}{% set ns.x = c %}{% else %}[{{ c }}]{% set b = 2 %}[{{ c }}]{% endif %}{% set b %}{% set a = ns.x %}{% endset %}{% endset %}{% endfor %}{% for c in 'ab' %}{% for b in [1, 2, 3] if loop is defined %}{% set b = (a|default(0)|string|length) %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}[{{ loop.index0 if loop is defined else 'n' }}]{% endcall %}{% else %}E{% set ns.x = 0 %}[{{ loop.index0 if loop is defined else 'n' }}][{{ b }}]{% endfor %}{% endfor %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "EE<[0]><[1]><[2]><[0]><[1]><[2]>|0" },
    { "{% set ns = namespace(x=0) %}{% if false == 1 %}{% set c = c ~ 'z' %}[{{ b }}][{{ ns.x }}]{% else %}[{{ loop.index0 if loop is defined else 'n' }}]{% endif %}{% macro m0(a, b=2) %}{% set b = c %}{% for b in range(3) %}{% if a %}{% set c = c %}{% else %}{% if b is defined %}{% continue %}{% endif %}[{{ c }}]{% endif %}{% set ns.x = ns.x %}{% endfor %}{% for i in [1, 2] %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}[{{ ns.x }}]{% endcall %}{% for a in [1, 2, 3] if loop is defined %}[{{ loop.index0 if loop is defined else 'n' }}]{% if a is defined %}{% break %}{% endif %}{% else %}E{% if b is defined %}{% continue %}{% endif %}{% endfor %}[{{ a }}]{% endfor %}[{{ ns.x }}]{% endmacro %}{{ m0(c) }}{% set b = b %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[n]<[0]>[0]E[]<[0]>[0]E[][0]|0" },
    { "{% set ns = namespace(x=0) %}{% for i in 'ab' %}{% for c in [1, 2, 3] if loop is defined %}{% set b %}[{{ loop.index0 if loop is defined else 'n' }}]{% endset %}{% set b = (a|default(0)|string|length) %}{% set a = a %}{% else %}E{% set b %}{% endset %}{% for b in [1, 2] %}{% set ns.x = b %}[{{ ns.x }}]{% endfor %}{% set b = a ~ 'z' %}{% set b = b %}{% endfor %}{% set b %}{% for i in [1, 2] %}{% set ns.x = a %}{% if b is defined %}{% continue %}{% endif %}{% endfor %}{% set b %}{% if b is defined %}{% continue %}{% endif %}{% if a is defined %}{% break %}{% endif %}{% endset %}{% set ns.x = 1 %}{% endset %}{% endfor %}{% set ns.x = b %}{% if a == 1 %}{% set ns.x = 3 %}{% macro m1(a, b=2) %}{% set ns.x = ns.x %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set c = (c|default(0)|string|length) %}{% endcall %}{% endmacro %}{{ m1(b=5, a=0) }}{% else %}{% set ns.x = loop.index if loop is defined else -1 %}{% set b = a ~ 'y' %}{% if a == 1 %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set c = (b|default(0)|string|length) %}{% endcall %}{% else %}{% set c %}[{{ ns.x }}]{% set ns.x = 0 %}[{{ c }}]{% endset %}{% for b in [] %}{% if a is defined %}{% break %}{% endif %}{% endfor %}{% endif %}{% set ns.x = 0 %}{% endif %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|y[-1][]0" },
    { "{% set ns = namespace(x=0) %}{% macro w0() %}<{{ caller() }}>{% endmacro %}{% call w0() %}{% set b = 0 %}{% set ns.x = a ~ 'x' %}{% set c = loop.index if loop is defined else -1 %}{% endcall %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "<>|x" },
    { "{% set ns = namespace(x=0) %}[{{ a }}]{% macro m0(a, b=2) %}{% for i in [] %}[{{ ns.x }}]{% endfor %}{% macro w1() %}<{{ caller() }}>{% endmacro %}{% call w1() %}[{{ loop.index0 if loop is defined else 'n' }}]{% endcall %}{% endmacro %}{{ m0(1) }}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]<[n]>|0" },
    { "{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set c %}{% if b is defined %}{% continue %}{% endif %}{% set b = loop.index if loop is defined else -1 %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% endcall %}{% endset %}{% endfor %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|0" },
    { "{% set ns = namespace(x=0) %}{% macro m0(a, b=2) %}[{{ c }}]{% for c in [1, 2] %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}[{{ ns.x }}]{% endcall %}[{{ b }}]{% endfor %}{% set c = 2 %}{% endmacro %}{{ m0(c) }}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]<[0]>[2]<[0]>[2]|0" },
    { "{% set ns = namespace(x=0) %}{% set b = b %}{% macro w0() %}<{{ caller() }}>{% endmacro %}{% call w0() %}{% set a = ns.x %}[{{ loop.index0 if loop is defined else 'n' }}]{% set b = (c|default(0)|string|length) %}[{{ b }}]{% endcall %}[{{ b }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "<[n][1]>[]|0" },
    { "{% set ns = namespace(x=0) %}{% set ns.x = 1 %}{% set b %}{% for i in range(3) %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set ns.x = (a|default(0)|string|length) %}{% endcall %}[{{ b }}]{% endfor %}{% set ns.x = a ~ 'y' %}{% endset %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "|<>[]<>[]<>[]y" },
    { "{% set ns = namespace(x=0) %}{% macro w0() %}<{{ caller() }}>{% endmacro %}{% call w0() %}{% set a = b %}{% for i in range(3) %}{% set b = (b|default(0)|string|length) %}[{{ loop.index0 if loop is defined else 'n' }}]{% endfor %}{% endcall %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "<[0][1][2]>|0" },
    { "{% set ns = namespace(x=0) %}{% for i in 'ab' %}{% if false %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% set a = ns.x %}{% endcall %}{% else %}[{{ loop.index0 if loop is defined else 'n' }}]{% endif %}[{{ a }}]{% set ns.x = c %}{% endfor %}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[0][][1][]|" },
    { "{% set ns = namespace(x=0) %}{% for c in [] %}{% for b in [1, 2] %}{% set c = 2 %}{% set a = ns.x %}{% macro w2() %}<{{ caller() }}>{% endmacro %}{% call w2() %}{% endcall %}{% if b is defined %}{% continue %}{% endif %}{% endfor %}{% endfor %}[{{ b }}]|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "[]|0" },
    { "{% set ns = namespace(x=0) %}{% set a = b %}{% macro m0(a, b=2) %}{% macro w1() %}<{{ caller() }}>{% endmacro %}{% call w1() %}[{{ loop.index0 if loop is defined else 'n' }}]{% set c = c %}{% endcall %}{% endmacro %}{{ m0(1) }}|{{ a }}{{ b }}{{ c }}{{ ns.x }}",
      "<[n]>|0" },
};

static void test_scoping_random(void) {
    for (size_t i = 0; i < sizeof STMT_RANDOM / sizeof STMT_RANDOM[0]; i++)
        expect_(5000 + (int)i, STMT_RANDOM[i].tmpl, "{}", STMT_RANDOM[i].want);
}

/* ---------------------------------------------------------------- hand-derived
 * Expected outputs worked out from Jinja2's documented rules. */
static void test_whitespace_control(void) {
    /* trim_blocks drops the newline after a block tag; lstrip_blocks drops the
     * indentation before it; {{ }} keeps both; one trailing newline is dropped. */
    EXPECT("{% if true %}\nA\n{% endif %}\nB\n", "A\nB");
    EXPECT("  {% if true %}\n  A\n  {% endif %}\n", "  A\n");
    EXPECT("  {{ 'x' }}\n", "  x");
    EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
    EXPECT("a\n{# note #}\nb", "a\nb");
    EXPECT("a {%+ if true %}b{% endif %}", "a b");
    EXPECT("{% if true +%}\nx{% endif %}", "\nx");
    EXPECT("{{- ' a ' -}}", " a ");
    EXPECT("x\r\ny\r\n\r\n", "x\ny\n");
    EXPECT("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
    /* unlike other block tags, {% raw %} has no trim_blocks (checked against Jinja2) */
    EXPECT("  {% raw %}\n  x\n  {% endraw %}\n  y", "\n  x\n  y");
}

static void test_scoping_and_loops(void) {
    EXPECT("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}", "1");
    EXPECT("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "2");
    EXPECT("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "6");
    EXPECT("{% for i in 'ab' %}{{ loop.index }}{{ i }}{{ loop.last }} {% endfor %}", "1aFalse 2bTrue ");
    EXPECT("{% for i in [1,2,3,4] if i is even %}{{ loop.index }}/{{ loop.length }}:{{ i }} {% endfor %}", "1/2:2 2/2:4 ");
    EXPECT("{% for i in [] %}x{% else %}none{% endfor %}", "none");
    /* Jinja's else runs unless some iteration reached the end of the body, so an
     * iteration left by break or continue does not count (checked against Jinja2) */
    EXPECT("{% for i in [1, 2] %}{% continue %}{% else %}E{% endfor %}", "E");
    EXPECT("{% for i in [1, 2] %}{% break %}{% else %}E{% endfor %}", "E");
    EXPECT("{% for i in [1, 2] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% else %}E{% endfor %}", "1");
    EXPECT("{% for i in [1, 2] %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}E{% endfor %}", "2");
    EXPECT("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", "37");
    EXPECT("{% macro m(x, y=x * 2) %}{{ x }},{{ y }}{% endmacro %}{{ m(1) }} {{ m(1, y=5) }}", "1,2 1,5");
    EXPECT("{% for m in messages %}{{ bos_token }}{{ m.role }}{{ eos_token }}{% endfor %}", "<s>user</s>");
    EXPECT("{{ add_generation_prompt }}", "True");
}

static void test_values_and_filters(void) {
    EXPECT("{{ 1 }} {{ 1.0 }} {{ 2.5e-5 }} {{ none }} {{ [1, 'a', none, true] }} {{ {'k': 'v'} }}",
           "1 1.0 2.5e-05 None [1, 'a', None, True] {'k': 'v'}");
    EXPECT("{{ {'a': [1, 2.5, 'é']} | tojson }}", "{\"a\": [1, 2.5, \"é\"]}");
    EXPECT("{{ [1, {'a': 2}] | tojson(indent=2) }}", "[\n  1,\n  {\n    \"a\": 2\n  }\n]");
    EXPECT("{{ 'héllo'|length }} {{ 'héllo'[1] }} {{ 'héllo'[::-1] }} {{ 'héllo'|upper }}", "5 é olléh HÉLLO");
    EXPECT("{{ messages[0].content }}{{ messages[0]['role'] }}{{ messages[-1].missing is defined }}", "hiuserFalse");
    EXPECT("{{ s|trim }}|{{ s.split() }}", "Hello World|['Hello', 'World']");
    /* JSON numbers keep Python's int/float distinction ("1.0" stays a float) */
    EXPECT_CTX("{{ a }} {{ b }} {{ c }} {{ a is float }}{{ b is integer }} {{ {'a': a}|tojson }}",
               "{\"s\": \"7 \\\" 8\", \"a\": 1.0, \"b\": 1, \"c\": [2.50, -0.0, 1e5, 1E-7, -3]}",
               "1.0 1 [2.5, -0.0, 100000.0, 1e-07, -3] TrueTrue {\"a\": 1.0}");
    /* Jinja's ** is left-associative, unlike Python's */
    /* item access on non-containers is Undefined (fuzzer find: used to crash) */
    EXPECT("{{ 3['a'] }}|{{ none['x'] }}|{{ 1.5['y'] is defined }}|{{ true[0] }}", "||False|");
    EXPECT("{{ 7 // -2 }} {{ 7 % -2 }} {{ 2 ** 3 ** 2 }} {{ 10 / 4 }}", "-4 -1 64 2.5");
}

/* ---------------------------------------------------------------- hostile templates
 * Each must fail with TH_ERR_FORMAT and a message naming the limit, quickly,
 * without output (and without crashing under ASan/UBSan). */
static char *repeat_str(const char *a, int n, const char *mid, const char *b) {
    size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *p = s;
    for (int i = 0; i < n; i++) { memcpy(p, a, la); p += la; }
    memcpy(p, mid, lm); p += lm;
    for (int i = 0; i < n; i++) { memcpy(p, b, lb); p += lb; }
    *p = 0;
    return s;
}

static void test_hostile_templates(void) {
    EXPECT_ERR("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nesting too deep");
    EXPECT_ERR("{% macro f(n) %}x{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nesting too deep");
    EXPECT_ERR("{% for i in range(10**9) %}x{% endfor %}", "loop limit");
    EXPECT_ERR("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(2) %}{% endfor %}{% endfor %}{% endfor %}",
               "loop limit");
    EXPECT_ERR("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "output exceeds");
    expect_err_(__LINE__, "{{ 'x' * 101 }}", NULL, "output exceeds the limit of 100 bytes", 100);
    {
        th_chat_opts o = { .max_output = 100 };
        char *out = NULL;
        CHECK(th_chat_render("{{ 'x' * 100 }}", CTX, &o, &out) == TH_OK && strlen(out) == 100, "%s", th_last_error());
        free(out);
    }
    EXPECT_ERR("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "exceeds");
    EXPECT_ERR("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
               "memory limit");
    EXPECT_ERR("{{ 'x' * 10**12 }}", "memory limit");
    EXPECT_ERR("{{ [1, 2] * 10**12 }}", "memory limit");
    EXPECT_ERR("{{ 2 ** 64 }}", "integer overflow");
    EXPECT_ERR("{{ 9223372036854775807 + 1 }}", "integer overflow");
    EXPECT_ERR("{{ 99999999999999999999 }}", "integer literal too large");
    EXPECT_ERR("{% set s = 'x' * 1000000 %}{% for i in range(999999) %}{% if 'y' in s %}{% endif %}{% endfor %}",
               "work limit");
    EXPECT_ERR("{{ caller() }}", "'caller' is undefined");
    EXPECT_ERR("{{ 'x'|indent(10**9) }}", "too large");
    static const struct { const char *open, *mid, *close, *want; } nest[] = {
        { "(", "1", ")", "nesting too deep" },
        { "[", "1", "]", "nesting too deep" },
        { "{'a': ", "1", "}", "nesting too deep" },
        { "not ", "x", "", "nesting too deep" },
        { "-", "1", "", "nesting too deep" },
        { "", "x", ".a", "nesting too deep" },
        { "", "1", " + 1", "nesting too deep" },
        { "f(", "1", ")", "nesting too deep" },
    };
    for (size_t i = 0; i < sizeof nest / sizeof nest[0]; i++) {
        char *e = repeat_str(nest[i].open, 20000, nest[i].mid, nest[i].close);
        char *t = malloc(strlen(e) + 8);
        sprintf(t, "{{ %s }}", e);
        expect_err_(__LINE__, t, NULL, nest[i].want, 0);
        free(e);
        free(t);
    }
    char *ifs = repeat_str("{% if true %}", 20000, "x", "{% endif %}");
    EXPECT_ERR(ifs, "nesting too deep");
    free(ifs);
    char *fors = repeat_str("{% for i in [1] %}", 20000, "x", "{% endfor %}");
    EXPECT_ERR(fors, "nesting too deep");
    free(fors);
    /* unterminated constructs */
    EXPECT_ERR("{{ x", "unexpected end of template");
    EXPECT_ERR("{% if x", "unexpected end of template");
    EXPECT_ERR("{% if x %}", "Unexpected end of template");
    EXPECT_ERR("{% for x in y %}{% if x %}{% endfor %}", "Encountered unknown tag 'endfor'");
    EXPECT_ERR("{# x", "Missing end of comment tag");
    EXPECT_ERR("{% raw %}x", "missing end of raw directive");
    EXPECT_ERR("{{ 'abc }}", "unexpected char");
    EXPECT_ERR("{% macro m() %}", "endmacro");
    EXPECT_ERR("{{ (1 }}", "unexpected '}'");
    EXPECT_ERR("{{ ) }}", "unexpected ')'");
    EXPECT_ERR("{% include 'x' %}", "unknown tag 'include'");
    EXPECT_ERR("a{% break %}b", "'break' outside loop");
    EXPECT_ERR("{% for i in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", "'continue' outside loop");
    EXPECT_ERR("{% for i in [] %}{% else %}{% break %}{% endfor %}", "'break' outside loop");
    EXPECT_ERR("{{ '\\x4' }}", "truncated");
    EXPECT_ERR("{{ x @ y }}", "unexpected char '@'");
}

static void test_api(void) {
    char *out = (char *)1;
    CHECK(th_chat_render(NULL, "{}", NULL, &out) == TH_ERR_ARG, "NULL template");
    CHECK(th_chat_render("x", NULL, NULL, &out) == TH_ERR_ARG, "NULL context");
    CHECK(th_chat_render("x", "{\"messages\": [", NULL, &out) == TH_ERR_FORMAT && out == NULL, "bad JSON");
    CHECK(strstr(th_last_error(), "JSON") != NULL, "%s", th_last_error());
    CHECK(th_chat_render("x", "[1]", NULL, &out) == TH_ERR_FORMAT, "JSON not an object");
    CHECK(th_chat_render("[{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}]", "{}", NULL, &out) == TH_OK,
          "%s", th_last_error());
    CHECK(!strcmp(out, "[False]"), "got %s", out);
    free(out);
    /* a raise_exception() message is reported exactly; other errors say where they come from */
    CHECK(th_chat_render("{{ raise_exception('Bad role') }}", "{}", NULL, &out) == TH_ERR_FORMAT && out == NULL, "raise");
    CHECK(!strcmp(th_last_error(), "Bad role"), "%s", th_last_error());
    CHECK(th_chat_render("{{ x.y }}", "{}", NULL, &out) == TH_ERR_FORMAT, "undefined");
    CHECK(!strcmp(th_last_error(), "chat template: line 1: 'x' is undefined"), "%s", th_last_error());
    CHECK(th_chat_render("a\n{% for m in [1] %}\n{{ m.x.y }}{% endfor %}", "{}", NULL, &out) == TH_ERR_FORMAT, "undefined");
    CHECK(!strcmp(th_last_error(), "chat template: line 3: 'int object' has no attribute 'x'"), "%s", th_last_error());
    /* deeply nested JSON context */
    char *deep = repeat_str("[", 5000, "1", "]");
    char *ctx = malloc(strlen(deep) + 16);
    sprintf(ctx, "{\"x\": %s}", deep);
    th_status s = th_chat_render("{{ x|length }}", ctx, NULL, &out);
    CHECK(s == TH_ERR_FORMAT, "deep JSON: status %d", s);
    if (s == TH_OK) free(out);
    free(deep);
    free(ctx);
}

int main(void) {
    RUN(test_fixture_templates);
    RUN(test_jinja_semantics);
    RUN(test_fixture_templates_tools);
    RUN(test_whitespace_control);
    RUN(test_whitespace_random);
    RUN(test_statements);
    RUN(test_generator_filters);
    RUN(test_scoping_random);
    RUN(test_scoping_and_loops);
    RUN(test_values_and_filters);
    RUN(test_hostile_templates);
    RUN(test_api);
    return CHECK_DONE();
}
