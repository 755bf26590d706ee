//! The BSR format and block patterns: the one place that defines and validates them.

pub mod bsr;
pub mod mask;

pub use bsr::{validate_parts, BlockRow, BlockShape, BsrMatrix};
pub use mask::BlockMask;
