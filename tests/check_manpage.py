"""check_manpage.py: docs/gptscope.1 against the program it documents.

Every command `gptscope --help` lists has its section; every option a
command's --help names is in that section, and the section names no option
the command lacks; every key of the chat's F1 help (src/ui/screen.c) and
every slash command of its table (src/ui/commands.c), aliases too, is in the
man page, which names no command the table lacks; groff finds nothing to warn
about. Prints cmocka-style lines for tests/run_tests.sh."""
import os, re, shutil, subprocess, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("GPTSCOPE_BIN", os.path.join(ROOT, "gptscope"))
results = []


def check(name, problems):
    results.append((name, problems))
    print(("[       OK ] " if not problems else "[  FAILED  ] ") + name)
    for p in problems:
        print("    " + p)


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    return r.stdout + r.stderr


def man_text(src):
    """The man source with escapes undone: \\- is -, fonts dropped."""
    t = re.sub(r"\\f[BIRP]", "", src)
    return t.replace("\\-", "-").replace("\\(em", "-")


OPT = re.compile(r"(?<![\w/.-])(--[a-z][a-z0-9-]*[a-z0-9]|-[a-zA-Z])(?![\w-])")
GLOBAL = {"-m", "--model", "--help", "-h"}


def options(text):
    return set(OPT.findall(text)) - GLOBAL


def sections(man, level):
    """{title: body} for each .SS (level 'SS') or .SH."""
    parts = re.split(r"^\.%s (.*)$" % level, man, flags=re.M)
    out = {}
    for i in range(1, len(parts), 2):
        body = parts[i + 1]
        if level == "SS":
            body = re.split(r"^\.SH ", body, flags=re.M)[0]
        out[parts[i].strip('"')] = body
    return out


def main():
    src = open(os.path.join(ROOT, "docs/gptscope.1"), encoding="utf-8").read()
    man = man_text(src)
    top = run("--help")
    commands = re.findall(r"^  ([a-z][a-z-]*)\s{2,}", top, flags=re.M)
    check("gptscope --help lists commands", [] if len(commands) >= 10 else ["found only %r" % commands])
    ss = sections(man, "SS")
    by_cmd = {}
    for title, body in ss.items():
        m = re.match(r"gptscope ([a-z-]+)", title)
        if m:
            by_cmd[m.group(1)] = title + "\n" + body
    for c in commands:
        if c not in by_cmd:
            check("man: a section for %s" % c, ["no .SS \"gptscope %s ...\"" % c])
            continue
        help_opts = options(run(c, "--help"))
        man_opts = options(by_cmd[c])
        check("man: %s's options (%d)" % (c, len(help_opts)),
              ["%s: in --help, not in the man page" % o for o in sorted(help_opts - man_opts)] +
              ["%s: in the man page, not in --help" % o for o in sorted(man_opts - help_opts)])
    extra = sorted(set(by_cmd) - set(commands))
    check("man: no section for a command that does not exist", ["gptscope %s" % c for c in extra])

    sh = sections(man, "SH")
    keys_src = open(os.path.join(ROOT, "src/ui/screen.c"), encoding="utf-8").read()
    help_block = keys_src[keys_src.index("help_lines[]"):keys_src.index("Commands (a path")]
    keys = set(re.findall(r"\b(F\d+|Ctrl-[A-Z]|Alt-Enter|S-Tab|Tab|PgUp|PgDn|Esc|Enter)\b", help_block))
    body = sh.get("CHAT KEYS", "")
    check("man: the chat's keys (%d)" % len(keys), ["%s: in the F1 help, not in the man page" % k
                                                     for k in sorted(keys) if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(k), body)])

    cmd_src = open(os.path.join(ROOT, "src/ui/commands.c"), encoding="utf-8").read()
    table = cmd_src[cmd_src.index("static const app_command commands[]"):]
    table = table[:table.index("};")]
    names = set()
    for name, alias in re.findall(r'\{"(/[a-z?]+)", (?:NULL|"(/[a-z?]+)")', table):
        names.add(name)
        if alias:
            names.add(alias)
    body = sh.get("CHAT COMMANDS", "")
    in_man = set(re.findall(r"(?<![\w~.])(/[a-z?]+)", body))
    check("man: the chat's slash commands (%d)" % len(names),
          ["%s: in the command table, not in the man page" % n for n in sorted(names - in_man)] +
          ["%s: in the man page, not in the command table" % n for n in sorted(in_man - names)])

    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(ROOT, "docs/gptscope.1")],
                           capture_output=True, text=True)
        check("man: groff -man -ww finds nothing to warn about", r.stderr.splitlines())
    else:
        print("groff not installed: its check skipped")
    failed = sum(1 for _, p in results if p)
    print("[==========] man page: %d checks" % len(results))
    print("[  PASSED  ] %d test(s)." % (len(results) - failed))
    if failed:
        print("[  FAILED  ] %d test(s)." % failed)
    return 1 if failed else 0


sys.exit(main())
