//! All of sparsek's build logic. Always: the README's Rust examples for the doctests
//! (`buildscript/readme.rs`). With the `cuda` feature: find nvcc and CUTLASS (or install
//! the pinned toolchain, `buildscript/provision.rs`), compile every unit the units
//! generator lists (cpp/units/units.cpp: the row units and the hand-written sources of every
//! cpp/<op>/sources.txt, each with its nvcc arguments, as for CMake and the scripts),
//! archive them into libsparsek_kernels.a, compile the cxx bridge, and link the static CUDA
//! runtime.

#[path = "buildscript/readme.rs"]
mod readme;

#[cfg(feature = "cuda")]
#[path = "buildscript/cutlass_version.rs"]
mod cutlass_version;
#[cfg(feature = "cuda")]
#[path = "buildscript/provision.rs"]
mod provision;
#[cfg(feature = "cuda")]
#[path = "buildscript/shared_objects.rs"]
mod shared_objects;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=buildscript");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    readme::write_doctest_copy();
    // docs.rs has no CUDA: the documentation needs no kernels.
    #[cfg(feature = "cuda")]
    if std::env::var_os("DOCS_RS").is_none() {
        cuda::build();
    } else {
        println!("cargo:rustc-env=SPARSEK_CUTLASS_VERSION=none (documentation build)");
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::env;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::SystemTime;

    use super::cutlass_version;
    use super::provision;
    use super::shared_objects::{self, Hashes, Normalizer};

    const SETUP_HINT: &str = "build.rs installs the pinned toolchain (third_party/wheels.txt) itself unless SPARSEK_NO_PROVISION is set; or run `third_party/setup.sh`, or set NVCC (or CUDA_HOME) and CUTLASS_DIR";
    const DEFAULT_ARCHS: &str = "90a,80";

    fn fail(msg: String) -> ! {
        // A panic in a build script prints the message in cargo's error output.
        panic!("\n\nsparsek (feature `cuda`): {msg}\n\n");
    }

    fn manifest_dir() -> PathBuf {
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
    }

    /// nvcc given explicitly: $NVCC, then $CUDA_HOME/$CUDA_PATH, then PATH.
    fn explicit_nvcc() -> Option<PathBuf> {
        for var in ["NVCC", "CUDA_HOME", "CUDA_PATH", "PATH"] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        if let Ok(p) = env::var("NVCC") {
            // The real path: a link to the same nvcc (a cache's stable path to a toolchain
            // folder) must give the kernel objects' command lines, and so their cache keys
            // (buildscript/shared_objects.rs), that the path it points at gives.
            let p = PathBuf::from(p);
            return Some(std::fs::canonicalize(&p).unwrap_or(p));
        }
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            if let Ok(home) = env::var(var) {
                let p = Path::new(&home).join("bin/nvcc");
                if p.is_file() {
                    return Some(p);
                }
            }
        }
        let paths = env::var_os("PATH")?;
        env::split_paths(&paths)
            .map(|dir| dir.join("nvcc"))
            .find(|p| p.is_file())
    }

    /// The toolchain: nvcc, the CUTLASS source dir (checked: version.h within the
    /// supported range), and the pip toolchain directory one of them comes from, if any
    /// (a prefix the shared objects' manifests name by placeholder).
    struct Toolchain {
        nvcc: PathBuf,
        cutlass: PathBuf,
        py: Option<PathBuf>,
    }

    /// nvcc and CUTLASS: what NVCC/CUDA_HOME/CUDA_PATH/PATH and CUTLASS_DIR give; the
    /// rest from third_party/py when `third_party/setup.sh` ran, else from the toolchain
    /// cache, where only the missing parts are installed, if they are not there yet
    /// (buildscript/provision.rs): no CUTLASS wheel when CUTLASS_DIR is set, no CUDA wheel
    /// when an nvcc is found.
    fn find_toolchain(root: &Path) -> Toolchain {
        println!("cargo:rerun-if-env-changed=CUTLASS_DIR");
        let third_party = root.join("third_party/py");
        let setup = |part: provision::Parts| {
            provision::has_parts(&third_party, part).then(|| third_party.clone())
        };
        let (only_nvcc, only_cutlass) = (
            provision::Parts {
                nvcc: true,
                cutlass: false,
            },
            provision::Parts {
                nvcc: false,
                cutlass: true,
            },
        );
        let mut nvcc = explicit_nvcc().map(|p| (p, None));
        let mut cutlass = env::var_os("CUTLASS_DIR").map(|p| (PathBuf::from(p), None));
        if nvcc.is_none() {
            nvcc = setup(only_nvcc).map(|d| (provision::nvcc_in(&d), Some(d)));
        }
        if cutlass.is_none() {
            cutlass = setup(only_cutlass).map(|d| (provision::cutlass_in(&d), Some(d)));
        }
        let missing = provision::Parts {
            nvcc: nvcc.is_none(),
            cutlass: cutlass.is_none(),
        };
        if missing.nvcc || missing.cutlass {
            let what = match (missing.nvcc, missing.cutlass) {
                (true, true) => "no nvcc and no CUTLASS found",
                (true, false) => "no nvcc found",
                _ => "no CUTLASS found (CUTLASS_DIR unset)",
            };
            let why =
                format!("{what} (NVCC, CUDA_HOME, CUDA_PATH, PATH, CUTLASS_DIR, third_party/py)");
            let dir = provision::toolchain(root, &why, missing).unwrap_or_else(|e| fail(e));
            if missing.nvcc {
                nvcc = Some((provision::nvcc_in(&dir), Some(dir.clone())));
            }
            if missing.cutlass {
                cutlass = Some((provision::cutlass_in(&dir), Some(dir)));
            }
        }
        let (Some((nvcc, nvcc_dir)), Some((cutlass, cutlass_dir))) = (nvcc, cutlass) else {
            fail("the toolchain is incomplete after provisioning".into())
        };
        let origin = if cutlass_dir.is_none() {
            "CUTLASS_DIR"
        } else {
            "the pinned wheel"
        };
        let version = match cutlass_version::check(&cutlass, origin) {
            Ok(cutlass_version::Support::Tested(v)) => v,
            Ok(cutlass_version::Support::Newer(v)) => {
                println!(
                    "cargo:warning=sparsek: CUTLASS {v} from {origin} ({}) is newer than the \
                     newest tested ({}): it may not build",
                    cutlass.display(),
                    cutlass_version::NEWEST_TESTED,
                );
                v
            }
            Err(e) => fail(e),
        };
        // The build log (cargo -vv, or the build script's output file), and the crate:
        // sparsek::gpu::CUTLASS_VERSION.
        println!(
            "sparsek: CUTLASS {version} from {origin} ({})",
            cutlass.display()
        );
        println!("cargo:rustc-env=SPARSEK_CUTLASS_VERSION={version}");
        Toolchain {
            nvcc,
            cutlass,
            py: cutlass_dir.or(nvcc_dir),
        }
    }

    /// CUTLASS include dir of a CUTLASS source dir (sparsek uses no CUTLASS utilities).
    fn cutlass_includes(base: &Path) -> Vec<PathBuf> {
        let inc = base.join("include");
        if !inc.join("cutlass/cutlass.h").is_file() {
            fail(format!(
                "CUTLASS headers not found at {}: {SETUP_HINT}",
                inc.display()
            ));
        }
        vec![inc]
    }

    /// What `nvcc --version` prints (part of the key of shared objects), or "".
    fn nvcc_version(nvcc: &Path) -> String {
        Command::new(nvcc)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn mtime(p: &Path) -> Option<SystemTime> {
        fs::metadata(p).and_then(|m| m.modified()).ok()
    }

    /// An object is fresh when it exists, its command line is unchanged, and it is newer
    /// than every dependency nvcc listed (-MD) last time.
    fn is_fresh(obj: &Path, dep: &Path, cmd_stamp: &Path, cmd: &str) -> bool {
        let (Some(t_obj), Ok(old_cmd), Ok(deps)) = (
            mtime(obj),
            fs::read_to_string(cmd_stamp),
            fs::read_to_string(dep),
        ) else {
            return false;
        };
        if old_cmd != cmd {
            return false;
        }
        let joined = deps.replace("\\\n", " ");
        let Some((_, files)) = joined.split_once(": ") else {
            return false;
        };
        files
            .split_whitespace()
            .all(|f| mtime(Path::new(f)).is_some_and(|t| t <= t_obj))
    }

    /// One compilation: a source, its object, and nvcc's arguments.
    struct Job {
        src: String,
        obj: PathBuf,
        dep: PathBuf,
        stamp: PathBuf,
        /// Its manifest for other checkouts (buildscript/shared_objects.rs).
        manifest: PathBuf,
        args: Vec<String>,
        cmd_line: String,
    }

    /// The cargo features that pick what is compiled (cpp/core/features.hpp), as the
    /// comma-separated names the units program takes.
    fn build_features() -> String {
        const NAMES: [&str; 7] = [
            "bf16",
            "transpose",
            "any-block",
            "tuning",
            "sddmm",
            "attention",
            "fp8",
        ];
        NAMES
            .iter()
            .filter(|n| {
                let var = format!("CARGO_FEATURE_{}", n.to_uppercase().replace('-', "_"));
                env::var_os(var).is_some()
            })
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    }

    /// How many nvcc run at once: cargo's NUM_JOBS, and no more than one per 8 GiB of the
    /// machine's memory where /proc/meminfo tells it (a Hopper row unit's cicc holds up to
    /// ~8 GB: cpp/units/units.cpp cuts the units for that), so a many-core build does not
    /// run out of memory.
    fn nvcc_jobs() -> usize {
        let cores = env::var("NUM_JOBS")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(1);
        let memory_slots = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|info| {
                let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                usize::try_from(kib / (8 << 20)).ok()
            })
            .unwrap_or(usize::MAX);
        cores.min(memory_slots).clamp(1, 4096)
    }

    /// The sources of the units generator: cpp/units/*.cpp and every family's
    /// cpp/<op>/<family>/rows.cpp (its row table), sorted; found, so a family or an operation
    /// edits no list here.
    fn units_sources(root: &Path) -> Vec<PathBuf> {
        let cpp = root.join("cpp");
        let read = |dir: &Path| -> Vec<PathBuf> {
            let entries = fs::read_dir(dir)
                .unwrap_or_else(|e| fail(format!("reading {}: {e}", dir.display())));
            entries.filter_map(|e| e.ok().map(|e| e.path())).collect()
        };
        let mut sources: Vec<PathBuf> = read(&cpp.join("units"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "cpp"))
            .collect();
        for op in read(&cpp).into_iter().filter(|p| p.is_dir()) {
            sources.extend(
                read(&op)
                    .into_iter()
                    .map(|family| family.join("rows.cpp"))
                    .filter(|p| p.is_file()),
            );
        }
        sources.sort();
        sources
    }

    /// The units of libsparsek_kernels for these features and architectures, each with its
    /// nvcc arguments (all but the include directories, `-c` and the output): the units
    /// generator (cpp/units/units.cpp, CMake and the scripts run it too) compiled for the
    /// host and run; it writes the row units into `gen`, as many per group of rows as nvcc
    /// runs at once. Also the value of -DSPARSEK_FEATURES, for the bridge.
    fn list_units(
        nvcc: &Path,
        root: &Path,
        out: &Path,
        gen: &Path,
        features: &str,
        archs: &str,
        lineinfo: bool,
    ) -> (String, Vec<(String, Vec<String>)>) {
        let exe = out.join("sparsek-units");
        let status = Command::new(nvcc)
            .args(["-std=c++17", "-O1", "-x", "c++"])
            .arg(format!("-I{}", root.join("include").display()))
            .arg(format!("-I{}", root.join("cpp").display()))
            .args(units_sources(root))
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap_or_else(|e| fail(format!("running nvcc on cpp/units/units.cpp: {e}")));
        if !status.success() {
            fail("compiling the units generator (cpp/units/units.cpp) failed".into());
        }
        fs::create_dir_all(gen)
            .unwrap_or_else(|e| fail(format!("creating {}: {e}", gen.display())));
        // Run in the root, so the hand-written units' paths are relative to it (cpp/...).
        let output = Command::new(&exe)
            .current_dir(root)
            .arg("units")
            .arg("cpp")
            .arg(gen)
            .arg(if features.is_empty() { "-" } else { features })
            .arg(archs)
            .arg(if lineinfo { "1" } else { "0" })
            .output()
            .unwrap_or_else(|e| fail(format!("running {}: {e}", exe.display())));
        if !output.status.success() {
            fail(format!(
                "cpp/units/units.cpp: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut lines = text.lines();
        let bits = lines
            .next()
            .and_then(|l| l.strip_prefix("features "))
            .unwrap_or_else(|| fail("cpp/units/units.cpp printed no feature line".into()))
            .to_string();
        let units = lines
            .map(|l| {
                let mut fields = l.split('\t').map(str::to_string);
                let path = fields.next().unwrap_or_default();
                (path, fields.collect())
            })
            .collect();
        (bits, units)
    }

    /// Where objects are kept: beside the profile directories of the target dir, so the
    /// debug and release builds (tests, benches) share them; nvcc's flags do not depend on
    /// the cargo profile. SPARSEK_KERNEL_CACHE overrides.
    fn object_dir(out: &Path) -> PathBuf {
        println!("cargo:rerun-if-env-changed=SPARSEK_KERNEL_CACHE");
        if let Ok(dir) = env::var("SPARSEK_KERNEL_CACHE") {
            return PathBuf::from(dir);
        }
        // OUT_DIR is <target>[/<triple>]/<profile>/build/<package-hash>/out.
        match out.ancestors().nth(4) {
            Some(target) => target.join("sparsek-kernels"),
            None => out.join("obj"),
        }
    }

    fn hash_of(text: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        h.finish()
    }

    /// Runs nvcc for every stale job, `jobs` at a time (the CUTLASS units are memory- and
    /// CPU-hungry; cargo's NUM_JOBS is the budget). Objects are written under a temporary
    /// name and renamed, so concurrent builds sharing the cache never see half an object.
    /// A stale object that another checkout compiled from the same contents is copied
    /// instead (buildscript/shared_objects.rs), and every fresh object is recorded so.
    fn compile(nvcc: &Path, jobs: Vec<Job>, norm: &Normalizer) {
        let mut hashes = Hashes::default();
        let mut stale = Vec::new();
        for job in jobs {
            let target = shared_objects::Target {
                obj: &job.obj,
                dep: &job.dep,
                stamp: &job.stamp,
                cmd_line: &job.cmd_line,
            };
            if is_fresh(&job.obj, &job.dep, &job.stamp, &job.cmd_line) {
                let m = &job.manifest;
                shared_objects::record(m, &job.obj, &job.dep, false, norm, &mut hashes);
            } else if shared_objects::reuse(&job.manifest, &target, norm, &mut hashes) {
                eprintln!("nvcc: {} (reused, compiled by another checkout)", job.src);
            } else {
                stale.push(job);
            }
        }
        let parallel = nvcc_jobs();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failures = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..parallel.min(stale.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(job) = stale.get(i) else { break };
                    eprintln!("nvcc: {}", job.src);
                    let tmp = job
                        .obj
                        .with_extension(format!("o.tmp{}", std::process::id()));
                    let ok = Command::new(nvcc)
                        .args(&job.args)
                        .arg("-o")
                        .arg(&tmp)
                        .args(["-MD", "-MF"])
                        .arg(&job.dep)
                        .status()
                        .map(|s| s.success())
                        .unwrap_or(false);
                    if ok && fs::rename(&tmp, &job.obj).is_ok() {
                        let _ = fs::write(&job.stamp, &job.cmd_line);
                    } else {
                        let _ = fs::remove_file(&tmp);
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(job.src.clone());
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
        if !failures.is_empty() {
            fail(format!("nvcc failed on {}", failures.join(", ")));
        }
        // Compiled from the files as they are now (unless one changed meanwhile): record.
        let mut hashes = Hashes::default();
        for job in &stale {
            if is_fresh(&job.obj, &job.dep, &job.stamp, &job.cmd_line) {
                let m = &job.manifest;
                shared_objects::record(m, &job.obj, &job.dep, true, norm, &mut hashes);
            }
        }
    }

    pub fn build() {
        let root = manifest_dir();
        let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let toolchain = find_toolchain(&root);
        let nvcc = toolchain.nvcc.clone();
        let cuda_root = nvcc
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let cuda_include = cuda_root.join("include");
        let cuda_lib = ["lib64", "lib"]
            .iter()
            .map(|d| cuda_root.join(d))
            .find(|d| d.join("libcudart_static.a").is_file())
            .unwrap_or_else(|| {
                fail(format!(
                    "libcudart_static.a not found under {}: {SETUP_HINT}",
                    cuda_root.display()
                ))
            });
        let cutlass = cutlass_includes(&toolchain.cutlass);

        let version = nvcc_version(&nvcc);

        println!("cargo:rerun-if-env-changed=SPARSEK_CUDA_ARCHS");
        let archs = env::var("SPARSEK_CUDA_ARCHS").unwrap_or_else(|_| DEFAULT_ARCHS.to_string());
        // Source lines in the kernels, for ncu and compute-sanitizer: opt-in, as it costs
        // about a tenth of cicc's time.
        println!("cargo:rerun-if-env-changed=SPARSEK_LINEINFO");
        let lineinfo = env::var("SPARSEK_LINEINFO").is_ok_and(|v| v == "1");
        println!("cargo:rerun-if-changed=cpp");
        println!("cargo:rerun-if-changed=include");

        let obj_dir = object_dir(&out);
        fs::create_dir_all(&obj_dir)
            .unwrap_or_else(|e| fail(format!("creating {}: {e}", obj_dir.display())));
        // Row units go in this build's own OUT_DIR, not beside the shared objects: two builds
        // of different trees sharing the object directory (SPARSEK_KERNEL_CACHE) rewrote each
        // other's units there while nvcc read them, and cached objects of one tree's text under
        // the other's manifest. A unit's text depends only on its rows, and its path is
        // normalized (@GEN@): a build whose unit has the same text reuses the object through
        // its manifest (buildscript/shared_objects.rs).
        let gen = out.join("gen");
        let norm = Normalizer::new(&root, toolchain.py.as_deref()).with(&gen, "@GEN@");
        let features = build_features();
        let (feature_bits, units) =
            list_units(&nvcc, &root, &out, &gen, &features, &archs, lineinfo);
        let mut jobs = Vec::new();
        for (src, unit_args) in &units {
            let generated = Path::new(src).starts_with(&gen);
            let mut args = unit_args.clone();
            for inc in [root.join("include"), root.join("cpp")]
                .iter()
                .chain(cutlass.iter())
            {
                args.push(format!("-I{}", inc.display()));
            }
            args.extend(["-c".into(), root.join(src).display().to_string()]);
            // Stable names for generated units (their absolute path is this build's OUT_DIR).
            let src = &if generated {
                format!(
                    "gen/{}",
                    Path::new(src)
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                )
            } else {
                src.clone()
            };
            let cmd_line = format!("{} {}", nvcc.display(), args.join(" "));
            let stem = format!(
                "{}-{:016x}",
                src.replace(['/', '.'], "_"),
                hash_of(&cmd_line)
            );
            jobs.push(Job {
                src: src.clone(),
                obj: obj_dir.join(format!("{stem}.o")),
                dep: obj_dir.join(format!("{stem}.d")),
                stamp: obj_dir.join(format!("{stem}.cmd")),
                manifest: shared_objects::manifest_path(&obj_dir, src, &cmd_line, &version, &norm),
                args,
                cmd_line,
            });
        }
        let objects: Vec<PathBuf> = jobs.iter().map(|j| j.obj.clone()).collect();
        compile(&nvcc, jobs, &norm);

        let lib = out.join("libsparsek_kernels.a");
        let _ = fs::remove_file(&lib);
        let status = Command::new(env::var("AR").unwrap_or_else(|_| "ar".into()))
            .arg("crs")
            .arg(&lib)
            .args(&objects)
            .status()
            .unwrap_or_else(|e| fail(format!("running ar: {e}")));
        if !status.success() {
            fail("ar failed".into());
        }

        // The bridge's C++ half: each operation's cpp/<operation>/bridge.cc, found rather than
        // listed, so an operation's bridge touches no shared build file.
        let mut bridge_sources: Vec<PathBuf> = fs::read_dir(root.join("cpp"))
            .unwrap_or_else(|e| fail(format!("reading cpp/: {e}")))
            .filter_map(|entry| entry.ok().map(|e| e.path().join("bridge.cc")))
            .filter(|path| path.is_file())
            .collect();
        bridge_sources.sort();
        cxx_build::bridge("src/device/sys.rs")
            .files(&bridge_sources)
            .define("SPARSEK_FEATURES", format!("{feature_bits}u").as_str())
            .include(root.join("include"))
            .include(root.join("cpp"))
            .include(&cuda_include)
            .std("c++17")
            .compile("sparsek_bridge");
        println!("cargo:rerun-if-changed=src/device/sys.rs");

        // After the bridge (which calls into it), before cudart (which it calls).
        println!("cargo:rustc-link-search=native={}", out.display());
        println!("cargo:rustc-link-lib=static=sparsek_kernels");
        println!("cargo:rustc-link-search=native={}", cuda_lib.display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for sys in ["stdc++", "dl", "rt", "pthread"] {
            println!("cargo:rustc-link-lib=dylib={sys}");
        }
        // For dependants (links = "sparsek_kernels"): where the library and headers are.
        println!("cargo:lib_dir={}", out.display());
        println!("cargo:include={}", root.join("include").display());
        println!("cargo:nvcc={}", nvcc.display());
    }
}
