//! The checks the operations share, below both them and the device layer: a dense view fits
//! its buffer, a scale buffer holds what its kind needs, dimensions agree, and the
//! refusals of what only the products' FP8 rules take (FP8 operands, scales). Each
//! operation keeps its own checks next to it (`spmm/check.rs`, `sddmm/check.rs`,
//! `attention/check.rs`) and builds them from these.

use crate::dense::DenseShape;
#[cfg(feature = "cuda")]
use crate::element::DType;
use crate::element::Element;
use crate::error::Error;
use crate::options::Backend;
use crate::scale::ScaleKind;

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

/// The GPU backends take f16/bf16 in and the same type or f32 out (an FP8 A with its scales
/// follows the FP8 rules instead).
#[cfg(feature = "cuda")]
pub(crate) fn check_gpu_types<T: Element, O: Element>(backend: Backend) -> Result<(), Error> {
    let (input, output) = (T::DTYPE, O::DTYPE);
    if input.is_half() && (output == input || output == DType::F32) {
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

/// No FP8 operand where the FP8 rules do not apply (an FP8 value means `stored * scale`): the
/// SDDMM, attention, and a product whose A is read as it is (no FP8 A with its scales).
pub(crate) fn refuse_fp8<T: Element, O: Element>(backend: Backend) -> Result<(), Error> {
    let (input, output) = (T::DTYPE, O::DTYPE);
    if input.is_fp8() || output.is_fp8() {
        return Err(Error::UnsupportedTypes {
            backend,
            input,
            output,
        });
    }
    Ok(())
}

/// Scales reach only an FP8 operand of a product: anywhere else they are refused.
pub(crate) fn refuse_scales(operand: &'static str, kind: ScaleKind) -> Result<(), Error> {
    if kind != ScaleKind::None {
        return Err(Error::ScalesNotTaken {
            operand,
            kind,
            reason: "only FP8 operands of spmm / spmm_fused take scales",
        });
    }
    Ok(())
}

/// `ScaleLength` unless `got` values are what `kind` needs for `parts` blocks or columns.
/// `device`: a buffer for no value may hold 1 (CUDA has no empty allocations).
pub(crate) fn check_scale_len(
    operand: &'static str,
    kind: ScaleKind,
    parts: usize,
    got: usize,
    device: bool,
) -> Result<(), Error> {
    let expected = kind.count(parts);
    if kind == ScaleKind::None || got == expected || (device && expected == 0 && got == 1) {
        Ok(())
    } else {
        Err(Error::ScaleLength {
            operand,
            kind,
            expected,
            got,
        })
    }
}
