//! The checks of SDDMM's operands, below both the entry point and the device path.

use crate::check::{check_view, same};
use crate::dense::DenseShape;
use crate::error::Error;
use crate::options::SpmmOptions;

/// Every check of [`sddmm`]'s operands that holds for all backends: S is `m x n`
/// (`(m, n)`), A `m x k` and B `k x n`, each holding its view; no `op(A)`.
pub(crate) fn check_sddmm(
    (m, n): (usize, usize),
    (a, a_len): (&DenseShape, usize),
    (b, b_len): (&DenseShape, usize),
    options: &SpmmOptions,
) -> Result<(), Error> {
    if options.transpose_a {
        return Err(Error::InvalidArgument(
            "sddmm takes no op(A): pass Aᵀ as a transposed view (Dense::t)".into(),
        ));
    }
    same("rows of A (= rows of S)", m, a.rows)?;
    same("columns of B (= columns of S)", n, b.cols)?;
    same("rows of B (= columns of A)", a.cols, b.rows)?;
    check_view("A", a, a_len)?;
    check_view("B", b, b_len)
}
