//! The build script's CUTLASS version check (buildscript/cutlass_version.rs, the module
//! build.rs runs on every CUTLASS tree before compiling): the parser on the headers the
//! supported tags ship, and the typed refusal of a tree too old or without version.h.

#[path = "../buildscript/cutlass_version.rs"]
#[allow(dead_code)]
mod cutlass_version;

use cutlass_version::{check, parse, Support, Version, NEWEST_TESTED, OLDEST};
use std::fs;
use std::path::PathBuf;

/// version.h as the CUTLASS tags lay it out (4.2.0's has a trailing blank after PATCH).
fn header(major: u32, minor: u32, patch: &str) -> String {
    format!(
        "#pragma once\n#include <cstdint>\n#include <string>\n\n#define CUTLASS_MAJOR {major}\n\
         #define CUTLASS_MINOR {minor}\n#define CUTLASS_PATCH {patch}\n\n\
         #ifdef CUTLASS_VERSIONS_GENERATED\n#include \"cutlass/version_extended.h\"\n#else\n\
         #define CUTLASS_BUILD 0\n#define CUTLASS_REVISION \"\"\n#endif\n\n\
         #define CUTLASS_VERSION ((CUTLASS_MAJOR)*100 + (CUTLASS_MINOR)*10 + CUTLASS_PATCH)\n"
    )
}

/// A CUTLASS-like tree in a fresh temporary directory: include/cutlass/version.h holding
/// `text`, or no version.h at all.
fn tree(name: &str, text: Option<&str>) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "sparsek-cutlass-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("include/cutlass")).unwrap();
    fs::write(root.join("include/cutlass/cutlass.h"), "#pragma once\n").unwrap();
    if let Some(text) = text {
        fs::write(root.join("include/cutlass/version.h"), text).unwrap();
    }
    root
}

fn v(major: u32, minor: u32, patch: u32) -> Version {
    Version {
        major,
        minor,
        patch,
    }
}

#[test]
fn parses_the_tags_headers() {
    assert_eq!(parse(&header(4, 2, "0 ")), Some(v(4, 2, 0)));
    assert_eq!(parse(&header(4, 3, "6")), Some(v(4, 3, 6)));
    assert_eq!(parse(&header(4, 7, "0")), Some(v(4, 7, 0)));
    assert_eq!(parse(&header(10, 12, "13")), Some(v(10, 12, 13)));
    // A part missing or not a number: no version.
    assert_eq!(
        parse("#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n"),
        None
    );
    assert_eq!(parse(&header(4, 2, "x")), None);
    assert_eq!(parse(""), None);
    // CUTLASS_VERSION's expression and lookalike names are not the parts.
    assert_eq!(
        parse("#define CUTLASS_MAJOR_X 9\n#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 5\n#define CUTLASS_PATCH 1\n"),
        Some(v(4, 5, 1))
    );
    assert_eq!(v(4, 2, 0).to_string(), "4.2.0");
}

#[test]
fn supported_range() {
    assert!(OLDEST <= NEWEST_TESTED);
    for (minor, patch) in [(2, "0 "), (3, "6"), (5, "0"), (7, "0")] {
        let root = tree(&format!("ok{minor}"), Some(&header(4, minor, patch)));
        let got = check(&root, "CUTLASS_DIR");
        let want = v(4, minor, patch.trim().parse().unwrap());
        assert_eq!(got, Ok(Support::Tested(want)), "4.{minor}.{patch}");
        fs::remove_dir_all(&root).unwrap();
    }
    // Newer than tested, same major: built, with a warning.
    let root = tree("newer", Some(&header(4, 99, "1")));
    assert_eq!(check(&root, "CUTLASS_DIR"), Ok(Support::Newer(v(4, 99, 1))));
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn refuses_old_unknown_and_other_majors() {
    // The v4.1.0 tag's version.h says 4.0.0; a 4.1.x header says 4.1.
    for (name, text) in [
        ("41", header(4, 1, "0")),
        ("40", header(4, 0, "0 ")),
        ("3x", header(3, 9, "2")),
        ("5x", header(5, 0, "0")),
        ("garbled", "#define CUTLASS_MAJOR four\n".to_string()),
    ] {
        let root = tree(name, Some(&text));
        let e = check(&root, "CUTLASS_DIR").expect_err(name);
        assert!(e.contains("CUTLASS_DIR"), "{name}: {e}");
        assert!(
            e.contains("4.2.0"),
            "{name}: names the oldest supported: {e}"
        );
        assert!(
            e.contains(&NEWEST_TESTED.to_string()),
            "{name}: names the range: {e}"
        );
        fs::remove_dir_all(&root).unwrap();
    }
    let root = tree("noversion", None);
    let e = check(&root, "CUTLASS_DIR").expect_err("no version.h");
    assert!(e.contains("version.h") && e.contains("CUTLASS_DIR"), "{e}");
    fs::remove_dir_all(&root).unwrap();
}

/// scripts/bundle-gpu.sh links the C++ programs against the build script's
/// libsparsek_kernels.a, found through scripts/cargo_out_dir.py: the root package's id from
/// `cargo metadata`, matched whole against cargo's build-script-executed messages. Real
/// cargo output of a two-member workspace (a root package `sparsek` with build scripts in
/// both members) checked out under a directory named `sparsek` (what `git clone` gives,
/// where the id has no `sparsek@`) and one named `main`.
#[test]
fn bundle_finds_the_build_script_out_dir_under_any_directory_name() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if !root.join("scripts/bundle-gpu.sh").exists() {
        // A packaged crate ships no scripts/.
        eprintln!("SKIPPED: no scripts/ in this tree (a packaged crate)");
        return;
    }
    let finder = root.join("scripts/cargo_out_dir.py");
    let bundle = fs::read_to_string(root.join("scripts/bundle-gpu.sh")).unwrap();
    assert!(
        bundle.contains("cargo_out_dir.py package-id")
            && bundle.contains("cargo_out_dir.py out-dir"),
        "scripts/bundle-gpu.sh no longer finds the kernel library through scripts/cargo_out_dir.py"
    );
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no python3 (scripts/bundle-gpu.sh needs it too)");
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // `finder ARGS < input`: (exit success, stdout trimmed).
    let run_finder = |args: &[&str], input: &[u8]| {
        let mut child = Command::new("python3")
            .arg(&finder)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap().trim().to_string(),
        )
    };
    let scratch = std::env::temp_dir().join(format!("sparsek-out-dir-{}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    for dir_name in ["sparsek", "main"] {
        let ws = scratch.join(dir_name);
        let member = ws.join("bindings/sparsek-cxx");
        for (dir, manifest) in [
            (
                &ws,
                "[package]\nname = \"sparsek\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [workspace]\nmembers = [\".\", \"bindings/sparsek-cxx\"]\n",
            ),
            (
                &member,
                "[package]\nname = \"sparsek-cxx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
        ] {
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::write(dir.join("Cargo.toml"), manifest).unwrap();
            fs::write(dir.join("src/lib.rs"), "").unwrap();
            fs::write(dir.join("build.rs"), "fn main() {}\n").unwrap();
        }
        let metadata = Command::new(&cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(
            metadata.status.success(),
            "{dir_name}: cargo metadata failed"
        );
        let manifest = ws.join("Cargo.toml");
        let (ok, id) = run_finder(
            &["package-id", manifest.to_str().unwrap()],
            &metadata.stdout,
        );
        assert!(ok && !id.is_empty(), "{dir_name}: no package id");
        let build = Command::new(&cargo)
            .args(["build", "--workspace", "--offline", "--message-format=json"])
            .env("CARGO_TARGET_DIR", ws.join("target"))
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(build.status.success(), "{dir_name}: cargo build failed");
        // The root package's build script ran in <target>/[<triple>/]debug/build/sparsek-<hash>/out.
        let (ok, out_dir) = run_finder(&["out-dir", &id], &build.stdout);
        assert!(ok, "{dir_name}: no out_dir for {id}");
        let out_dir = std::path::PathBuf::from(out_dir);
        let build_dir = out_dir.parent().unwrap();
        assert!(
            out_dir.is_dir()
                && out_dir.ends_with("out")
                && build_dir.starts_with(ws.join("target"))
                && build_dir
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("sparsek-")
                && !build_dir
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("sparsek-cxx-"),
            "{dir_name}: {id} gave {}",
            out_dir.display()
        );
        // Another id, or none in the stream: a failure, not an empty path.
        let (ok, out) = run_finder(&["out-dir", &format!("{id}x")], &build.stdout);
        assert!(
            !ok && out.is_empty(),
            "{dir_name}: found {out} for a missing id"
        );
    }
    fs::remove_dir_all(&scratch).unwrap();
}
