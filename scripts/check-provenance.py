#!/usr/bin/env python3
"""No code comment cites a run of the project's log (report/NOTES.md).

A comment says why the code is as it is; which session or GPU call measured a number is
provenance, and belongs in a table row's `chosen_by` string (a string, not a comment, so
it is not checked here) or in report/NOTES.md itself. Scans the comments of the tracked
source files of the code folders and build files (C-like `//` and `/* */` comments, `#`
comments of shell, Python, CMake and the lists) for "session N", "call N", and a mention
of NOTES.md beside "run N"; prints each hit with its file and line and exits 1 if any.
"""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)
# The code: what is compiled, run or built, with its comments.
scopes = ("src/", "cpp/", "include/", "tests/", "examples/", "benches/", "bindings/", "buildscript/",
          "scripts/", "cmake/", "ci/", ".ci/", "build.rs", "CMakeLists.txt", "report/src/", "report/peers/",
          "report/kernels/", "report/build.rs")
c_like = (".rs", ".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".in")
hash_like = (".sh", ".py", ".txt", ".cmake", ".toml")
# A file without an extension under .ci/ or scripts/ is a shell script.
files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, check=True).stdout.decode().split("\0")
files = [f for f in files if f.startswith(scopes) and os.path.isfile(f)]

citation = [
    re.compile(r"\bsessions?\s+\d", re.I),  # a session's number, or several
    re.compile(r"\bcalls?\s+\d", re.I),  # a GPU call's number (of a session), or several
]
# A run's number alone may be ordinary prose; beside the log's name it cites the log.
notes_run = (re.compile(r"NOTES\.md"), re.compile(r"\bruns?\s+\d", re.I))
char_literal = re.compile(r"'(\\.[^']{0,8}|[^\\'\n])'")


def c_comments(text):
    """(offset, comment text) of every // and /* */ comment, strings and chars skipped."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((i, text[i:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append((i, text[i:end]))
            i = end
        elif text[i] == '"':
            raw = re.search(r"\br(#*)$", text[max(0, i - 8):i])  # a Rust raw string r#"..."#
            if raw:
                close = '"' + raw.group(1)
                end = text.find(close, i + 1)
                i = n if end < 0 else end + len(close)
                continue
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text[i] == "'":
            m = char_literal.match(text, i)
            i = m.end() if m else i + 1  # else a Rust lifetime or label
        else:
            i += 1
    return out


def hash_comments(text):
    """(offset, comment text) of every # comment: a '#' at a line's start or after a blank,
    outside quotes ('${#x}' and '$#' are not comments)."""
    out, at = [], 0
    for line in text.splitlines(keepends=True):
        quote = None
        for j, ch in enumerate(line):
            if quote:
                if ch == "\\":
                    continue
                if ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch == "#" and (j == 0 or line[j - 1] in " \t"):
                out.append((at + j, line[j:].rstrip("\n")))
                break
        at += len(line)
    return out


def blocks(comments, text):
    """The comments of consecutive lines joined (a citation may run over a line break): lists
    of (offset, comment text)."""
    joined, prev_line = [], None
    for off, body in comments:
        line = text.count("\n", 0, off)
        if joined and line == prev_line + 1:
            joined[-1].append((off, body))
        else:
            joined.append([(off, body)])
        prev_line = line + body.count("\n")
    return joined


def offset_in(parts, pos):
    """The file offset of position `pos` of the parts joined by blanks."""
    for off, body in parts:
        if pos <= len(body):
            return off + pos
        pos -= len(body) + 1
    return parts[-1][0]


hits = []
for f in files:
    base = os.path.basename(f)
    if f.endswith(c_like):
        kind = c_comments
    elif f.endswith(hash_like) or base == "CMakeLists.txt" or ("." not in base and f.startswith((".ci/", "scripts/"))):
        kind = hash_comments
    else:
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    lines = text.splitlines()
    for parts in blocks(kind(text), text):
        body = " ".join(b for _, b in parts)
        found = [m.start() for r in citation for m in r.finditer(body)]
        if notes_run[0].search(body):
            found += [m.start() for m in notes_run[1].finditer(body)]
        for line_no in sorted({text.count("\n", 0, offset_in(parts, pos)) + 1 for pos in found}):
            hits.append(f"{f}:{line_no}: {lines[line_no - 1].strip()}")
for h in hits:
    print(h)
print(f"check-provenance: {len(hits)} comment(s) citing report/NOTES.md runs in {len(files)} files",
      file=sys.stderr)
sys.exit(1 if hits else 0)
