#!/usr/bin/env bash
# The crate's package ships every file its build reads: each tracked file under cpp/,
# include/ and buildscript/ is in `cargo package --list` (Cargo.toml's `include`). A file
# left out builds here and fails in a downloaded crate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
listed=$(cargo package --list --allow-dirty --offline 2>/dev/null || cargo package --list --allow-dirty)
missing=$(git ls-files cpp include buildscript | sort | comm -23 - <(echo "$listed" | sort) || true)
if [ -n "$missing" ]; then
  echo "check-package: tracked files the package leaves out (Cargo.toml include):"
  echo "$missing"
  exit 1
fi
echo "check-package: every tracked file under cpp/, include/ and buildscript/ is in the package"
