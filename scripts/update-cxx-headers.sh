#!/usr/bin/env bash
# Regenerates the committed C++ headers of the Rust bridge (bindings/sparsek-cxx/src/lib.rs):
#   include/sparsek/rust.h  the header cxx generates for the bridge (with a short prologue)
#   include/rust/cxx.h      cxx's own header, which it includes
# from this build's cxx output ($OUT_DIR/cxxbridge/include of sparsek-cxx). Run it after
# changing the bridge or the cxx version; `cargo test -p sparsek-cxx` fails until you do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SPARSEK_UPDATE_HEADERS=1 cargo test -p sparsek-cxx --lib -- --exact tests::committed_headers_are_current
cargo test -p sparsek-cxx --lib -- --exact tests::committed_headers_are_current  # now passes
git status --short -- include/sparsek/rust.h include/rust/cxx.h
