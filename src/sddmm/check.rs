//! The checks of SDDMM's operands, below both the entry point and the device path: the
//! table's rules (`rules/sddmm.toml`, generated into `super::rules`, as the C++ entry checks
//! them) and what only Rust's operands carry, the buffers' lengths.

use super::rules::{self, Facts};
use crate::check::check_view;
use crate::check::rules::int;
use crate::dense::Dense;
use crate::element::Element;
use crate::error::Error;
use crate::options::SpmmOptions;

/// Every check of [`sddmm`](crate::sddmm())'s operands that does not depend on where they
/// are, in `sddmm`'s order: S is `m x n` (`(m, n)`), A `m x k` and B `k x n`, no `op(A)`,
/// no scales (the table's shapes), each view within its buffer, then the element types (no
/// FP8: its values mean `stored * scale`, which the SDDMM does not take; on the device
/// f16/bf16 in and the same or f32 out). `can_implement_sddmm` runs the same function, so it
/// refuses what `sddmm` refuses.
pub(crate) fn check_operands<T: Element, O: Element>(
    (m, n): (usize, usize),
    a: &Dense<'_, T>,
    b: &Dense<'_, T>,
    options: &SpmmOptions,
    device: bool,
) -> Result<(), Error> {
    let facts = Facts {
        m: int(m),
        n: int(n),
        transpose: options.transpose_a,
        a_rows: int(a.shape.rows),
        a_cols: int(a.shape.cols),
        b_rows: int(b.shape.rows),
        b_cols: int(b.shape.cols),
        a: T::DTYPE,
        b: T::DTYPE,
        c: O::DTYPE,
        a_scales: a.scales.kind(),
        b_scales: b.scales.kind(),
        device,
        backend: options.backend,
    };
    rules::shapes(&facts)?;
    check_view("A", &a.shape, a.data.len())?;
    check_view("B", &b.shape, b.data.len())?;
    rules::types(&facts)
}
