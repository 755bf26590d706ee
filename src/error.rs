//! Typed errors. Bad input is reported here, before anything runs; nothing panics on it.

use crate::element::DType;
use crate::options::Backend;

/// A malformed BSR matrix or pattern: one variant per defect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BsrError {
    #[error("block shape {bm}x{bk} has a zero side")]
    ZeroSizedBlock { bm: usize, bk: usize },
    #[error("{dim} = {len} is not a multiple of the block side {block}")]
    NotBlockMultiple {
        dim: &'static str,
        len: usize,
        block: usize,
    },
    #[error("row_ptr has {got} entries; block rows + 1 = {expected} expected")]
    RowPtrLength { expected: usize, got: usize },
    #[error("row_ptr is ragged at entry {index}: {detail}")]
    RaggedRowPtr { index: usize, detail: String },
    #[error("col_idx of block-row {row} is not sorted ({prev} then {next})")]
    UnsortedColumns { row: usize, prev: i32, next: i32 },
    #[error("col_idx of block-row {row} holds column {col} twice")]
    DuplicateColumn { row: usize, col: i32 },
    #[error("col_idx of block-row {row} holds {col}, outside 0..{block_cols}")]
    ColumnOutOfRange {
        row: usize,
        col: i32,
        block_cols: usize,
    },
    #[error("values has {got} elements; nnzb * bm * bk = {expected} expected")]
    ValuesLength { expected: usize, got: usize },
    #[error("{what} = {value} overflows the i32 indices the kernels use")]
    IndexOverflow { what: &'static str, value: u128 },
    #[error("input has {got} elements; {expected} expected")]
    InputLength { expected: usize, got: usize },
    #[error("invalid pattern: {0}")]
    InvalidPattern(String),
}

/// Any error of sparsek's operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Bsr(#[from] BsrError),
    #[error("{what}: {got} given, {expected} expected")]
    ShapeMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{operand}: buffer holds {got} elements, its shape and ld need {needed}")]
    BufferTooSmall {
        operand: &'static str,
        needed: usize,
        got: usize,
    },
    #[error("{operand}: leading dimension {ld} is smaller than {min}")]
    LeadingDimension {
        operand: &'static str,
        ld: usize,
        min: usize,
    },
    #[error("{backend:?} backend does not take {input} inputs with {output} output")]
    UnsupportedTypes {
        backend: Backend,
        input: DType,
        output: DType,
    },
    #[error("operands must all be on the host or all on the device: {0}")]
    MixedLocations(&'static str),
    #[error("{backend:?} backend is not available: {reason}")]
    BackendUnavailable { backend: Backend, reason: String },
    #[error("{backend:?} backend cannot implement this problem: {reason}")]
    NotSupported { backend: Backend, reason: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("CUDA error: {0}")]
    Cuda(String),
}
