#!/usr/bin/env python3
"""Every repository path named in a comment, doc or script exists.

Scans the tracked text files for words that start with one of the repository's top-level
folders (src/, cpp/, tests/, ...) and checks that each names a file or folder of the
checkout. Placeholders are understood: `<op>` or `*` stand for any name in their place,
`{a,b}` for each of its members; a trailing `:line` or `::item` is dropped. Prints each
missing path with where it was named and exits 1 if any is missing.
"""
import fnmatch
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)
files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, check=True).stdout.decode().split("\0")
files = [f for f in files if f and os.path.isfile(f)]
tops = sorted({f.split("/", 1)[0] for f in files if "/" in f} - {"report"}) + ["report"]
# Build outputs and caches the text may name (made by a build, never tracked).
generated = ("target/", "dist/", "build/", "third_party/py", ".device/", "ci/downstream/target")
# Paths inside other packages' trees (CUTLASS's include/cutlass/..., cxx's generated
# <crate>/src/lib.rs.h), named as such.
foreign = (re.compile(r"^include/cutlass(/|$)"), re.compile(r"\.rs\.h$"))
# A dated log: its paths are as of the session that wrote each entry.
logs = ("report/NOTES.md",)
word = re.compile(r"(?<![\w./<>{}*-])((?:%s)/[\w./<>{}*,+-]*[\w>}*])" % "|".join(re.escape(t) for t in tops))
known = set(files)
dirs = {os.path.dirname(f) for f in files}
for d in list(dirs):
    while d:
        d = os.path.dirname(d)
        dirs.add(d)

def expand(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    if "," not in m.group(1):  # a format placeholder, `{name}`
        return expand(p[:m.start()] + "*" + p[m.end():])
    return [q for alt in m.group(1).split(",") for q in expand(p[:m.start()] + alt + p[m.end():])]

def exists_at(p):
    if re.search(r"[<*]", p):
        pat = re.sub(r"<[^>]*>", "*", p)
        return any(fnmatch.fnmatch(f, pat) or fnmatch.fnmatch(f, pat + "/*") for f in known) or \
            any(fnmatch.fnmatch(d, pat) for d in dirs)
    return p in known or p in dirs


def exists(p, named_in):
    """At the root, or (a crate's own `src/...`) under a folder above the file naming it."""
    p = p.rstrip("/.,")
    here = os.path.dirname(named_in)
    while True:
        if exists_at(os.path.join(here, p) if here else p):
            return True
        if not here:
            return False
        here = os.path.dirname(here)

missing = []
for f in files:
    if f.startswith("report/baseline/") or f in logs or f.endswith((".json", ".lock", ".png")):
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    for n, line in enumerate(text.splitlines(), 1):
        for m in word.finditer(line):
            p = re.sub(r"(::\w+|:\d+(-\d+)?)$", "", m.group(1))
            if p.startswith(generated) or "{" in p and "}" not in p or any(r.search(p) for r in foreign):
                continue
            for q in expand(p):
                if not exists(q, f):
                    missing.append(f"{f}:{n}: {q}")
for m in missing:
    print(m)
print(f"check-paths: {len(missing)} missing path(s) named in {len(files)} files", file=sys.stderr)
sys.exit(1 if missing else 0)
