//! The README's Rust examples as doctests: src/lib.rs includes `$OUT_DIR/README.doctest.md`
//! (under `cfg(doctest)` only), a copy of README.md in which a block that needs the `cuda`
//! feature, marked by the HTML comment line `<!-- doctest: cuda -->` just above its fence
//! (invisible on GitHub and crates.io), is fenced `rust,ignore` when the feature is off.
//! With the feature it is compiled as written.

use std::env;
use std::fs;
use std::path::PathBuf;

/// The marker line of a block that needs the `cuda` feature.
const CUDA_MARKER: &str = "<!-- doctest: cuda -->";

/// Writes `$OUT_DIR/README.doctest.md`. Never fails the build: without a README (it is in
/// the package's include list, so only a broken checkout lacks it) the copy is empty.
pub fn write_doctest_copy() {
    let (Some(dir), Some(out)) = (env::var_os("CARGO_MANIFEST_DIR"), env::var_os("OUT_DIR")) else {
        return;
    };
    let readme = PathBuf::from(dir).join("README.md");
    println!("cargo:rerun-if-changed={}", readme.display());
    let text = fs::read_to_string(&readme).unwrap_or_default();
    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();
    let mut copy = String::with_capacity(text.len());
    let mut after_marker = false;
    for line in text.lines() {
        if after_marker && !cuda && line.trim_start().starts_with("```rust") {
            copy.push_str("```rust,ignore");
        } else {
            copy.push_str(line);
        }
        copy.push('\n');
        after_marker = line.trim() == CUDA_MARKER;
    }
    let _ = fs::write(PathBuf::from(out).join("README.doctest.md"), copy);
}
