//! Sharing compiled kernel objects between checkouts and toolchain locations.
//!
//! build.rs keys each object by its exact nvcc command line and checks it against the
//! modification times of the files nvcc read (its `-MD` list), so an object is reused
//! only by the checkout that built it. A second checkout of the same sources (a
//! downstream crate's copy, CI's fresh clone) has other paths and newer files, and would
//! compile everything again (about 45 s per SM90 unit).
//!
//! So beside each object build.rs keeps a *manifest*, named by the command line with the
//! crate root and the pip toolchain directory replaced by placeholders plus nvcc's
//! `--version`, listing every file nvcc read with a hash of its contents. A build that
//! finds no fresh object of its own looks up that manifest in the same object directory;
//! if every listed file (placeholders resolved to its own paths) has the recorded
//! contents, it copies the object instead of compiling (or, where the manifest names this
//! checkout's own object, stale only because a fresh clone at the same path made every
//! source newer, keeps it). Sharing needs a common object
//! directory: the same target dir (CARGO_TARGET_DIR), or SPARSEK_KERNEL_CACHE.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::provision::stable_hash;

const HEADER: &str = "sparsek kernel manifest 1";

/// Rewrites the checkout- and toolchain-specific prefixes of paths and command lines.
pub struct Normalizer {
    /// (absolute prefix, placeholder), longest prefix first.
    subs: Vec<(String, &'static str)>,
}

impl Normalizer {
    /// `root`: the crate's directory; `py`: the pip toolchain directory in use, if any
    /// (third_party/py or the provisioned cache).
    pub fn new(root: &Path, py: Option<&Path>) -> Self {
        let mut subs = vec![(root.display().to_string(), "@ROOT@")];
        if let Some(py) = py {
            subs.push((py.display().to_string(), "@PY@"));
            // Its real path too: nvcc given through a link resolves to it (build.rs's
            // explicit_nvcc), and third_party/py may itself be a link.
            if let Ok(real) = std::fs::canonicalize(py) {
                if real != py {
                    subs.push((real.display().to_string(), "@PY@"));
                }
            }
        }
        // third_party/py lies inside the root: replace the longer prefix first.
        subs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Self { subs }
    }

    /// Also replace `path` by `placeholder` (e.g. the generated units' directory, which lies
    /// in the shared target dir, outside this checkout's root).
    pub fn with(mut self, path: &Path, placeholder: &'static str) -> Self {
        self.subs.push((path.display().to_string(), placeholder));
        self.subs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        self
    }

    /// `text` with every prefix replaced by its placeholder.
    pub fn normalize(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (prefix, placeholder) in &self.subs {
            out = out.replace(prefix.as_str(), placeholder);
        }
        out
    }

    /// A normalized path made concrete for this build.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let mut out = path.to_string();
        for (prefix, placeholder) in &self.subs {
            out = out.replace(placeholder, prefix);
        }
        PathBuf::from(out)
    }
}

/// Content hashes of files, each file read once per build.
#[derive(Default)]
pub struct Hashes(HashMap<PathBuf, Option<u64>>);

impl Hashes {
    fn of(&mut self, path: &Path) -> Option<u64> {
        *self
            .0
            .entry(path.to_path_buf())
            .or_insert_with(|| fs::read(path).ok().map(|b| stable_hash(&b)))
    }
}

/// The files a `-MD` dependency file lists (after the target and its colon).
pub fn deps_of(dep_file_text: &str) -> Option<Vec<String>> {
    let joined = dep_file_text.replace("\\\n", " ");
    let (_, files) = joined.split_once(": ")?;
    Some(files.split_whitespace().map(str::to_string).collect())
}

/// The manifest path of a source compiled with `cmd_line` by an nvcc whose `--version`
/// says `nvcc_version`.
pub fn manifest_path(
    obj_dir: &Path,
    src: &str,
    cmd_line: &str,
    nvcc_version: &str,
    norm: &Normalizer,
) -> PathBuf {
    let key = format!("{}\n{nvcc_version}", norm.normalize(cmd_line));
    obj_dir.join(format!(
        "{}-{:016x}.manifest",
        src.replace(['/', '.'], "_"),
        stable_hash(key.as_bytes())
    ))
}

/// The object file a manifest names, if it is readable.
fn manifest_object(manifest: &Path) -> Option<String> {
    let text = fs::read_to_string(manifest).ok()?;
    let mut lines = text.lines();
    (lines.next()? == HEADER).then_some(())?;
    lines.next()?.strip_prefix("object ").map(str::to_string)
}

/// Records `obj` (fresh, built from the files its dependency file `dep` lists) under
/// `manifest`: always when `just_compiled`, else only where the manifest is missing or
/// names an object that no longer exists (so checkouts sharing a manifest do not take
/// turns rewriting it). Best effort: a failure only loses the sharing.
pub fn record(
    manifest: &Path,
    obj: &Path,
    dep: &Path,
    just_compiled: bool,
    norm: &Normalizer,
    hashes: &mut Hashes,
) {
    let Some(name) = obj.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    if !just_compiled {
        let named = manifest_object(manifest);
        let dir = manifest.parent().unwrap_or(Path::new("."));
        if named.is_some_and(|n| n == name || dir.join(n).is_file()) {
            return;
        }
    }
    let Some(deps) = fs::read_to_string(dep).ok().as_deref().and_then(deps_of) else {
        return;
    };
    let mut text = format!("{HEADER}\nobject {name}\n");
    for d in &deps {
        let Some(h) = hashes.of(Path::new(d)) else {
            return;
        };
        text.push_str(&format!("{h:016x} {}\n", norm.normalize(d)));
    }
    let tmp = manifest.with_extension(format!("manifest.tmp{}", std::process::id()));
    if fs::write(&tmp, text).is_ok() && fs::rename(&tmp, manifest).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// Where a reused object goes: its object, dependency and command-line files.
pub struct Target<'a> {
    /// The object to create.
    pub obj: &'a Path,
    /// Its dependency file (written with this build's paths).
    pub dep: &'a Path,
    /// Its command-line stamp.
    pub stamp: &'a Path,
    /// The command line it stands for.
    pub cmd_line: &'a str,
}

/// Copies the object a matching manifest names into `target`, with a dependency file and
/// stamp that make it fresh for this build. Returns whether it did.
pub fn reuse(manifest: &Path, target: &Target<'_>, norm: &Normalizer, hashes: &mut Hashes) -> bool {
    let Ok(text) = fs::read_to_string(manifest) else {
        return false;
    };
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return false;
    }
    let Some(name) = lines.next().and_then(|l| l.strip_prefix("object ")) else {
        return false;
    };
    let Some(dir) = manifest.parent() else {
        return false;
    };
    let source_obj = dir.join(name);
    let mut deps = Vec::new();
    for line in lines {
        let Some((hash, path)) = line.split_once(' ') else {
            return false;
        };
        let path = norm.resolve(path);
        match hashes.of(&path) {
            Some(h) if format!("{h:016x}") == hash => deps.push(path),
            _ => return false,
        }
    }
    if source_obj == target.obj {
        // Its own object, stale only by the sources' times (a fresh clone or worktree at the
        // same path): every file it read is byte-identical, so it stands; made newer than
        // them so the next build finds it fresh.
        let touched = fs::File::options()
            .write(true)
            .open(target.obj)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        if touched.is_err() {
            return false;
        }
    } else {
        // Copied under a temporary name and renamed, as compiled objects are.
        let tmp = target
            .obj
            .with_extension(format!("o.tmp{}", std::process::id()));
        if fs::copy(&source_obj, &tmp).is_err() || fs::rename(&tmp, target.obj).is_err() {
            let _ = fs::remove_file(&tmp);
            return false;
        }
    }
    let dep_list: Vec<String> = deps.iter().map(|p| p.display().to_string()).collect();
    let dep_text = format!("{}: {}\n", target.obj.display(), dep_list.join(" \\\n "));
    fs::write(target.dep, dep_text).is_ok() && fs::write(target.stamp, target.cmd_line).is_ok()
}
