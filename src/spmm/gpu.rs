//! The device path of the products: the problem for C++ from operands `spmm` checked, the
//! context check, and the launch (or the selection alone, [`can_implement`]).

use cudarc::driver::{CudaSlice, CudaStream};

use super::{BsrOperand, Fp8Operand};
use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
use crate::device::result::{activation, backend, check, check_contexts, dense_desc, scale_kind};
use crate::device::{sys, DeviceBsr};
use crate::element::{Element, Fp8};
use crate::epilogue::{Activation, Epilogue};
use crate::error::Error;
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

/// The device operands of one `spmm`, validated by `crate::spmm`: C is `&mut
/// CudaSlice<O>` to launch, `&CudaSlice<O>` to check or select.
pub(crate) struct Operands<'a, T, C> {
    /// The sparse operand A.
    pub a: &'a DeviceBsr<T>,
    /// B's buffer, holding at least `b_shape.required_len()` elements.
    pub b: &'a CudaSlice<T>,
    /// B's view: `k x n` (`m x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub b_shape: &'a DenseShape,
    /// C's buffer, holding at least `c_shape.required_len()` elements; its stream runs
    /// the kernel.
    pub c: C,
    /// C's view: `m x n` (`k x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub c_shape: &'a DenseShape,
    /// The epilogue's bias, one value per row of C, if any.
    pub bias: Option<&'a CudaSlice<T>>,
}

/// The device checks of one product, shared by its check, selection and launch: the
/// problem for C++ (every size fits its field) and every buffer's context against C's
/// stream.
fn prepare<T: Element, O: Element>(
    ops: &Operands<'_, T, &CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<sys::SpmmProblem, Error> {
    let mut problem = problem::<T, O>(ops.a, ops.b_shape, ops.c_shape, options)?;
    problem.activation = activation(act);
    problem.gated = gated;
    check_spmm_contexts(ops.a, ops.b, ops.bias, ops.c.stream())?;
    Ok(problem)
}

/// The device half of `crate::spmm::check_fused`: [`prepare`], and with `select_kernel` the
/// kernel's selection (`Mode::Select`: no device memory read, nothing launched; `op(A) =
/// Aᵀ` builds A's transpose index first if it is not built yet). `Some(backend)` when
/// selected.
pub(crate) fn check_spmm<T: Element, O: Element>(
    ops: &Operands<'_, T, &CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    let problem = prepare(ops, act, gated, options)?;
    if !select_kernel {
        return Ok(None);
    }
    let stream = ops.c.stream().clone();
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        a_scales: ops.a.scales.buffer(),
        b: ops.b,
        b_scales: None,
        c: sys::Output::Select(ops.c),
        bias: ops.bias,
        transpose: transpose_buffers(ops.a, options)?,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(Some)
}

/// Device `spmm`, after `crate::spmm::check_fused` validated the operands. Runs on C's
/// stream.
pub(crate) fn spmm<T: Element, O: Element>(
    ops: Operands<'_, T, &mut CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let checked = Operands {
        a: ops.a,
        b: ops.b,
        b_shape: ops.b_shape,
        c: &*ops.c,
        c_shape: ops.c_shape,
        bias: ops.bias,
    };
    let problem = prepare(&checked, act, gated, options)?;
    let stream = ops.c.stream().clone();
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
/// or why none can. Runs the same checks as `spmm` (`crate::spmm::check_fused`), then the
/// selection; launches nothing and reads no device memory, except that `op(A) = Aᵀ` builds
/// A's transpose index first if it is not built yet ([`DeviceBsr::prepare_transpose`]).
pub fn can_implement<T: Element, O: Element>(
    a: &DeviceBsr<T>,
    b: &Dense<'_, T>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    const DEVICE_ONLY: &str = "can_implement takes device B and C";
    let (Storage::Device(_), StorageMut::Device(_)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations(DEVICE_ONLY));
    };
    super::check_fused(
        &BsrOperand::Device(a),
        b,
        c,
        &Epilogue::new(),
        options,
        true,
    )?
    .ok_or(Error::MixedLocations(DEVICE_ONLY))
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

/// The device operands of one `spmm_fp8`, validated by `crate::spmm_fp8`: C is `&mut
/// CudaSlice<O>` to launch, `&CudaSlice<O>` to check or select.
pub(crate) struct Fp8Operands<'a, Q, TB, O, C> {
    /// The sparse FP8 operand A, with its scales.
    pub a: &'a DeviceBsr<Q>,
    /// B's buffer, holding at least `b_shape.required_len()` elements.
    pub b: &'a CudaSlice<TB>,
    /// B's view: `k x n`.
    pub b_shape: &'a DenseShape,
    /// B's scales: their kind and buffer (`None` exactly with `ScaleKind::None`).
    pub b_scales: (ScaleKind, Option<&'a CudaSlice<f32>>),
    /// C's buffer; its stream runs the kernel.
    pub c: C,
    /// C's view: `m x n`.
    pub c_shape: &'a DenseShape,
    /// The epilogue's bias (C's type), one value per row of C, if any.
    pub bias: Option<&'a CudaSlice<O>>,
}

/// [`prepare`] of an FP8 product.
fn prepare_fp8<Q: Fp8, TB: Element, O: Element>(
    ops: &Fp8Operands<'_, Q, TB, O, &CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<sys::SpmmProblem, Error> {
    let (b_kind, b_scales) = ops.b_scales;
    let mut problem = fp8_problem::<Q, TB, O>(ops.a, ops.b_shape, b_kind, ops.c_shape, options)?;
    problem.activation = activation(act);
    problem.gated = gated;
    check_fp8_contexts(ops.a, ops.b, b_scales, ops.bias, ops.c.stream())?;
    Ok(problem)
}

/// [`check_spmm`] of an FP8 product (the device half of `crate::spmm::check_fp8_product`).
pub(crate) fn check_spmm_fp8<Q: Fp8, TB: Element, O: Element>(
    ops: &Fp8Operands<'_, Q, TB, O, &CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    let problem = prepare_fp8(ops, act, gated, options)?;
    if !select_kernel {
        return Ok(None);
    }
    let stream = ops.c.stream().clone();
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        a_scales: ops.a.scales.buffer(),
        b: ops.b,
        b_scales: ops.b_scales.1,
        c: sys::Output::Select(ops.c),
        bias: ops.bias,
        transpose: None,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(Some)
}

/// Device `spmm_fp8`, after `crate::spmm::check_fp8_product` validated the operands. Runs
/// on C's stream.
pub(crate) fn spmm_fp8<Q: Fp8, TB: Element, O: Element>(
    ops: Fp8Operands<'_, Q, TB, O, &mut CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let checked = Fp8Operands {
        a: ops.a,
        b: ops.b,
        b_shape: ops.b_shape,
        b_scales: ops.b_scales,
        c: &*ops.c,
        c_shape: ops.c_shape,
        bias: ops.bias,
    };
    let problem = prepare_fp8(&checked, act, gated, options)?;
    let stream = ops.c.stream().clone();
    stream.context().bind_to_thread()?;
    let bufs = sys::SpmmBuffers {
        row_ptr: &ops.a.row_ptr,
        col_idx: &ops.a.col_idx,
        values: &ops.a.values,
        a_scales: ops.a.scales.buffer(),
        b: ops.b,
        b_scales: ops.b_scales.1,
        c: sys::Output::Launch(ops.c),
        bias: ops.bias,
        transpose: None,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(|_| ())
}

/// Which backend [`spmm_fp8`](crate::spmm_fp8) would run for these device operands (`Auto`
/// resolved), or why none can: the same checks (`crate::spmm::check_fp8_product`, B's
/// scales as attached with [`Dense::with_scales`]), then the selection; launches nothing
/// and reads no device memory.
pub fn can_implement_fp8<Q: Fp8, TB: Element, O: Element>(
    a: &DeviceBsr<Q>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    const DEVICE_ONLY: &str = "can_implement_fp8 takes device B and C";
    let (Storage::Device(_), StorageMut::Device(_)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations(DEVICE_ONLY));
    };
    super::check_fp8_product(
        &Fp8Operand::Device(a),
        b,
        c,
        &Epilogue::new(),
        options,
        true,
    )?
    .ok_or(Error::MixedLocations(DEVICE_ONLY))
}
