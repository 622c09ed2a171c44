"""test_structured.py — structured output and tool calls end to end, through the
official `openai` package and plain HTTP, with SmolLM2: response_format json_schema
over 20 seeded samples always parses and validates (Python's jsonschema); json_object
gives an object; a `grammar` of yes|no yields only those; bad grammars and schemas are
400 naming the problem; tool_choice required and a named function return tool_calls
whose arguments parse as JSON and validate against the tool's parameters, streaming
and not (the streamed deltas assembled as the openai client does); a conversation with
an assistant tool call and a tool result in the history is accepted."""
import json

import jsonschema

from common import check, client, expect_error, finish, http, run

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3}},
          "required": ["name", "age", "pets"]}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


def t_json_schema_20_seeds():
    c = client()
    bad = []
    for seed in range(20):
        r = c.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Invent a person with a name, an age and pets, as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
            seed=seed, temperature=1.0, max_tokens=120)
        ch = r.choices[0]
        check(ch.finish_reason == "stop", f"seed {seed}: finish {ch.finish_reason}: {ch.message.content!r}")
        try:
            jsonschema.validate(json.loads(ch.message.content), PERSON)
        except (ValueError, jsonschema.ValidationError) as e:
            bad.append((seed, ch.message.content, str(e)[:100]))
    check(not bad, f"{len(bad)} of 20 invalid: {bad[:3]}")
    return "20 of 20 parse and validate"


def t_json_object():
    st, r = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Describe a cat."}],
                                                  "response_format": {"type": "json_object"}, "seed": 3, "max_tokens": 150})
    check(st == 200, f"{st} {r}")
    ch = r["choices"][0]
    if ch["finish_reason"] == "stop":
        check(isinstance(json.loads(ch["message"]["content"]), dict), f"not an object: {ch['message']['content']!r}")
    return ch["finish_reason"]


def t_grammar_yes_no():
    seen = set()
    for seed in range(8):
        st, r = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Write a poem."}],
                                                      "grammar": 'root ::= "yes" | "no"', "seed": seed,
                                                      "temperature": 1.5, "max_tokens": 16})
        check(st == 200, f"{st} {r}")
        text = r["choices"][0]["message"]["content"]
        check(text in ("yes", "no"), f"seed {seed}: {text!r}")
        seen.add(text)
    st, r = http("POST", "/v1/completions", {"prompt": "Is the sky blue?", "grammar": 'root ::= "yes" | "no"',
                                             "max_tokens": 8, "stream": False})
    check(st == 200 and r["choices"][0]["text"] in ("yes", "no"), f"completions: {st} {r}")
    return f"only {sorted(seen)}"


def t_json_schema_field():
    st, r = http("POST", "/v1/completions", {"prompt": "A number:", "json_schema": {"type": "integer", "minimum": 0},
                                             "max_tokens": 12, "seed": 1})
    check(st == 200, f"{st} {r}")
    if r["choices"][0]["finish_reason"] == "stop":
        v = json.loads(r["choices"][0]["text"])
        check(isinstance(v, int) and v >= 0, f"{v!r}")
    return r["choices"][0]["text"].strip()[:20]


def t_invalid_structured():
    cases = [({"grammar": "root ::= foo"}, ["grammar", "undefined", "foo"]),
             ({"grammar": 3}, ["grammar"]),
             ({"json_schema": {"type": "array", "uniqueItems": True}}, ["json_schema", "uniqueItems"]),
             ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}}},
              ["response_format", "not"]),
             ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, ["name"]),
             ({"response_format": {"type": "xml"}}, ["response_format"]),
             ({"grammar": 'root ::= "a"', "json_schema": {}}, ["only one"]),
             ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, ["nope"]),
             ({"tools": [{"type": "function", "function": {}}]}, ["tools[0]"]),
             ({"tool_choice": "required"}, ["tools"]),
             ({"tool_choice": "sometimes", "tools": [WEATHER]}, ["tool_choice"]),
             ({"tools": [WEATHER], "tool_choice": "required", "grammar": 'root ::= "a"'}, ["tools"])]
    for extra, words in cases:
        body = {"messages": ASK, "max_tokens": 4}
        body.update(extra)
        st, r = http("POST", "/v1/chat/completions", body)
        expect_error(st, r, 400, words)
    st, r = http("POST", "/v1/completions", {"prompt": "x", "tools": [WEATHER]})
    expect_error(st, r, 400, ["tools", "chat"])
    return f"{len(cases) + 1} refusals name the problem"


def check_calls(calls, tools_by_name, want=None):
    check(calls, "no tool_calls")
    for tc in calls:
        check(tc.type == "function" and tc.id, f"bad call {tc}")
        check(tc.function.name in tools_by_name, f"unknown function {tc.function.name}")
        if want:
            check(tc.function.name == want, f"called {tc.function.name}, not {want}")
        args = json.loads(tc.function.arguments)
        jsonschema.validate(args, tools_by_name[tc.function.name]["function"]["parameters"])
    return calls[0].function.name + " " + calls[0].function.arguments


def t_tool_required():
    c = client()
    r = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER, ADD], tool_choice="required", max_tokens=100)
    ch = r.choices[0]
    check(ch.finish_reason == "tool_calls", f"finish {ch.finish_reason}: {ch.message}")
    return check_calls(ch.message.tool_calls, {"get_weather": WEATHER, "add": ADD})


def t_tool_named():
    c = client()
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is 2 plus 3?"}],
                                  tools=[WEATHER, ADD], tool_choice={"type": "function", "function": {"name": "add"}},
                                  max_tokens=100)
    ch = r.choices[0]
    check(ch.finish_reason == "tool_calls", f"finish {ch.finish_reason}: {ch.message}")
    return check_calls(ch.message.tool_calls, {"get_weather": WEATHER, "add": ADD}, want="add")


def t_tool_streaming():
    c = client()
    stream = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice="required",
                                       max_tokens=100, stream=True)
    calls, finish_reason, content = {}, None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                e["id"] = tc.id
            if tc.function and tc.function.name:
                e["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                e["arguments"] += tc.function.arguments
        finish_reason = chunk.choices[0].finish_reason or finish_reason
    check(finish_reason == "tool_calls", f"finish {finish_reason}")
    check(calls and all(e["id"] and e["name"] == "get_weather" for e in calls.values()), f"calls {calls}")
    for e in calls.values():
        jsonschema.validate(json.loads(e["arguments"]), WEATHER["function"]["parameters"])
    check("<tool_call>" not in content, f"the call leaked into content: {content!r}")
    return f"{len(calls)} call(s): {calls[0]['arguments']}"


def t_tool_history():
    c = client()
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "sky": "clear"}'}]
    r = c.chat.completions.create(model="m", messages=msgs, tools=[WEATHER], tool_choice="auto", max_tokens=40, seed=1)
    ch = r.choices[0]
    check(ch.finish_reason in ("stop", "length", "tool_calls"), f"finish {ch.finish_reason}")
    check(r.usage.prompt_tokens > 100, f"the tools and history were not rendered: {r.usage.prompt_tokens} prompt tokens")
    return f"{r.usage.prompt_tokens} prompt tokens, finish {ch.finish_reason}"


def t_tool_choice_none():
    st, r = http("POST", "/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "tool_choice": "none",
                                                  "max_tokens": 8})
    check(st == 200 and "tool_calls" not in r["choices"][0]["message"], f"{st} {r}")
    return "plain text"


run("structured_json_schema_20_seeds", t_json_schema_20_seeds)
run("structured_json_object", t_json_object)
run("structured_grammar_yes_no", t_grammar_yes_no)
run("structured_json_schema_field", t_json_schema_field)
run("structured_invalid", t_invalid_structured)
run("tools_required", t_tool_required)
run("tools_named", t_tool_named)
run("tools_streaming", t_tool_streaming)
run("tools_history", t_tool_history)
run("tools_choice_none", t_tool_choice_none)
finish()
