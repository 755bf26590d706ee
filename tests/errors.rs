//! One test per error variant: feed the malformed input, match the variant, and check
//! that nothing was written.

use sparsek::{
    spmm, Backend, BlockMask, BlockShape, BsrError, BsrMatrix, Dense, DenseMut, Error, Layout,
    SpmmOptions,
};

const B16: BlockShape = BlockShape::new(16, 16);

fn parts(
    m: usize,
    k: usize,
    block: BlockShape,
    row_ptr: Vec<i32>,
    col_idx: Vec<i32>,
    nvalues: usize,
) -> Result<BsrMatrix<f32>, BsrError> {
    BsrMatrix::from_parts(m, k, block, row_ptr, col_idx, vec![1.0; nvalues])
}

#[test]
fn zero_sized_block() {
    let e = parts(32, 32, BlockShape::new(0, 16), vec![0], vec![], 0).unwrap_err();
    assert!(
        matches!(e, BsrError::ZeroSizedBlock { bm: 0, bk: 16 }),
        "{e}"
    );
}

#[test]
fn not_block_multiple() {
    let e = parts(40, 32, B16, vec![0, 0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::NotBlockMultiple {
                dim: "m",
                len: 40,
                block: 16
            }
        ),
        "{e}"
    );
    let e = parts(32, 33, B16, vec![0, 0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(e, BsrError::NotBlockMultiple { dim: "k", .. }),
        "{e}"
    );
}

#[test]
fn row_ptr_length() {
    let e = parts(32, 32, B16, vec![0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::RowPtrLength {
                expected: 3,
                got: 2
            }
        ),
        "{e}"
    );
}

#[test]
fn ragged_row_ptr() {
    // Not starting at 0, decreasing, and not ending at nnzb.
    for (rp, ci) in [
        (vec![1, 1, 1], vec![0]),
        (vec![0, 2, 1], vec![0, 1]),
        (vec![0, 1, 1], vec![0, 1]),
    ] {
        let n = ci.len();
        let e = parts(32, 32, B16, rp, ci, n * 256).unwrap_err();
        assert!(matches!(e, BsrError::RaggedRowPtr { .. }), "{e}");
    }
}

#[test]
fn unsorted_columns() {
    let e = parts(16, 48, B16, vec![0, 2], vec![2, 0], 512).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::UnsortedColumns {
                row: 0,
                prev: 2,
                next: 0
            }
        ),
        "{e}"
    );
}

#[test]
fn duplicate_column() {
    let e = parts(16, 48, B16, vec![0, 2], vec![1, 1], 512).unwrap_err();
    assert!(
        matches!(e, BsrError::DuplicateColumn { row: 0, col: 1 }),
        "{e}"
    );
}

#[test]
fn column_out_of_range() {
    let e = parts(32, 32, B16, vec![0, 0, 1], vec![2], 256).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::ColumnOutOfRange {
                row: 1,
                col: 2,
                block_cols: 2
            }
        ),
        "{e}"
    );
    let e = parts(32, 32, B16, vec![0, 1, 1], vec![-1], 256).unwrap_err();
    assert!(
        matches!(e, BsrError::ColumnOutOfRange { col: -1, .. }),
        "{e}"
    );
}

#[test]
fn values_length() {
    let e = parts(32, 32, B16, vec![0, 1, 1], vec![0], 255).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::ValuesLength {
                expected: 256,
                got: 255
            }
        ),
        "{e}"
    );
}

#[test]
fn index_overflow() {
    // 2^31 block-rows cannot be indexed with i32; refused before any array is read.
    let m = (i32::MAX as usize + 1) * 16;
    let e = parts(m, 16, B16, vec![0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::IndexOverflow {
                what: "block rows",
                ..
            }
        ),
        "{e}"
    );
    let e = parts(16, m, B16, vec![0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::IndexOverflow {
                what: "block columns",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn input_length() {
    let e = BsrMatrix::<f32>::from_dense(&[1.0; 10], 16, 16, B16).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::InputLength {
                expected: 256,
                got: 10
            }
        ),
        "{e}"
    );
    let e = BlockMask::new(2, 2, vec![true; 3]).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::InputLength {
                expected: 4,
                got: 3
            }
        ),
        "{e}"
    );
}

#[test]
fn invalid_pattern() {
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0);
    for e in [
        BlockMask::random(2, 2, 1.5, &mut rng).unwrap_err(),
        BlockMask::topk_per_row(&[0.0; 4], 2, 2, 3).unwrap_err(),
        BlockMask::causal(4, Some(0)).unwrap_err(),
        BlockMask::skewed(4, 4, 0, 1, &mut rng).unwrap_err(),
    ] {
        assert!(matches!(e, BsrError::InvalidPattern(_)), "{e}");
    }
}

/// A valid 32x32 A (2x2 blocks of 16, one block per row).
fn small_a() -> BsrMatrix<f32> {
    parts(32, 32, B16, vec![0, 1, 2], vec![0, 1], 512).unwrap()
}

/// Runs spmm on a 32 x n C filled with 7.0 and returns the error; C must stay untouched.
fn spmm_err(
    b: &[f32],
    b_rows: usize,
    c_rows: usize,
    n_b: usize,
    n_c: usize,
    c_len: usize,
    opts: SpmmOptions,
) -> Error {
    let a = small_a();
    let mut c = vec![7.0f32; c_len];
    let e = spmm(
        &a,
        Dense::host(b, b_rows, n_b, Layout::RowMajor),
        DenseMut::host(&mut c, c_rows, n_c, Layout::RowMajor),
        &opts,
    )
    .unwrap_err();
    assert!(
        c.iter().all(|v| *v == 7.0),
        "C was written despite the error"
    );
    e
}

#[test]
fn shape_mismatch() {
    let b = vec![1.0f32; 64 * 8];
    let e = spmm_err(&b, 48, 32, 8, 8, 256, SpmmOptions::new());
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 32,
                got: 48,
                ..
            }
        ),
        "{e}"
    );
    let e = spmm_err(&b, 32, 16, 8, 8, 256, SpmmOptions::new());
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 32,
                got: 16,
                ..
            }
        ),
        "{e}"
    );
    let e = spmm_err(&b, 32, 32, 8, 4, 256, SpmmOptions::new());
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 8,
                got: 4,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn buffer_too_small() {
    let b = vec![1.0f32; 32 * 8 - 1];
    let e = spmm_err(&b, 32, 32, 8, 8, 256, SpmmOptions::new());
    assert!(
        matches!(
            e,
            Error::BufferTooSmall {
                operand: "B",
                needed: 256,
                got: 255
            }
        ),
        "{e}"
    );
    let b = vec![1.0f32; 32 * 8];
    let e = spmm_err(&b, 32, 32, 8, 8, 200, SpmmOptions::new());
    assert!(
        matches!(e, Error::BufferTooSmall { operand: "C", .. }),
        "{e}"
    );
}

#[test]
fn leading_dimension() {
    let a = small_a();
    let b = vec![1.0f32; 32 * 8];
    let mut c = vec![7.0f32; 256];
    let e = spmm(
        &a,
        Dense::host(&b, 32, 8, Layout::RowMajor).with_ld(4),
        DenseMut::host(&mut c, 32, 8, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LeadingDimension {
                operand: "B",
                ld: 4,
                min: 8
            }
        ),
        "{e}"
    );
    assert!(c.iter().all(|v| *v == 7.0));
}

#[test]
fn backend_unavailable_for_host_operands() {
    let b = vec![1.0f32; 32 * 8];
    for backend in [Backend::Wmma, Backend::Hopper] {
        let e = spmm_err(&b, 32, 32, 8, 8, 256, SpmmOptions::new().backend(backend));
        assert!(
            matches!(e, Error::BackendUnavailable { backend: got, .. } if got == backend),
            "{e}"
        );
    }
}

// Defects found by adversarial testing: each test below fails (or does not compile) on
// the code before the fix.

/// 2^32 + 16: above i32::MAX, and `as i32` truncates it to 16.
const HUGE: usize = (1 << 32) + 16;

/// Defect 1: a block side above i32::MAX was accepted (the GPU code truncates it).
#[test]
fn defect1_block_side_above_i32_max() {
    // m = bm = 2^32 + 16: one block-row, one block-column, no blocks.
    let e = parts(HUGE, 16, BlockShape::new(HUGE, 16), vec![0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::BlockSideOverflow {
                dim: "bm",
                side: HUGE
            }
        ),
        "{e}"
    );
    let e = parts(16, HUGE, BlockShape::new(16, HUGE), vec![0, 0], vec![], 0).unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::BlockSideOverflow {
                dim: "bk",
                side: HUGE
            }
        ),
        "{e}"
    );
    // Through validate_parts with one stored block (no values needed).
    let e = sparsek::validate_parts(HUGE, 1, BlockShape::new(HUGE, 1), &[0, 1], &[0], HUGE)
        .unwrap_err();
    assert!(
        matches!(e, BsrError::BlockSideOverflow { dim: "bm", .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "block side bm = 4294967312 exceeds 2147483647, the largest block side the kernels \
         take (i32)"
    );
    // i32::MAX itself is a valid side.
    let max = i32::MAX as usize;
    sparsek::validate_parts(max, max, BlockShape::new(max, max), &[0, 0], &[], 0).unwrap();
    let e = sparsek::validate_parts(max + 1, 1, BlockShape::new(max + 1, 1), &[0, 0], &[], 0)
        .unwrap_err();
    assert!(matches!(e, BsrError::BlockSideOverflow { .. }), "{e}");
}

/// Defect 2: `BlockShape::len` overflowed (a debug panic; in release a 2^32+16 x
/// 2^60-2^32+16 block "held" 256 elements and was accepted).
#[test]
fn defect2_block_len_overflow() {
    let (r, c) = (HUGE, (1usize << 60) - (1 << 32) + 16);
    let block = BlockShape::new(r, c);
    assert_eq!(block.checked_len(), None);
    assert_eq!(
        block.len(),
        usize::MAX,
        "len saturates instead of panicking/wrapping"
    );
    assert!(!block.is_empty());
    assert_eq!(BlockShape::new(usize::MAX, 0).len(), 0);
    assert!(BlockShape::new(usize::MAX, 0).is_empty());
    assert_eq!(BlockShape::new(3, 5).checked_len(), Some(15));
    let e = parts(r, c, block, vec![0, 1], vec![0], 256).unwrap_err();
    assert!(matches!(e, BsrError::BlockSideOverflow { .. }), "{e}");
    // nnzb * bm * bk overflowing usize with valid sides: 16 blocks of 2^30 x 2^30.
    let side = 1usize << 30;
    let col_idx: Vec<i32> = (0..16).collect();
    let e = sparsek::validate_parts(
        side,
        32 * side,
        BlockShape::new(side, side),
        &[0, 16],
        &col_idx,
        0,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::SizeOverflow {
                what: "nnzb * bm * bk",
                value
            } if value == 1 << 64
        ),
        "{e}"
    );
    // The FLOP count of a valid matrix with a large block does not overflow either.
    let a = parts(
        side,
        side,
        BlockShape::new(side, side),
        vec![0, 0],
        vec![],
        0,
    )
    .unwrap();
    assert_eq!(a.flops(1 << 40), 0.0);
    assert_eq!(a.density(), 0.0);
}

/// Defect 3: the mask builders multiplied rows * cols unchecked (a debug panic, a 32 GiB
/// allocation abort in release): each now refuses a huge grid before allocating.
#[test]
fn defect3_mask_builders_refuse_huge_grids() {
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0);
    let big = 1usize << 32;
    let too_large = |e: BsrError| {
        assert!(matches!(e, BsrError::MaskTooLarge { .. }), "{e}");
    };
    too_large(BlockMask::topk_per_row(&[], big, big, 0).unwrap_err());
    too_large(BlockMask::topk_per_row(&[], usize::MAX, 2, 0).unwrap_err());
    too_large(BlockMask::from_fn(big, big, |_, _| true).unwrap_err());
    too_large(BlockMask::from_fn(usize::MAX, usize::MAX, |_, _| true).unwrap_err());
    too_large(BlockMask::random(big, 1, 0.5, &mut rng).unwrap_err());
    too_large(BlockMask::random_per_row(big, big, 0, &mut rng).unwrap_err());
    too_large(BlockMask::causal(big, None).unwrap_err());
    too_large(BlockMask::causal(usize::MAX, Some(3)).unwrap_err());
    too_large(BlockMask::skewed(big, big, 1, 0, &mut rng).unwrap_err());
    too_large(BlockMask::new(big, big, vec![]).unwrap_err());
    // Each side within i32::MAX, but more than MAX_BLOCKS (2^32) blocks in all.
    too_large(BlockMask::from_fn(1 << 16, (1 << 16) + 1, |_, _| true).unwrap_err());
    too_large(BlockMask::causal((1 << 16) + 1, None).unwrap_err());
    assert_eq!(BlockMask::check_size(1 << 16, 1 << 16), Ok(1 << 32));
    assert_eq!(
        BlockMask::check_size(i32::MAX as usize, 0),
        Ok(0),
        "an empty grid is fine at any side up to i32::MAX"
    );
    too_large(BlockMask::check_size(i32::MAX as usize + 1, 0).unwrap_err());
    // An empty grid with a huge side is built without looping over its rows.
    let m = BlockMask::from_fn(i32::MAX as usize, 0, |_, _| unreachable!()).unwrap();
    assert_eq!((m.rows(), m.cols(), m.count()), (i32::MAX as usize, 0, 0));
    let m = BlockMask::skewed(i32::MAX as usize, 0, 1, 0, &mut rng).unwrap();
    assert_eq!(m.count(), 0);
    let m = BlockMask::topk_per_row(&[], i32::MAX as usize, 0, 0).unwrap();
    assert_eq!(m.count(), 0);
    assert_eq!(
        BlockMask::from_fn(big, big, |_, _| true)
            .unwrap_err()
            .to_string(),
        "a 4294967296 x 4294967296 block mask is too large: at most 2147483647 blocks per \
         side and 4294967296 blocks in all"
    );
}

/// Defect 3: `get(0, 2)` on a 2x2 mask read the bit of (1, 0); `row_cols` out of range
/// panicked.
#[test]
fn defect3_mask_get_and_row_cols_out_of_range() {
    let m = BlockMask::new(2, 2, vec![false, false, true, false]).unwrap();
    assert_eq!(m.get(1, 0), Some(true));
    assert_eq!(m.get(0, 2), None, "must not alias (1, 0)");
    assert_eq!(m.get(2, 0), None);
    assert_eq!(m.get(usize::MAX, usize::MAX), None);
    assert_eq!(m.row_cols(1).collect::<Vec<_>>(), vec![0]);
    assert_eq!(m.row_cols(2).count(), 0);
    assert_eq!(m.row_cols(usize::MAX).count(), 0);
}

/// Defect 3: the mask of a valid matrix whose block grid is beyond MAX_BLOCKS is refused,
/// not allocated.
#[test]
fn defect3_matrix_mask_too_large() {
    // 3 block-rows x i32::MAX block-columns of 1x1 blocks, no blocks stored.
    let a = parts(
        3,
        i32::MAX as usize,
        BlockShape::new(1, 1),
        vec![0; 4],
        vec![],
        0,
    )
    .unwrap();
    let e = a.mask().unwrap_err();
    assert!(matches!(e, BsrError::MaskTooLarge { rows: 3, .. }), "{e}");
}

/// Defect 4: `to_dense` with m * k overflowing returned an empty Vec (release) or panicked
/// (debug).
#[test]
fn defect4_to_dense_overflow() {
    // m = 2^31 (2 block-rows of 2^30), k = 2^33 (8 block-columns of 2^30): m * k = 2^64.
    let side = 1usize << 30;
    let a = parts(
        2 * side,
        8 * side,
        BlockShape::new(side, side),
        vec![0; 3],
        vec![],
        0,
    )
    .unwrap();
    let e = a.to_dense().unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::SizeOverflow {
                what: "m * k",
                value
            } if value == 1 << 64
        ),
        "{e}"
    );
    // m * k = 2^62 fits usize but not memory: a typed error, not an abort.
    let a = parts(
        side,
        4 * side,
        BlockShape::new(side, side),
        vec![0; 2],
        vec![],
        0,
    )
    .unwrap();
    let e = a.to_dense().unwrap_err();
    assert!(
        matches!(
            e,
            BsrError::Allocation {
                what: "dense matrix",
                elements
            } if elements == 1 << 62
        ),
        "{e}"
    );
    // from_dense refuses the same overflow.
    let e = BsrMatrix::<f32>::from_dense(&[], 2 * side, 8 * side, BlockShape::new(side, side))
        .unwrap_err();
    assert!(
        matches!(e, BsrError::SizeOverflow { what: "m * k", .. }),
        "{e}"
    );
}

/// Defect 7: a dense view whose extent overflows usize reported
/// `BufferTooSmall { needed: usize::MAX }`.
#[test]
fn defect7_dense_view_size_overflow() {
    let a = small_a();
    let b = vec![1.0f32; 32 * 8];
    let mut c = vec![7.0f32; 256];
    let e = spmm(
        &a,
        Dense::host(&b, 32, 8, Layout::RowMajor).with_ld(usize::MAX),
        DenseMut::host(&mut c, 32, 8, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::SizeOverflow {
                operand: "B",
                rows: 32,
                cols: 8,
                ld: usize::MAX
            }
        ),
        "{e}"
    );
    assert!(!e
        .to_string()
        .contains("18446744073709551615 elements, its shape"));
    let e = spmm(
        &a,
        Dense::host(&b, 32, 8, Layout::RowMajor),
        DenseMut::host(&mut c, 32, 8, Layout::ColMajor).with_ld(usize::MAX / 4),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::SizeOverflow { operand: "C", .. }), "{e}");
    assert!(
        c.iter().all(|v| *v == 7.0),
        "C was written despite the error"
    );
    // Layout::offset is checked too.
    assert_eq!(Layout::RowMajor.offset(2, 1, usize::MAX), None);
    assert_eq!(Layout::ColMajor.offset(usize::MAX, 1, 1), None);
    assert_eq!(Layout::ColMajor.offset(3, 2, 10), Some(23));
}

/// A 32x64 A (2x4 blocks of 16, 3 blocks): the transposed and dense·sparse products check
/// their shapes against op(A) and write nothing on error.
fn wide_a() -> BsrMatrix<f32> {
    parts(32, 64, B16, vec![0, 2, 3], vec![0, 3, 1], 3 * 256).unwrap()
}

#[test]
fn transposed_and_dense_sparse_shapes() {
    let a = wide_a();
    let b = vec![1.0f32; 64 * 8];
    let t = SpmmOptions::new().transpose_a(true);
    // Aᵀ·B: B must have m = 32 rows, C k = 64.
    for (b_rows, c_rows, what) in [(64, 64, "rows of B"), (32, 32, "rows of C")] {
        let mut c = vec![7.0f32; 64 * 8];
        let e = spmm(
            &a,
            Dense::host(&b, b_rows, 8, Layout::RowMajor),
            DenseMut::host(&mut c, c_rows, 8, Layout::RowMajor),
            &t,
        )
        .unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { what: w, .. } if w.starts_with(what)),
            "{e}"
        );
        assert!(
            c.iter().all(|v| *v == 7.0),
            "C was written despite the error"
        );
    }
    // D·A: D p x 32, C p x 64; D·Aᵀ: D p x 64, C p x 32.
    for (opts, d_cols, c_rows, c_cols, what) in [
        (SpmmOptions::new(), 64, 8, 64, "columns of D"),
        (SpmmOptions::new(), 32, 4, 64, "rows of C"),
        (SpmmOptions::new(), 32, 8, 32, "columns of C"),
        (t, 32, 8, 32, "columns of D"),
        (t, 64, 8, 64, "columns of C"),
    ] {
        let d = vec![1.0f32; 8 * d_cols];
        let mut c = vec![7.0f32; 8 * 64];
        let e = sparsek::dense_spmm(
            Dense::host(&d, 8, d_cols, Layout::RowMajor),
            &a,
            DenseMut::host(&mut c, c_rows, c_cols, Layout::RowMajor),
            &opts,
        )
        .unwrap_err();
        assert!(
            matches!(e, Error::ShapeMismatch { what: w, .. } if w.starts_with(what)),
            "{e}"
        );
        assert!(
            c.iter().all(|v| *v == 7.0),
            "C was written despite the error"
        );
    }
    // A buffer too small for D is named D.
    let d = vec![1.0f32; 8 * 32 - 1];
    let mut c = vec![7.0f32; 8 * 64];
    let e = sparsek::dense_spmm(
        Dense::host(&d, 8, 32, Layout::RowMajor),
        &a,
        DenseMut::host(&mut c, 8, 64, Layout::RowMajor),
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::BufferTooSmall { operand: "D", .. }),
        "{e}"
    );
    assert!(
        c.iter().all(|v| *v == 7.0),
        "C was written despite the error"
    );
}

#[test]
fn sddmm_errors() {
    // S: 32 x 64 (wide_a's pattern); A must be 32 x k, B k x 64.
    let a = vec![1.0f32; 32 * 16];
    let b = vec![1.0f32; 16 * 64];
    let cases: [(usize, usize, usize, usize, SpmmOptions, &str); 5] = [
        (16, 16, 16, 64, SpmmOptions::new(), "rows of A"),
        (32, 16, 16, 32, SpmmOptions::new(), "columns of B"),
        (32, 16, 8, 64, SpmmOptions::new(), "rows of B"),
        (
            32,
            16,
            16,
            64,
            SpmmOptions::new().transpose_a(true),
            "op(A)",
        ),
        (
            32,
            16,
            16,
            64,
            SpmmOptions::new().backend(Backend::Wmma),
            "host",
        ),
    ];
    for (ar, ac, br, bc, opts, what) in cases {
        let mut s = wide_a();
        s.values_mut().fill(7.0);
        let e = sparsek::sddmm(
            Dense::host(&a, ar, ac, Layout::RowMajor),
            Dense::host(&b, br, bc, Layout::RowMajor),
            &mut s,
            &opts,
        )
        .unwrap_err();
        let ok = match &e {
            Error::ShapeMismatch { what: w, .. } => w.starts_with(what),
            Error::InvalidArgument(msg) => msg.contains(what),
            Error::BackendUnavailable { reason, .. } => reason.contains(what),
            _ => false,
        };
        assert!(ok, "{what}: {e}");
        assert!(
            s.values().iter().all(|v| *v == 7.0),
            "S was written despite the error"
        );
    }
    let mut s = wide_a();
    let e = sparsek::sddmm(
        Dense::host(&a[..32 * 16 - 1], 32, 16, Layout::RowMajor),
        Dense::host(&b, 16, 64, Layout::RowMajor),
        &mut s,
        &SpmmOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::BufferTooSmall { operand: "A", .. }),
        "{e}"
    );
}
