//! sparsek's BSR validation and block-pattern builders for C++ (through [cxx]), so a C++
//! user of `sparsek::kernels` need not re-implement them.
//!
//! C++ includes the committed, generated header `<sparsek/rust.h>` (with `-I include`; it
//! includes cxx's `rust/cxx.h`, also under `include/`) and links `libsparsek_cxx.a` (the
//! CMake target `sparsek::rust`, option `SPARSEK_WITH_RUST`). Functions are in namespace
//! `sparsek::rust`; an error is thrown as `rust::Error` whose `what()` is the readable
//! message (the `Display` of sparsek's `BsrError`).
//!
//! ```cpp
//! #include <sparsek/rust.h>
//! try {
//!   sparsek::rust::validate_bsr(m, k, bm, bk, {row_ptr.data(), row_ptr.size()},
//!                               {col_idx.data(), col_idx.size()}, values_len);
//! } catch (const rust::Error& e) {
//!   std::fprintf(stderr, "bad BSR: %s\n", e.what());   // launch nothing
//! }
//! sparsek::rust::BsrPattern p = sparsek::rust::topk_pattern({scores.data(), scores.size()},
//!                                                          rows, cols, 8);
//! ```
//!
//! Sizes are `int64_t` on the C++ side (as in `sparsek::BsrView`); a negative one is an
//! error, not a wrap-around. Nothing here aborts or panics on any input: a block side
//! above `i32::MAX` is refused like every other defect, and a pattern beyond
//! `sparsek::BlockMask`'s limits (`i32::MAX` blocks per side, `2^32` in all) is refused
//! before anything is allocated.

use sparsek::{BlockMask, BlockShape};

#[cxx::bridge(namespace = "sparsek::rust")]
mod ffi {
    /// A block pattern in BSR index form: `row_ptr` (block_rows + 1 entries, from 0) and
    /// `col_idx` (sorted within each block-row), the arrays of a `sparsek::BsrView`
    /// without values.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct BsrPattern {
        block_rows: i64,
        block_cols: i64,
        row_ptr: Vec<i32>,
        col_idx: Vec<i32>,
    }

    /// A BSR pattern's blocks by block-column: the arrays of a
    /// `sparsek::TransposeIndexView` (op(A) = A^T, `SpmmOptions::transpose_index`), on the
    /// host: `col_ptr` (block_cols + 1 entries), `row_idx` and `block_id` (nnzb each).
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct TransposeIndex {
        col_ptr: Vec<i32>,
        row_idx: Vec<i32>,
        block_id: Vec<i32>,
    }

    unsafe extern "C++" {
        // The generated header includes cxx's own (for rust::Error, rust::Vec, rust::Slice).
        include!("rust/cxx.h");
    }

    extern "Rust" {
        /// Checks BSR index arrays for an m x k matrix of bm x bk blocks holding
        /// values_len elements of values: every invariant sparsek::spmm trusts (row_ptr
        /// length, start, monotonicity and end; col_idx sorted, unique, in range; values
        /// length). Throws rust::Error naming the first defect.
        fn validate_bsr(
            m: i64,
            k: i64,
            bm: i64,
            bk: i64,
            row_ptr: &[i32],
            col_idx: &[i32],
            values_len: i64,
        ) -> Result<()>;

        /// The k highest-scoring blocks of each row of a row-major rows x cols score
        /// matrix (ties to the lower column, NaN lowest). Throws rust::Error when
        /// scores.size() != rows * cols or k > cols.
        fn topk_pattern(scores: &[f32], rows: i64, cols: i64, k: i64) -> Result<BsrPattern>;

        /// The causal (lower-triangular) n x n block pattern; band > 0 keeps only the band
        /// blocks ending at the diagonal in each row (sliding window), band == 0 the whole
        /// lower triangle. Throws rust::Error when n or band is negative.
        fn causal_pattern(n: i64, band: i64) -> Result<BsrPattern>;

        /// The transpose index of the BSR pattern of an m x k matrix of bm x bk blocks
        /// (what sparsek::spmm walks for op(A) = A^T), after the checks of validate_bsr.
        /// Throws rust::Error naming the first defect.
        fn transpose_index(
            m: i64,
            k: i64,
            bm: i64,
            bk: i64,
            row_ptr: &[i32],
            col_idx: &[i32],
        ) -> Result<TransposeIndex>;
    }
}

pub use ffi::{BsrPattern, TransposeIndex};

/// A size from C++: refuses a negative one (it would wrap to a huge `usize`).
fn size(name: &str, v: i64) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{name} = {v} is negative"))
}

/// See the bridge declaration (the C++ header carries the same comment).
pub fn validate_bsr(
    m: i64,
    k: i64,
    bm: i64,
    bk: i64,
    row_ptr: &[i32],
    col_idx: &[i32],
    values_len: i64,
) -> Result<(), String> {
    let block = BlockShape::new(size("bm", bm)?, size("bk", bk)?);
    sparsek::validate_parts(
        size("m", m)?,
        size("k", k)?,
        block,
        row_ptr,
        col_idx,
        size("values_len", values_len)?,
    )
    .map_err(|e| e.to_string())
}

/// See the bridge declaration.
pub fn topk_pattern(scores: &[f32], rows: i64, cols: i64, k: i64) -> Result<BsrPattern, String> {
    let (rows, cols, k) = (size("rows", rows)?, size("cols", cols)?, size("k", k)?);
    // topk_per_row checks rows * cols (and the mask limits) before anything else.
    let mask = BlockMask::topk_per_row(scores, rows, cols, k).map_err(|e| e.to_string())?;
    to_pattern(&mask)
}

/// See the bridge declaration.
pub fn causal_pattern(n: i64, band: i64) -> Result<BsrPattern, String> {
    let n = size("n", n)?;
    let band = match size("band", band)? {
        0 => None,
        w => Some(w),
    };
    let mask = BlockMask::causal(n, band).map_err(|e| e.to_string())?;
    to_pattern(&mask)
}

/// See the bridge declaration.
pub fn transpose_index(
    m: i64,
    k: i64,
    bm: i64,
    bk: i64,
    row_ptr: &[i32],
    col_idx: &[i32],
) -> Result<TransposeIndex, String> {
    let block = BlockShape::new(size("bm", bm)?, size("bk", bk)?);
    let t = sparsek::TransposeIndex::from_pattern(
        size("m", m)?,
        size("k", k)?,
        block,
        row_ptr,
        col_idx,
    )
    .map_err(|e| e.to_string())?;
    Ok(TransposeIndex {
        col_ptr: t.col_ptr().to_vec(),
        row_idx: t.row_idx().to_vec(),
        block_id: t.block_id().to_vec(),
    })
}

/// A mask's kept blocks as `row_ptr` / `col_idx`, refusing what overflows `i32` and
/// what cannot be allocated.
fn to_pattern(mask: &BlockMask) -> Result<BsrPattern, String> {
    fn idx<T: TryFrom<usize>>(what: &str, v: usize) -> Result<T, String> {
        T::try_from(v).map_err(|_| format!("{what} = {v} overflows the i32 indices"))
    }
    let (rows, cols) = (mask.rows(), mask.cols());
    let (block_rows, block_cols): (i32, i32) =
        (idx("block rows", rows)?, idx("block columns", cols)?);
    let alloc = |what: &str, n: usize| format!("cannot allocate {n} entries of {what}");
    let mut row_ptr = Vec::new();
    // rows <= i32::MAX (checked above): + 1 cannot overflow.
    row_ptr
        .try_reserve_exact(rows + 1)
        .map_err(|_| alloc("row_ptr", rows + 1))?;
    let mut col_idx = Vec::new();
    col_idx
        .try_reserve_exact(mask.count())
        .map_err(|_| alloc("col_idx", mask.count()))?;
    row_ptr.push(0);
    for r in 0..rows {
        for c in mask.row_cols(r) {
            col_idx.push(idx("block column", c)?);
        }
        row_ptr.push(idx("nnzb", col_idx.len())?);
    }
    Ok(BsrPattern {
        block_rows: block_rows.into(),
        block_cols: block_cols.into(),
        row_ptr,
        col_idx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // 4 x 6 blocks of 2 x 3: an 8 x 18 matrix.
    const M: i64 = 8;
    const K: i64 = 18;
    const ROW_PTR: [i32; 5] = [0, 2, 2, 5, 6];
    const COL_IDX: [i32; 6] = [0, 3, 1, 2, 5, 4];
    const VALUES: i64 = 6 * 2 * 3;

    fn check(row_ptr: &[i32], col_idx: &[i32], values_len: i64) -> Result<(), String> {
        validate_bsr(M, K, 2, 3, row_ptr, col_idx, values_len)
    }

    #[test]
    fn transpose_index_lists_blocks_by_column() {
        let t = transpose_index(M, K, 2, 3, &ROW_PTR, &COL_IDX).unwrap();
        // Columns 0..6 hold blocks (row 0), (row 2), (row 2), (row 0), (row 3), (row 2).
        assert_eq!(t.col_ptr, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(t.row_idx, [0, 2, 2, 0, 3, 2]);
        assert_eq!(t.block_id, [0, 2, 3, 1, 5, 4]);
        assert_eq!(
            transpose_index(M, K, 2, 3, &ROW_PTR, &[0, 3, 2, 1, 5, 4]).unwrap_err(),
            "col_idx of block-row 2 is not sorted (2 then 1)"
        );
        assert!(transpose_index(M, K, -2, 3, &ROW_PTR, &COL_IDX).is_err());
    }

    #[test]
    fn valid_bsr_passes() {
        assert_eq!(check(&ROW_PTR, &COL_IDX, VALUES), Ok(()));
        // No blocks at all is valid too.
        assert_eq!(check(&[0; 5], &[], 0), Ok(()));
    }

    #[test]
    fn malformed_bsr_names_the_defect() {
        let err = |row_ptr: &[i32], col_idx: &[i32], values_len| {
            check(row_ptr, col_idx, values_len).unwrap_err()
        };
        assert_eq!(
            err(&ROW_PTR, &[0, 3, 2, 1, 5, 4], VALUES),
            "col_idx of block-row 2 is not sorted (2 then 1)"
        );
        assert_eq!(
            err(&ROW_PTR, &[0, 3, 1, 2, 6, 4], VALUES),
            "col_idx of block-row 2 holds 6, outside 0..6"
        );
        assert_eq!(
            err(&ROW_PTR, &[0, 3, 1, 1, 5, 4], VALUES),
            "col_idx of block-row 2 holds column 1 twice"
        );
        assert_eq!(
            err(&[0, 2, 1, 5, 6], &COL_IDX, VALUES),
            "row_ptr is ragged at entry 2: decreases from 2 to 1"
        );
        assert_eq!(
            err(&[0, 2, 2, 5], &COL_IDX, VALUES),
            "row_ptr has 4 entries; block rows + 1 = 5 expected"
        );
        assert_eq!(
            err(&ROW_PTR, &COL_IDX, VALUES - 1),
            "values has 35 elements; nnzb * bm * bk = 36 expected"
        );
        assert_eq!(
            validate_bsr(M, 17, 2, 3, &ROW_PTR, &COL_IDX, VALUES).unwrap_err(),
            "k = 17 is not a multiple of the block side 3"
        );
        assert_eq!(
            validate_bsr(-8, K, 2, 3, &ROW_PTR, &COL_IDX, VALUES).unwrap_err(),
            "m = -8 is negative"
        );
    }

    #[test]
    fn topk_pattern_keeps_the_best_blocks() {
        #[rustfmt::skip]
        let scores = [
            0.1, 0.9, 0.5, 0.7,
            f32::NAN, 0.2, 0.2, 0.0,
            3.0, 2.0, 1.0, 0.0,
        ];
        let p = topk_pattern(&scores, 3, 4, 2).unwrap();
        assert_eq!(
            p,
            BsrPattern {
                block_rows: 3,
                block_cols: 4,
                row_ptr: vec![0, 2, 4, 6],
                col_idx: vec![1, 3, 1, 2, 0, 1],
            }
        );
        // The pattern is a valid BSR for any block shape.
        validate_bsr(3 * 16, 4 * 32, 16, 32, &p.row_ptr, &p.col_idx, 6 * 16 * 32).unwrap();
    }

    #[test]
    fn topk_pattern_refuses_bad_input() {
        assert_eq!(
            topk_pattern(&[0.0; 11], 3, 4, 2).unwrap_err(),
            "input has 11 elements; 12 expected"
        );
        assert_eq!(
            topk_pattern(&[0.0; 12], 3, 4, 5).unwrap_err(),
            "invalid pattern: top-5 of a row of 4 blocks"
        );
        assert_eq!(
            topk_pattern(&[], 0, 4, -1).unwrap_err(),
            "k = -1 is negative"
        );
    }

    #[test]
    fn causal_pattern_is_lower_triangular() {
        let full = causal_pattern(3, 0).unwrap();
        assert_eq!(full.row_ptr, [0, 1, 3, 6]);
        assert_eq!(full.col_idx, [0, 0, 1, 0, 1, 2]);
        let band = causal_pattern(3, 2).unwrap();
        assert_eq!(band.row_ptr, [0, 1, 3, 5]);
        assert_eq!(band.col_idx, [0, 0, 1, 1, 2]);
        assert_eq!(causal_pattern(3, -1).unwrap_err(), "band = -1 is negative");
    }

    /// 2^32 + 16: above i32::MAX, and `as i32` truncates it to 16.
    const HUGE: i64 = (1 << 32) + 16;

    /// Defect 1: a block side above i32::MAX passed validation (the kernels truncate it).
    #[test]
    fn defect1_validate_bsr_refuses_block_side_above_i32_max() {
        // m = bm = 2^32 + 16: one block-row and one block, as the kernels would see it.
        assert_eq!(
            validate_bsr(HUGE, 1, HUGE, 1, &[0, 1], &[0], HUGE).unwrap_err(),
            "block side bm = 4294967312 exceeds 2147483647, the largest block side the \
             kernels take (i32)"
        );
        let e = validate_bsr(16, HUGE, 16, HUGE, &[0, 0], &[], 0).unwrap_err();
        assert!(e.starts_with("block side bk = 4294967312 exceeds"), "{e}");
        // The wrapping product of defect 2: (2^32+16) x (2^60-2^32+16) "holds" 256.
        let c = (1i64 << 60) - (1 << 32) + 16;
        let e = validate_bsr(HUGE, c, HUGE, c, &[0, 1], &[0], 256).unwrap_err();
        assert!(e.starts_with("block side bm"), "{e}");
        let max = i32::MAX as i64;
        validate_bsr(max, max, max, max, &[0, 0], &[], 0).unwrap();
        validate_bsr(i64::MAX, 1, i64::MAX, 1, &[0, 0], &[], 0).unwrap_err();
    }

    /// Defect 3: causal_pattern(n) multiplied n * n unchecked (a panic in debug, an abort
    /// on the allocation in release); topk_pattern likewise for rows * cols.
    #[test]
    fn defect3_patterns_refuse_huge_grids() {
        for n in [1i64 << 32, (1 << 16) + 1, i64::MAX] {
            let e = causal_pattern(n, 0).unwrap_err();
            assert!(e.contains("block mask is too large"), "{n}: {e}");
            let e = causal_pattern(n, 3).unwrap_err();
            assert!(e.contains("block mask is too large"), "{n}: {e}");
        }
        let e = topk_pattern(&[], 1 << 32, 1 << 32, 0).unwrap_err();
        assert!(e.contains("block mask is too large"), "{e}");
        let e = topk_pattern(&[], i64::MAX, 2, 1).unwrap_err();
        assert!(e.contains("block mask is too large"), "{e}");
        // An empty pattern with a huge side is fine, and is not looped over.
        let p = topk_pattern(&[], 0, i32::MAX as i64, 0).unwrap();
        assert_eq!(
            (p.block_rows, p.block_cols, p.row_ptr, p.col_idx),
            (0, i32::MAX as i64, vec![0], vec![])
        );
        assert_eq!(causal_pattern(0, 0).unwrap().row_ptr, [0]);
    }

    /// What the committed include/sparsek/rust.h has before the generated text.
    const PROLOGUE: &str = "\
// Generated by cxx from bindings/sparsek-cxx/src/lib.rs: do not edit. Regenerate with
// scripts/update-cxx-headers.sh (the sparsek-cxx test committed_headers_are_current
// fails when this file is stale). Use with -I include; link libsparsek_cxx.a (CMake:
// sparsek::rust).
";

    /// The committed C++ headers are what this build generates: fails when
    /// include/sparsek/rust.h or include/rust/cxx.h is stale. With
    /// `SPARSEK_UPDATE_HEADERS=1` it writes them instead (scripts/update-cxx-headers.sh).
    #[test]
    fn committed_headers_are_current() {
        let gen = concat!(env!("OUT_DIR"), "/cxxbridge/include");
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
        let update = std::env::var_os("SPARSEK_UPDATE_HEADERS").is_some_and(|v| v == "1");
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        for (generated, committed, prologue) in [
            ("sparsek-cxx/src/lib.rs.h", "sparsek/rust.h", PROLOGUE),
            ("rust/cxx.h", "rust/cxx.h", ""),
        ] {
            let want = format!("{prologue}{}", read(&format!("{gen}/{generated}")));
            let path = format!("{root}/{committed}");
            if update {
                std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
                std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{path}: {e}"));
            } else {
                let have = std::fs::read_to_string(&path).unwrap_or_default();
                assert!(
                    want == have,
                    "include/{committed} is stale (not what cxx generates from \
                     bindings/sparsek-cxx/src/lib.rs): run scripts/update-cxx-headers.sh"
                );
            }
        }
    }
}
