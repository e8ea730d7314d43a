#!/usr/bin/python3
"""json_check.py — checks gptscope's --json output with Python's own json module.

    json_check.py FILE [NAME=HEX ...] -- EXPR [EXPR ...]

FILE must be strict JSON: UTF-8 decoded strictly, and no NaN, Infinity or
-Infinity (Python's json module accepts those by default; here they are
refused, as every other JSON parser does). Each EXPR is a Python expression
that must be true, evaluated with `j` the parsed document, `arg[NAME]` the
bytes given in hex (file names and texts travel as hex, so no byte is lost to
argv or a shell), and the helpers below. Prints each false EXPR and exits 1;
exits 2 when FILE is not strict JSON. Used by tests/test_cli_json.c and
tests/test_cli.c.
"""
import functools
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def refuse_constant(name):
    raise ValueError("%s is not JSON" % name)


def exact_text(b):
    """Whether bytes b are a JSON string as they are: valid UTF-8, no NUL."""
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in b


def text_bytes(obj, key):
    """The exact bytes of obj[key]: obj[key + "_bytes"] when present, else the string's UTF-8."""
    if key + "_bytes" in obj:
        return bytes(obj[key + "_bytes"])
    return obj[key].encode("utf-8")


def token_bytes(doc, i):
    """The exact bytes of token i of a {"tokens", "tokens_bytes"} document."""
    tb = doc.get("tokens_bytes")
    if tb is not None and tb[i] is not None:
        return bytes(tb[i])
    return doc["tokens"][i].encode("utf-8")


@functools.lru_cache(maxsize=None)
def ref_tokenizer(directory):
    """tests/ref/bpe_ref.py's tokenizer for the model directory (bytes)."""
    from bpe_ref import Tokenizer
    return Tokenizer.load(os.fsdecode(directory))


def load_json(path):
    with open(os.fsdecode(path), "rb") as f:
        return json.loads(f.read().decode("utf-8"), parse_constant=refuse_constant)


def logsumexp(xs):
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def main():
    argv = sys.argv[1:]
    if "--" not in argv or not argv:
        sys.exit(__doc__)
    sep = argv.index("--")
    path, lets, exprs = argv[0], argv[1:sep], argv[sep + 1:]
    arg = {}
    for let in lets:
        name, _, value = let.partition("=")
        arg[name] = bytes.fromhex(value)
    try:
        j = load_json(os.fsencode(path))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError included
        with open(path, "rb") as f:
            head = f.read(300)
        print("not strict JSON: %s\n%r" % (e, head))
        sys.exit(2)
    env = dict(globals(), j=j, arg=arg, math=math)
    failed = 0
    for expr in exprs:
        try:
            ok = eval(expr, env)
        except Exception as e:  # a missing key is a failed check, with its reason
            ok, why = False, "%s: %s" % (type(e).__name__, e)
        else:
            why = "false"
        if not ok:
            print("check failed (%s): %s" % (why, expr))
            failed = 1
    sys.exit(failed)


if __name__ == "__main__":
    main()
