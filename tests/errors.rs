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
    for backend in [Backend::Wmma, Backend::Cutlass] {
        let e = spmm_err(&b, 32, 32, 8, 8, 256, SpmmOptions::new().backend(backend));
        assert!(
            matches!(e, Error::BackendUnavailable { backend: got, .. } if got == backend),
            "{e}"
        );
    }
}
