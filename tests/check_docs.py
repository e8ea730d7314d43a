"""check_docs.py: the README and docs/ name only what exists, and the layout
map (docs/layout.md) matches the tree.

- every relative link [text](target) in README.md and docs/*.md resolves;
- every path in backticks under a directory of the tree (src/, docs/, tests/,
  ...) exists (globs and UPPERCASE placeholders are skipped);
- every source file under src/ and include/ is named in docs/layout.md, every
  path that map names exists, and its tree lists each top-level directory;
- the README stays a front door: at most 200 lines.
Prints cmocka-style lines for tests/run_tests.sh."""
import glob, os, re, subprocess, sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.chdir(ROOT)
results = []


def check(name, problems):
    results.append(problems)
    print(("[       OK ] " if not problems else "[  FAILED  ] ") + name)
    for p in problems[:20]:
        print("    " + p)


tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()
top_dirs = sorted({p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")})
docs = ["README.md"] + sorted(glob.glob("docs/*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
for doc in docs:
    text = open(doc, encoding="utf-8").read()
    base = os.path.dirname(doc)
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.normpath(os.path.join(base, target.split("#")[0]))
        if not os.path.exists(path):
            bad.append("link %s: no %s" % (target, path))
    check("%s: its links resolve" % doc, bad)
    bad = []
    for word in CODE.findall(text):
        word = word.rstrip(".,;:)")
        first = word.split("/")[0]
        if "/" not in word or first not in top_dirs or re.search(r"[*{}<>$]|\.\.\.|…|[A-Z]{2,}", word.split("/", 1)[1]):
            continue
        if not os.path.exists(word):
            bad.append("`%s` does not exist" % word)
    check("%s: the paths it names exist" % doc, bad)

layout = open("docs/layout.md", encoding="utf-8").read()
sources = sorted(p for p in tracked if re.match(r"(src|include)/.*\.[ch]$", p))
# a header is named with its .c file ("a .c file's header of the same name is its interface")
missing = [p for p in sources if os.path.basename(p) not in layout and
           not (p.endswith(".h") and os.path.basename(p)[:-2] + ".c" in layout)]
check("docs/layout.md names every file of src/ and include/ (%d)" % len(sources), missing)
named = set(re.findall(r"`((?:src|include)/[a-z_/0-9]+\.[ch])`", layout))
check("docs/layout.md names only files that exist", sorted(p for p in named if not os.path.exists(p)))
tree = layout.split("|")[0]
check("docs/layout.md's tree lists every top-level directory",
      ["%s/ is not in the tree" % d for d in top_dirs if not re.search(r"^\s+%s/" % re.escape(d), tree, re.M)])
n = open("README.md", encoding="utf-8").read().count("\n")
check("README.md is a front door: %d lines (at most 200)" % n, [] if n <= 200 else ["%d lines" % n])
failed = sum(1 for p in results if p)
print("[==========] docs: %d checks" % len(results))
print("[  PASSED  ] %d test(s)." % (len(results) - failed))
if failed:
    print("[  FAILED  ] %d test(s)." % failed)
sys.exit(1 if failed else 0)
