#!/usr/bin/env bash
# Builds the GPU test, example and bench executables here (Rust + the pip nvcc) and puts
# them in dist/gpu-bundle/ with run.sh, for a machine that has a GPU and the CUDA driver
# but no Rust. Copy the folder there and run `dist/gpu-bundle/run.sh`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
third_party/setup.sh >/dev/null
out=dist/gpu-bundle
rm -rf "$out"
mkdir -p "$out"

# Executables of the given cargo command, one "target-name path" per line.
executables() {
  "$@" --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        print(msg["target"]["name"], msg["executable"])
'
}

{
  executables cargo test --release --features cuda --test gpu --no-run
  executables cargo build --release --features cuda --examples
  executables cargo bench --features cuda --no-run
} | while read -r name path; do
  case "$name" in
    gpu) dest=gpu_tests ;;
    spmm) dest=spmm_bench ;;
    sparsek) continue ;;  # the library's own (empty) bench harness
    *) dest="$name" ;;
  esac
  cp "$path" "$out/$dest"
  strip --strip-debug "$out/$dest"
done
cp scripts/gpu-bundle-run.sh "$out/run.sh"
chmod +x "$out"/*
du -sh "$out"/*
