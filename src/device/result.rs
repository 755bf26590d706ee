//! Checked calls over the raw seam (`sys`): the conversions of Rust values into the seam's
//! types (each narrowing checked), the one context check of device operands, and the C++
//! statuses turned into [`Error`]s. Used by every operation's device path.

use cudarc::driver::CudaStream;

use super::sys;
use crate::dense::{DenseShape, Layout};
use crate::element::DType;
use crate::epilogue::Activation;
use crate::error::Error;
use crate::options::Backend;
use crate::scale::ScaleKind;

// The element type's seam value sits beside the seam's enum (`sys`), so a new type is one
// arm there.
pub(crate) use super::sys::dtype;

pub(crate) fn scale_kind(k: ScaleKind) -> sys::ScaleKind {
    match k {
        ScaleKind::None => sys::ScaleKind::None,
        ScaleKind::PerTensor => sys::ScaleKind::PerTensor,
        ScaleKind::PerBlock => sys::ScaleKind::PerBlock,
        ScaleKind::PerColumn => sys::ScaleKind::PerColumn,
    }
}

pub(crate) fn layout(l: Layout) -> sys::Layout {
    match l {
        Layout::RowMajor => sys::Layout::RowMajor,
        Layout::ColMajor => sys::Layout::ColMajor,
    }
}

pub(crate) fn activation(a: Activation) -> sys::Activation {
    match a {
        Activation::None => sys::Activation::None,
        Activation::Relu => sys::Activation::Relu,
        Activation::GeluTanh => sys::Activation::GeluTanh,
        Activation::Silu => sys::Activation::Silu,
    }
}

pub(crate) fn backend(b: Backend) -> Result<sys::Backend, Error> {
    match b {
        Backend::Auto => Ok(sys::Backend::Auto),
        Backend::Wmma => Ok(sys::Backend::Wmma),
        Backend::Hopper => Ok(sys::Backend::Hopper),
        Backend::Decode => Ok(sys::Backend::Decode),
        Backend::Cpu => Err(Error::BackendUnavailable {
            backend: Backend::Cpu,
            reason: "operands are on the device".into(),
        }),
    }
}

fn backend_from(b: sys::Backend) -> Backend {
    match b {
        sys::Backend::Wmma => Backend::Wmma,
        sys::Backend::Hopper => Backend::Hopper,
        sys::Backend::Decode => Backend::Decode,
        _ => Backend::Auto,
    }
}

/// Every device operand in the launch stream's context: a pointer of another context
/// (another device, or a second context of the same device, `CudaContext::new_non_primary`)
/// means nothing in the launch's, so the call is refused before anything is enqueued or
/// recorded. The one check of it, for every device entry.
pub(crate) fn check_contexts(
    stream: &CudaStream,
    operands: &[(&'static str, &CudaStream)],
) -> Result<(), Error> {
    let ctx = stream.context();
    for &(operand, other) in operands {
        let theirs = other.context();
        if theirs.cu_ctx() != ctx.cu_ctx() {
            return Err(Error::ContextMismatch {
                operand,
                detail: format!(
                    "a context of device {}, the stream's of device {}",
                    theirs.ordinal(),
                    ctx.ordinal()
                ),
            });
        }
    }
    Ok(())
}

/// The seam's view of a dense operand of type `t` (its address filled by `sys`), without
/// scales (the FP8 path sets B's kind; `sys` its address).
pub(crate) fn dense_desc(shape: &DenseShape, t: DType) -> Result<sys::DenseDesc, Error> {
    Ok(sys::DenseDesc {
        data: 0,
        rows: to_i64("rows", shape.rows)?,
        cols: to_i64("cols", shape.cols)?,
        ld: to_i64("ld", shape.ld)?,
        layout: layout(shape.layout),
        dtype: dtype(t),
        scales: 0,
        scale_kind: sys::ScaleKind::None,
    })
}

pub(crate) fn to_i64(what: &'static str, v: usize) -> Result<i64, Error> {
    i64::try_from(v).map_err(|_| Error::InvalidArgument(format!("{what} = {v} overflows int64")))
}

pub(crate) fn to_i32(what: &'static str, v: usize) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| Error::InvalidArgument(format!("{what} = {v} overflows int32")))
}

/// The family that ran, or the error the C++ side reported.
pub(crate) fn check(status: sys::FfiStatus, requested: Backend) -> Result<Backend, Error> {
    match status.status {
        sys::Status::Success => Ok(backend_from(status.backend)),
        sys::Status::InvalidArgument => Err(Error::InvalidArgument(status.message)),
        sys::Status::NotSupported => Err(Error::NotSupported {
            backend: requested,
            reason: status.message,
        }),
        _ => Err(Error::Cuda(status.message)),
    }
}
