//! The checks of SDDMM's operands, below both the entry point and the device path.

use crate::check::{check_view, refuse_fp8, refuse_scales, same};
use crate::dense::{Dense, DenseShape};
use crate::element::Element;
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

/// Every check of [`sddmm`](crate::sddmm)'s operands that does not depend on where they
/// are, in `sddmm`'s order: the shapes ([`check_sddmm`]), no FP8 element (its values mean
/// `stored * scale`, which the SDDMM does not take) and no scales. `can_implement_sddmm`
/// runs the same function, so it refuses what `sddmm` refuses.
pub(crate) fn check_operands<T: Element, O: Element>(
    dims: (usize, usize),
    a: &Dense<'_, T>,
    b: &Dense<'_, T>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    check_sddmm(
        dims,
        (&a.shape, a.data.len()),
        (&b.shape, b.data.len()),
        options,
    )?;
    refuse_fp8::<T, O>(options.backend)?;
    refuse_scales("A", a.scales.kind())?;
    refuse_scales("B", b.scales.kind())
}
