"""toolcall_templates.py — tool calling through every chat-template fixture: a
conversation with `tools`, an assistant message with `tool_calls` (arguments as an
object, as the server passes them) and a `role: "tool"` result, rendered by
`theseus template` and by Python's Jinja2 the way Hugging Face transformers applies
chat templates (sandboxed, trim_blocks, lstrip_blocks, loop controls,
raise_exception, strftime_now at SOURCE_DATE_EPOCH, tojson with ensure_ascii=False);
byte-identical output, or both raise. Prints ok/FAIL lines (run by t_structured.sh)."""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.sandbox
from jinja2.ext import loopcontrols

THESEUS = os.environ.get("THESEUS", "build/theseus")
DIR = os.path.join(os.environ.get("SHARED", "../shared"), "fixtures", "chat-templates")
EPOCH = 1767312000

CTX = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": "{\"temperature\": 21}"},
        {"role": "user", "content": "Thanks! And in Tokyo?"},
    ],
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "The current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                                                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city"]}}}],
}


def hf_render(src, ctx):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(EPOCH, tz=datetime.timezone.utc).strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(src).render(messages=ctx["messages"], tools=ctx["tools"], add_generation_prompt=True,
                                       bos_token="<BOS>", eos_token="<EOS>")


def check(name, src, ctx, tag, env):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ctx, f)
        path = f.name
    try:
        want, want_err = hf_render(src, ctx), None
    except Exception as e:  # noqa: BLE001 - the template's own error
        want, want_err = None, str(e)
    r = subprocess.run([THESEUS, "template", "--template", os.path.join(DIR, name), "--messages", path,
                        "--add-generation-prompt", "--bos", "<BOS>", "--eos", "<EOS>"], capture_output=True, env=env)
    os.unlink(path)
    got = r.stdout.decode("utf-8", "replace")
    label = f"toolcall_template_{tag}_{name[:-6]}"
    if want_err is not None:
        ok = r.returncode == 1 and not got
        print(f"ok {label} (both raise: {want_err[:60]})" if ok else
              f"FAIL {label} (Jinja2 raised {want_err[:80]!r}; ours exit {r.returncode})")
    elif r.returncode == 0 and got == want:
        print(f"ok {label}")
    else:
        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
        print(f"FAIL {label} (exit {r.returncode} {r.stderr.decode()[:120]!r}; first difference at {i}: "
              f"ours {got[i:i + 60]!r} Jinja2 {want[i:i + 60]!r})")


def main():
    if not os.path.isdir(DIR):
        print("SKIP toolcall_templates (no fixtures)")
        return 0
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    # the whole conversation, and one that ends with the tool's result (Mistral's
    # template refuses two user turns around skipped tool messages)
    short = {"messages": CTX["messages"][:4], "tools": CTX["tools"]}
    for name in sorted(os.listdir(DIR)):
        if name.endswith(".jinja"):
            src = open(os.path.join(DIR, name)).read()
            check(name, src, CTX, "turns", env)
            check(name, src, short, "result", env)
    return 0


sys.exit(main())
