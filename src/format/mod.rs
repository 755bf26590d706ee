//! The BSR format and block patterns: the one place that defines and validates them.
//!
//! Nothing here panics or aborts on bad input: every size that multiplies is checked,
//! every index narrowed to `i32` goes through a checked conversion, and every allocation
//! sized from the input is fallible (`BsrError::Allocation`) or bounded by a limit checked
//! first (`BsrError::MaskTooLarge`).

pub mod bsr;
pub(crate) mod bsr_rules;
pub mod convert;
mod interleave;
pub mod mask;
pub mod shard;
pub mod transpose;

pub use bsr::{validate_parts, BlockRow, BlockShape, BsrMatrix};
pub use mask::BlockMask;
pub use shard::{balanced_ranges, equal_ranges, ShardAxis, Shards, MAX_SHARDS};
pub use transpose::TransposeIndex;

use crate::error::BsrError;

/// An empty `Vec` with room for `len` elements, or `BsrError::Allocation` where that
/// cannot be had (instead of the abort of `Vec::with_capacity`).
pub(crate) fn try_vec<T>(what: &'static str, len: usize) -> Result<Vec<T>, BsrError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| BsrError::Allocation {
        what,
        elements: len,
    })?;
    Ok(v)
}

/// Room for `extra` more elements in `v` (amortized growth), or `BsrError::Allocation`.
pub(crate) fn try_grow<T>(
    v: &mut Vec<T>,
    what: &'static str,
    extra: usize,
) -> Result<(), BsrError> {
    v.try_reserve(extra).map_err(|_| BsrError::Allocation {
        what,
        elements: v.len().saturating_add(extra),
    })
}
