//! The CUTLASS a build uses: its version, read from `include/cutlass/version.h`, against
//! the range sparsek supports. build.rs checks every CUTLASS tree with it (a user's
//! `CUTLASS_DIR` or the pinned wheel) before compiling anything; `tests/build_script.rs`
//! tests it.

use std::fmt;
use std::path::Path;

/// A CUTLASS release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The oldest CUTLASS sparsek builds with (the pinned wheel's, third_party/wheels.txt).
pub const OLDEST: Version = Version {
    major: 4,
    minor: 2,
    patch: 0,
};

/// The newest CUTLASS every unit of the `full` set was compiled against (a whole build;
/// scripts/check-cutlass.sh checks any tree); newer 4.x trees build with a warning.
pub const NEWEST_TESTED: Version = Version {
    major: 4,
    minor: 7,
    patch: 0,
};

/// What a CUTLASS tree is, for the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Within `OLDEST ..= NEWEST_TESTED`.
    Tested(Version),
    /// Newer than `NEWEST_TESTED`, same major: built, with a warning.
    Newer(Version),
}

/// The version `#define`d in the text of a `cutlass/version.h`, if all three parts are.
pub fn parse(header: &str) -> Option<Version> {
    let field = |name: &str| -> Option<u32> {
        header.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("#define"), Some(n), Some(value)) if n == name => value.parse().ok(),
                _ => None,
            }
        })
    };
    Some(Version {
        major: field("CUTLASS_MAJOR")?,
        minor: field("CUTLASS_MINOR")?,
        patch: field("CUTLASS_PATCH")?,
    })
}

/// The supported range, as the messages say it.
pub fn range() -> String {
    format!("{OLDEST} to {NEWEST_TESTED} tested; newer 4.x builds with a warning")
}

/// The CUTLASS source tree `root` (holding `include/cutlass/`), checked: its version.h
/// read and within range. `origin` says where the tree came from, for the messages
/// (e.g. "CUTLASS_DIR").
pub fn check(root: &Path, origin: &str) -> Result<Support, String> {
    let header = root.join("include/cutlass/version.h");
    let fix = format!(
        "set CUTLASS_DIR to a CUTLASS source tree (the directory holding include/cutlass/) of \
         a supported version ({}), or unset it so that the pinned {OLDEST} is used",
        range()
    );
    let text = std::fs::read_to_string(&header).map_err(|e| {
        format!(
            "CUTLASS from {origin} ({}): cannot read {} ({e}), so its version is unknown. \
             Fix: {fix}",
            root.display(),
            header.display()
        )
    })?;
    let version = parse(&text).ok_or_else(|| {
        format!(
            "CUTLASS from {origin} ({}): {} defines no CUTLASS_MAJOR / CUTLASS_MINOR / \
             CUTLASS_PATCH. Fix: {fix}",
            root.display(),
            header.display()
        )
    })?;
    if version < OLDEST || version.major != OLDEST.major {
        return Err(format!(
            "CUTLASS {version} from {origin} ({}) is not supported (sparsek needs CUTLASS \
             {}.x from {OLDEST}: {}). Fix: {fix}",
            root.display(),
            OLDEST.major,
            range()
        ));
    }
    Ok(if version > NEWEST_TESTED {
        Support::Newer(version)
    } else {
        Support::Tested(version)
    })
}
