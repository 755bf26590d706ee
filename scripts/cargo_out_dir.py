#!/usr/bin/env python3
"""The OUT_DIR of one package's build script, read from cargo's JSON output.

    cargo metadata --format-version 1 --no-deps | cargo_out_dir.py package-id MANIFEST
        prints the package id of the workspace member whose manifest is MANIFEST
    cargo build --message-format=json | cargo_out_dir.py out-dir PACKAGE_ID
        prints the out_dir of that package's build-script-executed message

A package id is matched whole: its form depends on the checkout's directory name
(`path+file:///x/main#sparsek@0.1.0`, but `path+file:///x/sparsek#0.1.0` when the
directory is named like the package), so no part of it can be searched for. Exits 1 with
a message on stderr when there is no such package or message, or several that disagree.
"""
import json
import os
import sys


def package_id(metadata, manifest):
    """The id of the package of `metadata` (cargo metadata's JSON) whose manifest is `manifest`."""
    want = os.path.realpath(manifest)
    ids = [p["id"] for p in metadata.get("packages", [])
           if os.path.realpath(p.get("manifest_path", "")) == want]
    if len(ids) != 1:
        raise LookupError(f"cargo metadata lists {len(ids)} packages with manifest {want}: {ids}")
    return ids[0]


def out_dir(lines, pkg_id):
    """The out_dir of the build-script-executed messages of `pkg_id` among `lines`."""
    dirs = set()
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # cargo's JSON stream may be interleaved with plain text
        if (isinstance(msg, dict) and msg.get("reason") == "build-script-executed"
                and msg.get("package_id") == pkg_id):
            dirs.add(msg["out_dir"])
    if len(dirs) != 1:
        raise LookupError(f"{len(dirs)} build-script out_dirs for package {pkg_id}: {sorted(dirs)}")
    return dirs.pop()


def main(argv):
    if len(argv) != 3 or argv[1] not in ("package-id", "out-dir"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if argv[1] == "package-id":
            print(package_id(json.load(sys.stdin), argv[2]))
        else:
            print(out_dir(sys.stdin, argv[2]))
    except (LookupError, ValueError) as e:
        print(f"cargo_out_dir.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
