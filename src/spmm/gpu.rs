//! The device path of the products: the problem for C++ from operands `spmm` checked, the
//! context check, and the launch (or the selection alone, [`can_implement`]).

use cudarc::driver::{CudaSlice, CudaStream};

use super::check::{
    check_fp8, check_fp8_device, check_fp8_op, check_gpu_types, check_operands, refuse_scales,
    Fp8Spec,
};
use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
use crate::element::{Element, Fp8};
use crate::epilogue::Activation;
use crate::error::Error;
use crate::gpu::result::{activation, backend, check, check_contexts, dense_desc, scale_kind};
use crate::gpu::{sys, DeviceBsr};
use crate::options::{Backend, SpmmOptions};
use crate::scale::ScaleKind;

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
        gated: false,
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
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let mut problem = problem::<T, O>(ops.a, ops.b_shape, ops.c_shape, options)?;
    problem.activation = activation(act);
    problem.gated = gated;
    let stream = ops.c.stream().clone();
    check_spmm_contexts(ops.a, ops.b, ops.bias, &stream)?;
    stream.context().bind_to_thread()?;
    let transpose = transpose_buffers(ops.a, options)?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        a_scales: ops.a.scales.buffer(),
        b: ops.b,
        b_scales: None,
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
    refuse_scales("B", b.scales.kind())?;
    let problem = problem::<T, O>(a, &b.shape, &c.shape, options)?;
    let stream = c_data.stream().clone();
    check_spmm_contexts(a, b_data, None, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers::<T, T, O, T> {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        a_scales: a.scales.buffer(),
        b: b_data,
        b_scales: None,
        c: sys::Output::Select(c_data),
        bias: None,
        transpose: transpose_buffers(a, options)?,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend)
}

/// The context check of an FP8 product's operands against C's stream: A's arrays and
/// scales, B and its scales, the bias.
fn check_fp8_contexts<Q, TB, V>(
    a: &DeviceBsr<Q>,
    b: &CudaSlice<TB>,
    b_scales: Option<&CudaSlice<f32>>,
    bias: Option<&CudaSlice<V>>,
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
    for (operand, buf) in [("A.scales", a.scales.buffer()), ("B.scales", b_scales)] {
        if let Some(buf) = buf {
            check_contexts(stream, &[(operand, buf.stream())])?;
        }
    }
    match bias {
        Some(bias) => check_contexts(stream, &[("bias", bias.stream())]),
        None => Ok(()),
    }
}

/// The FP8 problem for C++, pointers left zero (`sys` fills them): A's dtype and scale kind
/// from the `DeviceBsr`, B's dtype `TB` and scale kind `b_kind`, C's `O`. `crate::spmm_fp8`
/// (or `can_implement_fp8`) has checked shapes, types and scales.
fn fp8_problem<Q: Fp8, TB: Element, O: Element>(
    a: &DeviceBsr<Q>,
    b: &DenseShape,
    b_kind: ScaleKind,
    c: &DenseShape,
    options: &SpmmOptions,
) -> Result<sys::SpmmProblem, Error> {
    let mut b = dense_desc(b, TB::DTYPE)?;
    b.scale_kind = scale_kind(b_kind);
    Ok(sys::SpmmProblem {
        a: a.desc()?,
        b,
        c: dense_desc(c, O::DTYPE)?,
        alpha: options.alpha,
        beta: options.beta,
        backend: backend(options.backend)?,
        bias: 0,
        activation: sys::Activation::None,
        transpose_a: false,
        t_col_ptr: 0,
        t_row_idx: 0,
        t_block_id: 0,
        gated: false,
        stream: 0,
        mode: sys::Mode::Select,
    })
}

/// The device operands of one `spmm_fp8`, validated by `crate::spmm_fp8`.
pub(crate) struct Fp8Operands<'a, Q, TB, O> {
    /// The sparse FP8 operand A, with its scales.
    pub a: &'a DeviceBsr<Q>,
    /// B's buffer, holding at least `b_shape.required_len()` elements.
    pub b: &'a CudaSlice<TB>,
    /// B's view: `k x n`.
    pub b_shape: &'a DenseShape,
    /// B's scales: their kind and buffer (`None` exactly with `ScaleKind::None`).
    pub b_scales: (ScaleKind, Option<&'a CudaSlice<f32>>),
    /// C's buffer; its stream runs the kernel.
    pub c: &'a mut CudaSlice<O>,
    /// C's view: `m x n`.
    pub c_shape: &'a DenseShape,
    /// The epilogue's bias (C's type), one value per row of C, if any.
    pub bias: Option<&'a CudaSlice<O>>,
}

/// Device `spmm_fp8`, after `crate::spmm_fp8` validated the operands. Runs on C's stream.
pub(crate) fn spmm_fp8<Q: Fp8, TB: Element, O: Element>(
    ops: Fp8Operands<'_, Q, TB, O>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let (b_kind, b_scales) = ops.b_scales;
    let mut problem = fp8_problem::<Q, TB, O>(ops.a, ops.b_shape, b_kind, ops.c_shape, options)?;
    problem.activation = activation(act);
    problem.gated = gated;
    let stream = ops.c.stream().clone();
    check_fp8_contexts(ops.a, ops.b, b_scales, ops.bias, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        a_scales: ops.a.scales.buffer(),
        b: ops.b,
        b_scales,
        c: sys::Output::Launch(ops.c),
        bias: ops.bias,
        transpose: None,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(|_| ())
}

/// Which backend [`spmm_fp8`](crate::spmm_fp8) would run for these device operands (`Auto`
/// resolved), or why none can: the same checks (B's scales as attached with
/// [`Dense::with_scales`]); launches nothing and reads no device memory.
pub fn can_implement_fp8<Q: Fp8, TB: Element, O: Element>(
    a: &DeviceBsr<Q>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    let (Storage::Device(b_data), StorageMut::Device(c_data)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations(
            "can_implement_fp8 takes device B and C",
        ));
    };
    check_fp8_op(options.transpose_a, options.backend)?;
    check_operands(
        (a.m, a.k),
        false,
        &b.shape,
        b_data.len(),
        &c.shape,
        c_data.len(),
    )?;
    let b_scales = match b.scales.values() {
        None => None,
        Some(crate::epilogue::Vector::Device(s)) => Some(s),
        Some(crate::epilogue::Vector::Host(_)) => {
            return Err(Error::MixedLocations(
                "B's scales must be where A, B and C are",
            ))
        }
    };
    let kind = check_fp8(&Fp8Spec {
        a: Q::DTYPE,
        a_scales: (a.scale_kind(), a.scales.buffer().map_or(0, |s| s.len())),
        nnzb: a.nnzb,
        b: TB::DTYPE,
        b_scales: (b.scales.kind(), b_scales.map_or(0, |s| s.len())),
        b_scales_transposed: b.scales_transposed,
        n: b.shape.cols,
        c: O::DTYPE,
        device: true,
    })?;
    check_fp8_device(kind, b.shape.layout, options.backend)?;
    let problem = fp8_problem::<Q, TB, O>(a, &b.shape, b.scales.kind(), &c.shape, options)?;
    let stream = c_data.stream().clone();
    check_fp8_contexts::<Q, TB, O>(a, b_data, b_scales, None, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers::<Q, TB, O, O> {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        a_scales: a.scales.buffer(),
        b: b_data,
        b_scales,
        c: sys::Output::Select(c_data),
        bias: None,
        transpose: None,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend)
}
