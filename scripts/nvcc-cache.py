#!/usr/bin/env python3
"""A compiler cache for CMake's CUDA compiles (CMAKE_CUDA_COMPILER_LAUNCHER).

    -DCMAKE_CUDA_COMPILER_LAUNCHER="python3;scripts/nvcc-cache.py;<cache-dir>;<build-dir>"

CMake then runs `nvcc-cache.py <cache-dir> <build-dir> <nvcc> <args...>` for every CUDA
object. The cache does for CMake what build.rs does for cargo (buildscript/shared_objects.rs):
an object is reused only when its nvcc command line and every file nvcc read are the same
as when it was compiled. The key is a hash of nvcc's `--version`, the working directory and
the arguments (the contents of each `--options-file` in their place), with the source tree
and <build-dir> replaced by placeholders, so a fresh clone in another place (CI's) hits what
an earlier clone compiled. Beside each object the cache keeps a manifest: every file of
nvcc's dependency list (`-MD -MF`, which CMake asks for) with a hash of its contents. A hit
needs every listed file unchanged; it copies the object and writes the dependency file
(paths made this build's) where CMake expects it. A miss runs nvcc as given and, when it
succeeds, stores the object, the dependency file and the manifest (each written to a
temporary name and renamed, so concurrent compiles never see half an entry).

Only a compile of one source to one object (`-c ... -o ...` with `-MD -MF`) is cached; any
other command runs unchanged. SPARSEK_NVCC_CACHE_LOG=<file> appends one line per compile
("hit" or "miss" and the object), for CI's summary.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

MANIFEST_HEADER = "sparsek nvcc-cache manifest 1"


def file_hash(path, memo):
    if path not in memo:
        try:
            with open(path, "rb") as f:
                memo[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            memo[path] = None
    return memo[path]


class Normalizer:
    """Replaces the source tree's and the build tree's prefixes by placeholders."""

    def __init__(self, root, build):
        subs = []
        for path, mark in ((root, "@ROOT@"), (build, "@BUILD@")):
            for p in {path, os.path.realpath(path)}:
                subs.append((p.rstrip("/"), mark))
        # The longer prefix first: the build tree may lie inside the source tree.
        self.subs = sorted(subs, key=lambda s: -len(s[0]))

    def normalize(self, text):
        for prefix, mark in self.subs:
            text = text.replace(prefix, mark)
        return text

    def resolve(self, text):
        for prefix, mark in sorted(self.subs, key=lambda s: s[1]):
            text = text.replace(mark, prefix)
        return text


def parse_depfile(text):
    """The prerequisites of a make-style dependency file (one rule, backslash continuations)."""
    body = text.replace("\\\n", " ")
    _, _, deps = body.partition(": ")
    out, word, escape = [], "", False
    for ch in deps:
        if escape:
            word += ch
            escape = False
        elif ch == "\\":
            escape = True
        elif ch.isspace():
            if word:
                out.append(word)
            word = ""
        else:
            word += ch
    if word:
        out.append(word)
    return out


def atomic_write(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def log(kind, obj):
    path = os.environ.get("SPARSEK_NVCC_CACHE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{kind} {obj}\n")


def main():
    if len(sys.argv) < 4:
        sys.stderr.write("usage: nvcc-cache.py <cache-dir> <build-dir> <nvcc> <args...>\n")
        return 2
    cache, build, cmd = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
    args = cmd[1:]

    def value(flag):
        return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None

    obj, depfile, target = value("-o"), value("-MF"), value("-MT")
    if "-c" not in args or obj is None or depfile is None or "-MD" not in args:
        return subprocess.call(cmd)

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    norm = Normalizer(root, build)
    cwd = os.getcwd()
    key_parts = [subprocess.run([cmd[0], "--version"], capture_output=True, text=True).stdout, "cwd " + cwd]
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):
            key_parts.append(a + " <" + a + ">")  # where outputs go does not change them
            skip = True
        elif i > 0 and args[i - 1] == "--options-file":
            with open(a if os.path.isabs(a) else os.path.join(cwd, a)) as f:
                key_parts.append("options " + f.read())
        else:
            key_parts.append(a)
    key = hashlib.sha256(norm.normalize("\n".join(key_parts)).encode()).hexdigest()
    os.makedirs(cache, exist_ok=True)
    base = os.path.join(cache, key)

    obj_path = obj if os.path.isabs(obj) else os.path.join(cwd, obj)
    dep_path = depfile if os.path.isabs(depfile) else os.path.join(cwd, depfile)
    memo = {}
    try:
        with open(base + ".manifest") as f:
            lines = f.read().splitlines()
        fresh = lines[0] == MANIFEST_HEADER and len(lines) > 1
        for line in lines[1:]:
            digest, _, path = line.partition(" ")
            path = norm.resolve(path)
            if file_hash(path if os.path.isabs(path) else os.path.join(cwd, path), memo) != digest:
                fresh = False
                break
        if fresh:
            with open(base + ".d") as f:
                deps = norm.resolve(f.read()).replace("@TARGET@", target or obj)
            os.makedirs(os.path.dirname(obj_path), exist_ok=True)
            shutil.copyfile(base + ".o", obj_path)
            atomic_write(dep_path, deps.encode())
            for suffix in (".manifest", ".o", ".d"):  # CI drops entries older than 14 days
                os.utime(base + suffix)
            log("hit", obj)
            return 0
    except (OSError, IndexError):
        pass

    rc = subprocess.call(cmd)
    if rc != 0:
        return rc
    with open(dep_path) as f:
        dep_text = f.read()
    manifest = [MANIFEST_HEADER]
    for dep in parse_depfile(dep_text):
        full = dep if os.path.isabs(dep) else os.path.join(cwd, dep)
        digest = file_hash(full, memo)
        if digest is None:
            return 0  # a prerequisite that cannot be read: compiled, not cached
        manifest.append(digest + " " + norm.normalize(dep))
    head, sep, rest = dep_text.partition(": ")
    stored = "@TARGET@" + sep + rest if sep else dep_text
    with open(obj_path, "rb") as f:
        atomic_write(base + ".o", f.read())
    atomic_write(base + ".d", norm.normalize(stored).encode())
    atomic_write(base + ".manifest", ("\n".join(manifest) + "\n").encode())  # last: it marks the entry whole
    log("miss", obj)
    return 0


if __name__ == "__main__":
    sys.exit(main())
