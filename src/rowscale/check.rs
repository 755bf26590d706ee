//! The checks of the row scaling's operands, below both the entry point and the device path.

use crate::check::same;
use crate::error::Error;

/// Every check of [`rowscale`](super::rowscale)'s operands that holds for all backends: `s`
/// holds A's `m` rows, `c_values` as many values as A.
pub(crate) fn check_rowscale(
    m: usize,
    a_values: usize,
    s_len: usize,
    c_len: usize,
) -> Result<(), Error> {
    same("length of s (= rows of A)", m, s_len)?;
    same("length of C's values (= A's values)", a_values, c_len)
}
