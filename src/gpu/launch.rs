//! The checked layer between the public `spmm` and the raw seam (`sys.rs`): builds the one
//! problem description that crosses to C++ from operands that `crate::spmm` validated,
//! and turns C++ statuses into `Error`s.

use cudarc::driver::{CudaSlice, CudaStream};

use super::device_bsr::DeviceBsr;
use super::sys;
use crate::dense::{Dense, DenseMut, DenseShape, Layout, Storage, StorageMut};
use crate::element::{DType, Element};
use crate::epilogue::Activation;
use crate::error::Error;
use crate::options::{Backend, SpmmOptions};

pub(super) fn dtype(t: DType) -> sys::DType {
    match t {
        DType::F16 => sys::DType::F16,
        DType::Bf16 => sys::DType::BF16,
        DType::F32 => sys::DType::F32,
    }
}

fn layout(l: Layout) -> sys::Layout {
    match l {
        Layout::RowMajor => sys::Layout::RowMajor,
        Layout::ColMajor => sys::Layout::ColMajor,
    }
}

fn activation(a: Activation) -> sys::Activation {
    match a {
        Activation::None => sys::Activation::None,
        Activation::Relu => sys::Activation::Relu,
        Activation::GeluTanh => sys::Activation::GeluTanh,
        Activation::Silu => sys::Activation::Silu,
    }
}

pub(super) fn backend(b: Backend) -> Result<sys::Backend, Error> {
    match b {
        Backend::Auto => Ok(sys::Backend::Auto),
        Backend::Wmma => Ok(sys::Backend::Wmma),
        Backend::Cutlass => Ok(sys::Backend::Cutlass),
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
        sys::Backend::Cutlass => Backend::Cutlass,
        sys::Backend::Decode => Backend::Decode,
        _ => Backend::Auto,
    }
}

/// Every device operand in the launch stream's context: a pointer of another context
/// (another device, or a second context of the same device, `CudaContext::new_non_primary`)
/// means nothing in the launch's, so the call is refused before anything is enqueued or
/// recorded. The one check of it, for every device entry.
pub(super) fn check_contexts(
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

/// The context check of an spmm's operands against C's stream.
fn check_spmm_contexts<T>(
    a: &DeviceBsr<T>,
    b: &CudaSlice<T>,
    bias: Option<&CudaSlice<T>>,
    stream: &CudaStream,
) -> Result<(), Error> {
    check_contexts(
        stream,
        &[
            ("A.row_ptr", a.row_ptr.stream()),
            ("A.col_idx", a.col_idx.stream()),
            ("A.values", a.values.stream()),
            ("B", b.stream()),
        ],
    )?;
    match bias {
        Some(bias) => check_contexts(stream, &[("bias", bias.stream())]),
        None => Ok(()),
    }
}

pub(super) fn to_i64(what: &'static str, v: usize) -> Result<i64, Error> {
    i64::try_from(v).map_err(|_| Error::InvalidArgument(format!("{what} = {v} overflows int64")))
}

pub(super) fn to_i32(what: &'static str, v: usize) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| Error::InvalidArgument(format!("{what} = {v} overflows int32")))
}

/// The problem for C++, pointers left zero (`sys` fills them). `crate::spmm` has checked
/// that shapes agree, that B and C hold their views and that the types are supported; the
/// BSR invariants hold because a `DeviceBsr` holds only validated index arrays.
fn problem<T: Element, O: Element>(
    a: &DeviceBsr<T>,
    b: &DenseShape,
    c: &DenseShape,
    options: &SpmmOptions,
) -> Result<sys::SpmmProblem, Error> {
    Ok(sys::SpmmProblem {
        m: to_i64("m", a.m)?,
        k: to_i64("k", a.k)?,
        n: to_i64("n", c.cols)?,
        bm: to_i32("bm", a.block.rows)?,
        bk: to_i32("bk", a.block.cols)?,
        nnzb: to_i64("nnzb", a.nnzb)?,
        row_ptr: 0,
        col_idx: 0,
        values: 0,
        input: dtype(T::DTYPE),
        output: dtype(O::DTYPE),
        b: 0,
        b_ld: to_i64("B.ld", b.ld)?,
        b_layout: layout(b.layout),
        c: 0,
        c_ld: to_i64("C.ld", c.ld)?,
        c_layout: layout(c.layout),
        alpha: options.alpha,
        beta: options.beta,
        backend: backend(options.backend)?,
        bias: 0,
        activation: sys::Activation::None,
        stream: 0,
        transpose_a: options.transpose_a,
        t_col_ptr: 0,
        t_row_idx: 0,
        t_block_id: 0,
    })
}

/// A's device transpose index when `op(A) = Aᵀ` (built and kept on first use).
fn transpose_buffers<'a, T: Element>(
    a: &'a DeviceBsr<T>,
    options: &SpmmOptions,
) -> Result<Option<sys::TransposeBuffers<'a>>, Error> {
    if !options.transpose_a {
        return Ok(None);
    }
    let t = a.transpose_index()?;
    Ok(Some(sys::TransposeBuffers {
        col_ptr: &t.col_ptr,
        row_idx: &t.row_idx,
        block_id: &t.block_id,
    }))
}

/// The family that ran, or the error the C++ side reported.
pub(super) fn check(status: sys::FfiStatus, requested: Backend) -> Result<Backend, Error> {
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

/// The device operands of one `spmm`, validated by `crate::spmm`.
pub(crate) struct Operands<'a, T, O> {
    /// The sparse operand A.
    pub a: &'a DeviceBsr<T>,
    /// B's buffer, holding at least `b_shape.required_len()` elements.
    pub b: &'a CudaSlice<T>,
    /// B's view: `k x n` (`m x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub b_shape: &'a DenseShape,
    /// C's buffer, holding at least `c_shape.required_len()` elements; its stream runs
    /// the kernel.
    pub c: &'a mut CudaSlice<O>,
    /// C's view: `m x n` (`k x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub c_shape: &'a DenseShape,
    /// The epilogue's bias, one value per row of C, if any.
    pub bias: Option<&'a CudaSlice<T>>,
}

/// Device `spmm`, after `crate::spmm` validated the operands. Runs on C's stream.
pub(crate) fn spmm<T: Element, O: Element>(
    ops: Operands<'_, T, O>,
    act: Activation,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let mut problem = problem::<T, O>(ops.a, ops.b_shape, ops.c_shape, options)?;
    problem.activation = activation(act);
    let stream = ops.c.stream().clone();
    check_spmm_contexts(ops.a, ops.b, ops.bias, &stream)?;
    stream.context().bind_to_thread()?;
    let transpose = transpose_buffers(ops.a, options)?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        b: ops.b,
        c: ops.c,
        bias: ops.bias,
        transpose,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(|_| ())
}

/// Which backend `spmm` would run for these operands on their device (`Auto` resolved),
/// or why none can. Runs the same checks as `spmm`; launches nothing and reads no device
/// memory, except that `op(A) = Aᵀ` builds A's transpose index first if it is not built
/// yet ([`DeviceBsr::prepare_transpose`]).
pub fn can_implement<T: Element, O: Element>(
    a: &DeviceBsr<T>,
    b: &Dense<'_, T>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    let (Storage::Device(b_data), StorageMut::Device(c_data)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations("can_implement takes device B and C"));
    };
    let transpose = options.transpose_a;
    crate::spmm::check_operands(
        (a.m, a.k),
        transpose,
        &b.shape,
        b_data.len(),
        &c.shape,
        c_data.len(),
    )?;
    crate::spmm::check_gpu_types::<T, O>(options.backend)?;
    let problem = problem::<T, O>(a, &b.shape, &c.shape, options)?;
    let stream = c_data.stream().clone();
    check_spmm_contexts(a, b_data, None, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBufferRefs {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        b: b_data,
        c: c_data,
        transpose: transpose_buffers(a, options)?,
    };
    check(sys::select(problem, bufs, &stream), options.backend)
}

/// The device operands of one `sddmm`, validated by `crate::sddmm`.
pub(crate) struct SddmmOperands<'a, T, O> {
    /// A's buffer and view (`m x k`).
    pub a: &'a CudaSlice<T>,
    /// A's view.
    pub a_shape: &'a DenseShape,
    /// B's buffer and view (`k x n`).
    pub b: &'a CudaSlice<T>,
    /// B's view.
    pub b_shape: &'a DenseShape,
    /// S: the pattern and the output; its values buffer's stream runs the kernel.
    pub s: &'a mut DeviceBsr<O>,
}

/// The SDDMM problem for C++, pointers left zero (`sys` fills them); its operands were
/// checked by `crate::spmm::check_sddmm`.
fn sddmm_problem<T: Element, O: Element>(
    a_shape: &DenseShape,
    b_shape: &DenseShape,
    s: &DeviceBsr<O>,
    options: &SpmmOptions,
) -> Result<sys::SddmmProblem, Error> {
    Ok(sys::SddmmProblem {
        m: to_i64("m", s.m)?,
        n: to_i64("n", s.k)?,
        k: to_i64("k", a_shape.cols)?,
        bm: to_i32("bm", s.block.rows)?,
        bn: to_i32("bn", s.block.cols)?,
        nnzb: to_i64("nnzb", s.nnzb)?,
        row_ptr: 0,
        col_idx: 0,
        values: 0,
        input: dtype(T::DTYPE),
        output: dtype(O::DTYPE),
        a: 0,
        a_ld: to_i64("A.ld", a_shape.ld)?,
        a_layout: layout(a_shape.layout),
        b: 0,
        b_ld: to_i64("B.ld", b_shape.ld)?,
        b_layout: layout(b_shape.layout),
        alpha: options.alpha,
        beta: options.beta,
        backend: backend(options.backend)?,
        stream: 0,
    })
}

/// The context check of an SDDMM's operands against S's values stream.
fn check_sddmm_contexts<T, O>(
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    s: &DeviceBsr<O>,
    stream: &CudaStream,
) -> Result<(), Error> {
    check_contexts(
        stream,
        &[
            ("A", a.stream()),
            ("B", b.stream()),
            ("S.row_ptr", s.row_ptr.stream()),
            ("S.col_idx", s.col_idx.stream()),
        ],
    )
}

/// Device `sddmm`, after `crate::sddmm` validated the operands. Runs on S's values
/// buffer's stream.
pub(crate) fn sddmm<T: Element, O: Element>(
    ops: SddmmOperands<'_, T, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let s = ops.s;
    let problem = sddmm_problem::<T, O>(ops.a_shape, ops.b_shape, s, options)?;
    let stream = s.values.stream().clone();
    check_sddmm_contexts(ops.a, ops.b, s, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SddmmBuffers {
        a: ops.a,
        b: ops.b,
        row_ptr: &s.row_ptr,
        col_idx: &s.col_idx,
        values: sys::SddmmValues::Write(&mut s.values),
    };
    check(sys::sddmm(problem, bufs, &stream), options.backend).map(|_| ())
}

/// Which backend [`sddmm`](crate::sddmm) would run for these device operands (`Auto`
/// resolved), or why none can. Runs the same checks as `sddmm`; launches nothing and
/// reads no device memory.
pub fn can_implement_sddmm<T: Element, O: Element>(
    a: &Dense<'_, T>,
    b: &Dense<'_, T>,
    s: &DeviceBsr<O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    let (Storage::Device(a_data), Storage::Device(b_data)) = (&a.data, &b.data) else {
        return Err(Error::MixedLocations(
            "can_implement_sddmm takes device A and B",
        ));
    };
    crate::spmm::check_sddmm(
        (s.m, s.k),
        (&a.shape, a_data.len()),
        (&b.shape, b_data.len()),
        options,
    )?;
    crate::spmm::check_gpu_types::<T, O>(options.backend)?;
    let problem = sddmm_problem::<T, O>(&a.shape, &b.shape, s, options)?;
    let stream = s.values.stream().clone();
    check_sddmm_contexts(a_data, b_data, s, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SddmmBuffers {
        a: a_data,
        b: b_data,
        row_ptr: &s.row_ptr,
        col_idx: &s.col_idx,
        values: sys::SddmmValues::Look(&s.values),
    };
    check(sys::sddmm(problem, bufs, &stream), options.backend)
}
