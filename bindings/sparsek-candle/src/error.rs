//! The integration's typed errors, and how they travel through candle's `Result`.

use candle_core::DType;

/// Why a sparsek op on candle tensors was refused or failed. Every refusal is found before
/// anything is launched or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tensor is not laid out the way sparsek reads it (row-major rows, or for attention
    /// a contiguous `head_dim` from the start of its storage).
    #[error(
        "{op}: {operand} is not laid out as sparsek reads it ({why}; dims {dims:?}, strides \
         {strides:?}, start offset {offset}): call `.contiguous()` on it first"
    )]
    NotContiguous {
        /// The op.
        op: &'static str,
        /// Which tensor.
        operand: &'static str,
        /// What is missing.
        why: &'static str,
        /// Its dims.
        dims: Vec<usize>,
        /// Its strides (elements).
        strides: Vec<usize>,
        /// Its start offset in its storage (elements).
        offset: usize,
    },
    /// A tensor of a dtype the op does not take here.
    #[error("{op}: {operand} has dtype {got:?}, expected {expected}")]
    DType {
        /// The op.
        op: &'static str,
        /// Which tensor.
        operand: &'static str,
        /// Its dtype.
        got: DType,
        /// What the op takes.
        expected: String,
    },
    /// A tensor of a shape the op does not take.
    #[error("{op}: {operand} has shape {got:?}, expected {expected}")]
    Shape {
        /// The op.
        op: &'static str,
        /// Which tensor.
        operand: &'static str,
        /// Its dims.
        got: Vec<usize>,
        /// What the op takes.
        expected: String,
    },
    /// Operands on different devices, a layer built for another device, or a device this
    /// integration does not drive (Metal).
    #[error("{op}: {what}")]
    Device {
        /// The op.
        op: &'static str,
        /// What does not match.
        what: String,
    },
    /// A pruning or build argument out of range.
    #[error("{op}: {what}")]
    InvalidArgument {
        /// The op.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// sparsek refused the call (its own typed error).
    #[error(transparent)]
    Sparsek(#[from] sparsek::Error),
    /// sparsek refused a block format.
    #[error(transparent)]
    Bsr(#[from] sparsek::BsrError),
    /// candle failed (reading a weight at build time, allocating an output).
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
}

impl Error {
    /// For candle's `Result`: candle keeps the message (its wrapped errors are `Display`
    /// only); the `try_*` functions of this crate return the typed error itself.
    pub fn into_candle(self) -> candle_core::Error {
        match self {
            Error::Candle(e) => e,
            other => candle_core::Error::wrap(other),
        }
    }
}

/// This crate's `Result`.
pub type Result<T> = std::result::Result<T, Error>;
