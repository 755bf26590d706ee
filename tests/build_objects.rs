//! The build script's sharing of compiled kernel objects (buildscript/shared_objects.rs):
//! an object is reused from its manifest only when every file it read is byte-identical,
//! whether another checkout compiled it or this checkout did before a fresh clone at the
//! same path made every source newer.

#[path = "../buildscript/provision.rs"]
#[allow(dead_code)]
mod provision;
#[path = "../buildscript/shared_objects.rs"]
#[allow(dead_code)]
mod shared_objects;

use shared_objects::{Hashes, Normalizer, Target};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A checkout at `root` with one source and one header, and an object directory.
fn checkout(name: &str) -> (PathBuf, PathBuf) {
    let base = std::env::temp_dir().join(format!(
        "sparsek-build-objects-{}-{name}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&base);
    let root = base.join("checkout");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("unit.cu"), "#include \"head.hpp\"\n").unwrap();
    fs::write(root.join("head.hpp"), "// header\n").unwrap();
    let objs = base.join("objects");
    fs::create_dir_all(&objs).unwrap();
    (root, objs)
}

/// What build.rs does after compiling `unit.cu` in `root`: the object, its -MD list, its
/// command-line stamp and the manifest. Returns the manifest's path.
fn compiled(root: &Path, objs: &Path, obj_name: &str, cmd: &str) -> PathBuf {
    let obj = objs.join(obj_name);
    fs::write(&obj, b"object bytes").unwrap();
    let dep = obj.with_extension("d");
    fs::write(
        &dep,
        format!(
            "{}: {} \\\n {}\n",
            obj.display(),
            root.join("unit.cu").display(),
            root.join("head.hpp").display()
        ),
    )
    .unwrap();
    fs::write(obj.with_extension("cmd"), cmd).unwrap();
    let manifest = objs.join("unit-key.manifest");
    let norm = Normalizer::new(root, None);
    shared_objects::record(&manifest, &obj, &dep, true, &norm, &mut Hashes::default());
    manifest
}

/// Whether build.rs would reuse `manifest`'s object as `obj_name` (its dependency file and
/// stamp beside it) for the command line `cmd`.
fn reuses(root: &Path, objs: &Path, manifest: &Path, obj_name: &str, cmd: &str) -> bool {
    let obj = objs.join(obj_name);
    let (dep, stamp) = (obj.with_extension("d"), obj.with_extension("cmd"));
    let target = Target {
        obj: &obj,
        dep: &dep,
        stamp: &stamp,
        cmd_line: cmd,
    };
    let norm = Normalizer::new(root, None);
    shared_objects::reuse(manifest, &target, &norm, &mut Hashes::default())
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).unwrap().modified().unwrap()
}

/// Sources rewritten with the same bytes after the object was made (a fresh clone at the
/// same path): the checkout's own object is kept, not compiled again, and made newer than
/// the sources.
#[test]
fn own_object_with_identical_sources_is_kept() {
    let (root, objs) = checkout("own");
    let manifest = compiled(&root, &objs, "unit-a.o", "nvcc unit.cu");
    let obj = objs.join("unit-a.o");
    let old = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&obj)
        .unwrap()
        .set_modified(old)
        .unwrap();
    fs::write(root.join("head.hpp"), "// header\n").unwrap();
    assert!(reuses(&root, &objs, &manifest, "unit-a.o", "nvcc unit.cu"));
    assert_eq!(fs::read(&obj).unwrap(), b"object bytes");
    assert!(mtime(&obj) >= mtime(&root.join("head.hpp")));
}

/// A source whose bytes changed: the object is not reused, its own or another's.
#[test]
fn changed_source_is_compiled_again() {
    let (root, objs) = checkout("changed");
    let manifest = compiled(&root, &objs, "unit-a.o", "nvcc unit.cu");
    fs::write(root.join("head.hpp"), "// header, changed\n").unwrap();
    for name in ["unit-a.o", "unit-b.o"] {
        assert!(
            !reuses(&root, &objs, &manifest, name, "nvcc unit.cu"),
            "{name}"
        );
    }
    assert!(!objs.join("unit-b.o").exists());
}

/// Another checkout's object from identical sources is copied under this one's name.
#[test]
fn other_checkouts_object_is_copied() {
    let (root, objs) = checkout("other");
    let manifest = compiled(&root, &objs, "unit-a.o", "nvcc unit.cu");
    assert!(reuses(
        &root,
        &objs,
        &manifest,
        "unit-b.o",
        "nvcc other/unit.cu"
    ));
    let obj = objs.join("unit-b.o");
    assert_eq!(fs::read(&obj).unwrap(), b"object bytes");
    assert_eq!(
        fs::read_to_string(obj.with_extension("cmd")).unwrap(),
        "nvcc other/unit.cu"
    );
}
