//! The checks of the products' operands, below both the entry points and the device path.

use crate::dense::DenseShape;
#[cfg(feature = "cuda")]
use crate::element::{DType, Element};
use crate::error::Error;
#[cfg(feature = "cuda")]
use crate::options::Backend;

/// The view fits its buffer and its rows (columns) do not overlap.
pub(crate) fn check_view(
    operand: &'static str,
    shape: &DenseShape,
    len: usize,
) -> Result<(), Error> {
    let min = shape.contiguous_extent().max(1);
    if shape.ld < min {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.ld,
            min,
        });
    }
    // A view whose extent overflows usize fits no buffer: say so, not "needs usize::MAX".
    let needed = shape.required_len().ok_or(Error::SizeOverflow {
        operand,
        rows: shape.rows,
        cols: shape.cols,
        ld: shape.ld,
    })?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    Ok(())
}

/// Every check of the operands that holds for all backends: shapes agree (`(m, k)` of A,
/// which enters as `Aᵀ` when `transpose`) and B and C hold their views. The one validation
/// of the Rust entry point; A itself was validated when it was built.
pub(crate) fn check_operands(
    (m, k): (usize, usize),
    transpose: bool,
    b: &DenseShape,
    b_len: usize,
    c: &DenseShape,
    c_len: usize,
) -> Result<(), Error> {
    let (b_rows, c_rows) = if transpose {
        (
            (m, "rows of B (= m of A, for Aᵀ·B)"),
            (k, "rows of C (= k of A, for Aᵀ·B)"),
        )
    } else {
        ((k, "rows of B (= k of A)"), (m, "rows of C (= m of A)"))
    };
    if b.rows != b_rows.0 {
        return Err(Error::ShapeMismatch {
            what: b_rows.1,
            expected: b_rows.0,
            got: b.rows,
        });
    }
    if c.rows != c_rows.0 {
        return Err(Error::ShapeMismatch {
            what: c_rows.1,
            expected: c_rows.0,
            got: c.rows,
        });
    }
    if c.cols != b.cols {
        return Err(Error::ShapeMismatch {
            what: "columns of C (= columns of B)",
            expected: b.cols,
            got: c.cols,
        });
    }
    check_view("B", b, b_len)?;
    check_view("C", c, c_len)
}

/// The GPU backends take f16/bf16 in and the same type or f32 out.
#[cfg(feature = "cuda")]
pub(crate) fn check_gpu_types<T: Element, O: Element>(backend: Backend) -> Result<(), Error> {
    let (input, output) = (T::DTYPE, O::DTYPE);
    if matches!(input, DType::F16 | DType::Bf16) && (output == input || output == DType::F32) {
        Ok(())
    } else {
        Err(Error::UnsupportedTypes {
            backend,
            input,
            output,
        })
    }
}

/// `Error::ShapeMismatch` unless a dimension `got` equals what it must (`what` names both).
pub(crate) fn same(what: &'static str, expected: usize, got: usize) -> Result<(), Error> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            what,
            expected,
            got,
        })
    }
}
