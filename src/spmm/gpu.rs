//! The device path of the products: the problem for C++ from operands `spmm` checked, the
//! context check, and the launch (or the selection alone, [`can_implement`]).

use cudarc::driver::{CudaSlice, CudaStream};

use super::check::{check_gpu_types, check_operands};
use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
use crate::element::Element;
use crate::epilogue::Activation;
use crate::error::Error;
use crate::gpu::result::{activation, backend, check, check_contexts, dense_desc};
use crate::gpu::{sys, DeviceBsr};
use crate::options::{Backend, SpmmOptions};

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
        a: a.desc()?,
        b: dense_desc(b, T::DTYPE)?,
        c: dense_desc(c, O::DTYPE)?,
        alpha: options.alpha,
        beta: options.beta,
        backend: backend(options.backend)?,
        bias: 0,
        activation: sys::Activation::None,
        transpose_a: options.transpose_a,
        t_col_ptr: 0,
        t_row_idx: 0,
        t_block_id: 0,
        stream: 0,
        mode: sys::Mode::Select,
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
        c: sys::Output::Launch(ops.c),
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
    check_operands(
        (a.m, a.k),
        transpose,
        &b.shape,
        b_data.len(),
        &c.shape,
        c_data.len(),
    )?;
    check_gpu_types::<T, O>(options.backend)?;
    let problem = problem::<T, O>(a, &b.shape, &c.shape, options)?;
    let stream = c_data.stream().clone();
    check_spmm_contexts(a, b_data, None, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        b: b_data,
        c: sys::Output::Select(c_data),
        bias: None,
        transpose: transpose_buffers(a, options)?,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend)
}
