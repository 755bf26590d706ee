//! The CUDA toolchain build.rs installs itself when it finds none: the wheels of
//! third_party/wheels.txt of the parts it is missing (`nvcc`: the compiler and the CUDA
//! runtime; `cutlass`: the CUTLASS headers), installed with `python3 -m pip install
//! --no-deps --target` into a cache outside the source tree:
//!
//!   $SPARSEK_TOOLCHAIN_DIR, else $XDG_CACHE_HOME/sparsek, else $HOME/.cache/sparsek,
//!   then `toolchain-<hash of the wheels installed>`.
//!
//! A changed list, or another set of parts, gets a new directory. pip installs into a
//! private temporary directory that is renamed into place once complete, so concurrent
//! builds never see half a toolchain (the loser of a race discards its copy).
//! SPARSEK_NO_PROVISION=1 turns the installation off; PYTHON picks the interpreter
//! (default python3).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Marks a complete installation (written last, before the rename).
const COMPLETE: &str = ".sparsek-toolchain-complete";

/// nvcc inside a pip toolchain directory (third_party/py or the cache).
pub fn nvcc_in(dir: &Path) -> PathBuf {
    dir.join("nvidia/cu13/bin/nvcc")
}

/// The CUTLASS source directory (with include/) inside one.
pub fn cutlass_in(dir: &Path) -> PathBuf {
    dir.join("cutlass_library/source")
}

/// The parts of the toolchain a build is missing (what a cache directory holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub nvcc: bool,
    pub cutlass: bool,
}

impl Parts {
    /// The wheels.txt marks of these parts.
    fn marks(self) -> Vec<&'static str> {
        [("nvcc", self.nvcc), ("cutlass", self.cutlass)]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(m, _)| *m)
            .collect()
    }
}

/// Whether `dir` holds the given parts.
pub fn has_parts(dir: &Path, parts: Parts) -> bool {
    (!parts.nvcc || nvcc_in(dir).is_file())
        && (!parts.cutlass || cutlass_in(dir).join("include/cutlass/cutlass.h").is_file())
}

/// The wheels of `parts`: their lines of third_party/wheels.txt, in order.
fn wheels_of(root: &Path, parts: Parts) -> Result<Vec<String>, String> {
    let path = root.join("third_party/wheels.txt");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut lines = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, ..) => {}
            (Some(wheel), Some(used_by), None) => lines.push((wheel, used_by)),
            _ => {
                return Err(format!(
                    "{}: malformed line `{}` (want: wheel==version nvcc|cutlass|cmake)",
                    path.display(),
                    line.trim()
                ))
            }
        }
    }
    let marks = parts.marks();
    if let Some(m) = marks.iter().find(|m| !lines.iter().any(|(_, u)| u == *m)) {
        return Err(format!("{} marks no wheel `{m}`", path.display()));
    }
    Ok(lines
        .into_iter()
        .filter(|(_, u)| marks.contains(u))
        .map(|(w, _)| w.to_string())
        .collect())
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust releases (the cache key must).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Where toolchains are cached (the parent of `toolchain-<hash>`).
fn cache_base() -> Result<PathBuf, String> {
    for var in ["SPARSEK_TOOLCHAIN_DIR", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let non_empty = |var: &str| {
        env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = non_empty("SPARSEK_TOOLCHAIN_DIR") {
        return Ok(dir);
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return Ok(dir.join("sparsek"));
    }
    if let Some(home) = non_empty("HOME") {
        return Ok(home.join(".cache/sparsek"));
    }
    Err(
        "no cache directory for the CUDA toolchain (HOME is unset): set \
         SPARSEK_TOOLCHAIN_DIR"
            .into(),
    )
}

/// The one message for a missing python3/pip, naming the fix.
fn no_pip(python: &str, why: &str) -> String {
    format!(
        "no nvcc or CUTLASS found, and `{python} -m pip` ({why}) is not available to install \
         them. Fix: install Python 3 with pip (e.g. `apt install python3-pip`) and build \
         again; or point NVCC (or CUDA_HOME) and CUTLASS_DIR at an installed CUDA toolkit \
         and CUTLASS"
    )
}

/// The cached directory of the toolchain's `parts`, installing them first when missing
/// (unless SPARSEK_NO_PROVISION is set). `why` says what was not found, for the messages.
pub fn toolchain(root: &Path, why: &str, parts: Parts) -> Result<PathBuf, String> {
    println!("cargo:rerun-if-env-changed=SPARSEK_NO_PROVISION");
    println!("cargo:rerun-if-env-changed=PYTHON");
    let wheels = wheels_of(root, parts)?;
    let key = stable_hash(wheels.join("\n").as_bytes());
    let base = cache_base()?;
    let dir = base.join(format!("toolchain-{key:016x}"));
    if dir.join(COMPLETE).is_file() && has_parts(&dir, parts) {
        return Ok(dir);
    }
    if env::var_os("SPARSEK_NO_PROVISION").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(format!(
            "{why}, and SPARSEK_NO_PROVISION is set, so the pinned toolchain is not installed \
             into {}. Fix: unset SPARSEK_NO_PROVISION, run third_party/setup.sh (in a \
             checkout), or set NVCC (or CUDA_HOME) and CUTLASS_DIR",
            dir.display()
        ));
    }
    let python = env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&python)
        .args(["-m", "pip", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => {}
        Ok(_) => return Err(no_pip(&python, "pip is missing")),
        Err(e) => return Err(no_pip(&python, &format!("cannot run {python}: {e}"))),
    }

    fs::create_dir_all(&base).map_err(|e| format!("creating {}: {e}", base.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = base.join(format!(
        ".toolchain-{key:016x}.tmp-{}-{nanos}",
        std::process::id()
    ));
    println!(
        "cargo:warning=sparsek: {why}; installing the pinned CUDA toolchain ({}) with pip into \
         {} (once; SPARSEK_NO_PROVISION=1 turns this off)",
        wheels.join(" "),
        dir.display()
    );
    let result = install(&python, &wheels, &tmp, parts).and_then(|()| publish(&tmp, &dir, parts));
    if tmp.exists() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result.map(|()| dir)
}

/// pip-installs `wheels` into `tmp` and completes it (lib64 link, check, marker).
fn install(python: &str, wheels: &[String], tmp: &Path, parts: Parts) -> Result<(), String> {
    let out = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--no-compile",
            "--only-binary=:all:",
            "--target",
        ])
        .arg(tmp)
        .args(wheels)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {python} -m pip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{python} -m pip install --target {} {}` failed ({}):\n{}{}",
            tmp.display(),
            wheels.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // nvcc expects lib64/ in places; the wheels ship lib/ (as third_party/setup.sh does).
    #[cfg(unix)]
    if parts.nvcc {
        let lib64 = tmp.join("nvidia/cu13/lib64");
        if !lib64.exists() {
            std::os::unix::fs::symlink("lib", &lib64)
                .map_err(|e| format!("linking {}: {e}", lib64.display()))?;
        }
    }
    if !has_parts(tmp, parts) {
        return Err(format!(
            "pip installed {} but nvcc or the CUTLASS headers are not where expected \
             (nvidia/cu13/bin/nvcc, cutlass_library/source/include)",
            wheels.join(" ")
        ));
    }
    fs::write(tmp.join(COMPLETE), wheels.join("\n"))
        .map_err(|e| format!("writing {}: {e}", tmp.join(COMPLETE).display()))
}

/// Renames the finished `tmp` to `dir`; a complete `dir` from a concurrent build wins.
fn publish(tmp: &Path, dir: &Path, parts: Parts) -> Result<(), String> {
    if fs::rename(tmp, dir).is_ok() {
        return Ok(());
    }
    if dir.join(COMPLETE).is_file() && has_parts(dir, parts) {
        return Ok(()); // another build finished first; `tmp` is discarded
    }
    // An incomplete leftover (not made by this code, which only renames complete copies):
    // replace it, unless a concurrent build does so first.
    fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    match fs::rename(tmp, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join(COMPLETE).is_file() && has_parts(dir, parts) => Ok(()),
        Err(e) => Err(format!(
            "moving {} to {}: {e}",
            tmp.display(),
            dir.display()
        )),
    }
}
