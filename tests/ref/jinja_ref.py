#!/usr/bin/env python3
"""jinja_ref.py — what Jinja2 renders for each chat template: the reference of tests/test_jinja.c.

    /usr/bin/python3 tests/ref/jinja_ref.py --out build/fixtures/jinja --hf .cache/hf-tokenizers

Renders, with Debian's python3-jinja2 and the environment transformers'
apply_chat_template builds (ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True), the loopcontrols extension and {% generation %}, its
tojson filter, the raise_exception and strftime_now globals; the clock fixed
at 2024-07-26 12:34:56):

- every template of tests/ref/templates/*.jinja and the chat_template of the
  real tokenizer_config.json files under --hf (llama3, qwen2_5, qwen3), over
  every conversation of tests/ref/chat_cases.json, with the variables
  apply_chat_template passes (messages, tools, documents,
  add_generation_prompt, bos_token, eos_token, and the case's own);
- every unit of tests/ref/jinja_units.txt (its header says the format).

Writes OUT/cases.json: {"jinja2": version, "now": [Y, M, D, h, m, s, wday,
yday], "templates": {name: source}, "cases": [{"name", "template", "vars",
then "output": text or "error": {"type", "message"}, "loose": bool}]}. The
C test renders the same source with the same variables and compares.
"""
import argparse, datetime, glob, json, os, sys

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = datetime.datetime(2024, 7, 26, 12, 34, 56)

# The special tokens each fixture template's model has (apply_chat_template passes them).
TOKENS = {
    "chatml": ("<s>", "<|im_end|>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "zephyr": ("<s>", "</s>"),
    "llama2": ("<s>", "</s>"),
    "mistral_v01": ("<s>", "</s>"),
    "mistral_v03": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "phi4": ("<|endoftext|>", "<|im_end|>"),
    "deepseek_llm": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek_r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "hermes_tools": ("<|begin_of_text|>", "<|im_end|>"),
    "llama3_1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3_2": ("<|begin_of_text|>", "<|eot_id|>"),
}
HF_MODELS = ["llama3", "qwen2_5", "qwen3"]


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: the body, rendered as a caller."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def environment():
    """transformers' _compile_jinja_template, with the clock fixed."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(source, variables):
    """{"output": text} or {"error": {"type", "message"}} (compile errors included)."""
    try:
        return {"output": environment().from_string(source).render(**variables)}
    except Exception as e:  # every failure is an expected result here
        message = getattr(e, "message", None)
        return {"error": {"type": type(e).__name__, "message": str(e) if message is None else str(message)}}


def token(v):
    """A tokenizer_config.json special token: a string, {"content": ...}, or null."""
    return v.get("content") if isinstance(v, dict) else v


def load_templates(hf_dir):
    """{name: (source, bos, eos)}: the fixtures, then the real ones."""
    out = {}
    for path in sorted(glob.glob(os.path.join(HERE, "templates", "*.jinja"))):
        name = os.path.basename(path)[:-6]
        if name not in TOKENS:
            sys.exit("jinja_ref.py: %s has no special tokens in TOKENS" % path)
        with open(path, encoding="utf-8", newline="") as f:
            out[name] = (f.read(),) + TOKENS[name]
    for m in HF_MODELS:
        path = os.path.join(hf_dir, m, "tokenizer_config.json")
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        tpl = cfg.get("chat_template")
        if not isinstance(tpl, str):
            sys.exit("jinja_ref.py: %s has no chat_template string" % path)
        out["hf_" + m] = (tpl, token(cfg.get("bos_token")), token(cfg.get("eos_token")))
    return out


def load_units(path):
    """[(name, flags, vars, source)] from the units file."""
    units, cur = [], None
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    for line in lines:
        if line.startswith("## "):
            if cur:
                units.append(cur)
            words = line[3:].split()
            cur = [words[0], set(words[1:]), {}, []]
        elif cur is None:
            continue  # the header comment
        elif not cur[3] and line.startswith("vars: "):
            cur[2] = json.loads(line[6:])
        else:
            cur[3].append(line)
    if cur:
        units.append(cur)
    out = []
    for name, flags, variables, body in units:
        source = "\n".join(body)
        if source.endswith("\n"):  # the last line before the next unit is its separator
            source = source[:-1]
        if "crlf" in flags:
            source = source.replace("\n", "\r\n")
        out.append((name, flags, variables, source))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hf", required=True, help="the directory fetch-hf-tokenizers.sh fills")
    a = ap.parse_args()
    if tuple(int(x) for x in jinja2.__version__.split(".")[:2]) < (3, 0):
        sys.exit("jinja_ref.py: Jinja2 3.x needed, found %s" % jinja2.__version__)
    templates = load_templates(a.hf)
    with open(os.path.join(HERE, "chat_cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    result = {"jinja2": jinja2.__version__,
              "now": [NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second,
                      NOW.weekday(), NOW.timetuple().tm_yday],
              "templates": {}, "cases": []}
    for name, (source, bos, eos) in templates.items():
        result["templates"][name] = source
        for case in spec["cases"]:
            variables = {"messages": case["messages"], "tools": spec["tools_spec"] if case.get("tools") else None,
                         "documents": None, "add_generation_prompt": case["add_generation_prompt"]}
            if bos is not None:
                variables["bos_token"] = bos
            if eos is not None:
                variables["eos_token"] = eos
            variables.update(case.get("vars", {}))
            entry = {"name": "%s/%s" % (name, case["name"]), "template": name, "vars": variables, "loose": False}
            entry.update(render(source, variables))
            result["cases"].append(entry)
    for name, flags, variables, source in load_units(os.path.join(HERE, "jinja_units.txt")):
        tname = "unit/" + name
        result["templates"][tname] = source
        entry = {"name": tname, "template": tname, "vars": variables, "loose": "loose" in flags}
        entry.update(render(source, variables))
        result["cases"].append(entry)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
    n_err = sum(1 for c in result["cases"] if "error" in c)
    print("jinja_ref.py: Jinja2 %s (%s), %d templates, %d renderings (%d of them errors) into %s"
          % (jinja2.__version__, os.path.dirname(jinja2.__file__), len(result["templates"]), len(result["cases"]),
             n_err, a.out))


if __name__ == "__main__":
    main()
