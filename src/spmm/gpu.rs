//! The device path of the products: the problem for C++ from operands `spmm` checked, the
//! context check, and the launch (or the selection alone, [`can_implement`]). One path for
//! every element type: A's dtype and scale kind come from the `DeviceBsr`, B's from its view.

use cudarc::driver::{CudaSlice, CudaStream};

use super::BsrOperand;
#[allow(deprecated)]
use super::Fp8Operand;
use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
use crate::device::result::{activation, backend, check, check_contexts, dense_desc, scale_kind};
use crate::device::{sys, DeviceBsr};
use crate::element::{Element, Fp8, TakesB};
use crate::epilogue::{Activation, Epilogue};
use crate::error::Error;
use crate::options::{Backend, SpmmOptions};
use crate::scale::ScaleKind;

/// The device operands of one product, validated by `crate::spmm::check_spmm`: C is `&mut
/// CudaSlice<O>` to launch, `&CudaSlice<O>` to check or select.
pub(crate) struct Operands<'a, TA, TB, V, C> {
    /// The sparse operand A, with its scales (an FP8 A's; none otherwise).
    pub a: &'a DeviceBsr<TA>,
    /// B's buffer, holding at least `b_shape.required_len()` elements.
    pub b: &'a CudaSlice<TB>,
    /// B's view: `k x n` (`m x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub b_shape: &'a DenseShape,
    /// B's scales: their kind and buffer (`None` exactly with `ScaleKind::None`).
    pub b_scales: (ScaleKind, Option<&'a CudaSlice<f32>>),
    /// C's buffer, holding at least `c_shape.required_len()` elements; its stream runs
    /// the kernel.
    pub c: C,
    /// C's view: `m x n` (`k x n` for `op(A) = Aᵀ`), layout and leading dimension.
    pub c_shape: &'a DenseShape,
    /// The epilogue's bias, one value per row of C, if any (A's type; C's when A is FP8).
    pub bias: Option<&'a CudaSlice<V>>,
}

/// The context check of a product's operands against C's stream: A's arrays and scales, B
/// and its scales, the bias.
fn check_spmm_contexts<TA, TB, V>(
    a: &DeviceBsr<TA>,
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

/// The problem for C++, pointers left zero (`sys` fills them): A's dtype and scale kind from
/// the `DeviceBsr`, B's dtype `TB` and scale kind `b_kind`, C's `O`. `crate::spmm` has
/// checked that shapes agree, that B and C hold their views and the element types' rules;
/// the BSR invariants hold because a `DeviceBsr` holds only validated index arrays.
fn problem<TA: Element, TB: Element, O: Element>(
    a: &DeviceBsr<TA>,
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

/// The device checks of one product, shared by its check, selection and launch: the
/// problem for C++ (every size fits its field) and every buffer's context against C's
/// stream.
fn prepare<TA: Element, TB: Element, O: Element, V>(
    ops: &Operands<'_, TA, TB, V, &CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<sys::SpmmProblem, Error> {
    let (b_kind, b_scales) = ops.b_scales;
    let mut problem = problem::<TA, TB, O>(ops.a, ops.b_shape, b_kind, ops.c_shape, options)?;
    problem.activation = activation(act);
    problem.gated = gated;
    check_spmm_contexts(ops.a, ops.b, b_scales, ops.bias, ops.c.stream())?;
    Ok(problem)
}

/// The device half of `crate::spmm::check_spmm`: [`prepare`], and with `select_kernel` the
/// kernel's selection (`Mode::Select`: no device memory read, nothing launched; `op(A) =
/// Aᵀ` builds A's transpose index first if it is not built yet). `Some(backend)` when
/// selected.
pub(crate) fn check_spmm<TA: Element, TB: Element, O: Element, V>(
    ops: &Operands<'_, TA, TB, V, &CudaSlice<O>>,
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
        b_scales: ops.b_scales.1,
        c: sys::Output::Select(ops.c),
        bias: ops.bias,
        transpose: transpose_buffers(ops.a, options)?,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(Some)
}

/// The device product, after `crate::spmm::check_spmm` validated the operands. Runs on C's
/// stream.
pub(crate) fn spmm<TA: Element, TB: Element, O: Element, V>(
    ops: Operands<'_, TA, TB, V, &mut CudaSlice<O>>,
    act: Activation,
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let checked = Operands {
        a: ops.a,
        b: ops.b,
        b_shape: ops.b_shape,
        b_scales: ops.b_scales,
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
        b_scales: ops.b_scales.1,
        c: sys::Output::Launch(ops.c),
        bias: ops.bias,
        transpose,
    };
    check(sys::spmm(problem, bufs, &stream), options.backend).map(|_| ())
}

/// `can_implement`'s work: the checks of `spmm` on device operands, then the selection.
fn select<TA: Element, TB: Element, O: Element>(
    a: BsrOperand<'_, TA>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
    device_only: &'static str,
) -> Result<Backend, Error> {
    let (Storage::Device(_), StorageMut::Device(_)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations(device_only));
    };
    super::check_spmm(&a, b, c, &Epilogue::<TA>::new(), options, true)?
        .ok_or(Error::MixedLocations(device_only))
}

/// Which backend [`spmm`](crate::spmm()) would run for these operands on their device
/// (`Auto` resolved), or why none can, whatever A's element type (an FP8 `DeviceBsr` with
/// the scales it holds, B's scales as attached with [`Dense::with_scales`]). Runs the same
/// checks as `spmm`, then the selection; launches nothing and reads no device memory,
/// except that `op(A) = Aᵀ` builds A's transpose index first if it is not built yet
/// ([`DeviceBsr::prepare_transpose`]).
pub fn can_implement<TA: TakesB<TB>, TB: Element, O: Element>(
    a: &DeviceBsr<TA>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    select(
        BsrOperand::Device(a),
        b,
        c,
        options,
        "can_implement takes device B and C",
    )
}

/// [`can_implement`] for an FP8 A: the same checks and selection.
#[deprecated(
    since = "0.1.1",
    note = "FP8 is a dtype of the one product: use `gpu::can_implement`"
)]
#[allow(deprecated)]
pub fn can_implement_fp8<Q: Fp8, TB: Element, O: Element>(
    a: &DeviceBsr<Q>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    select(
        Fp8Operand::Device(a).into(),
        b,
        c,
        options,
        "can_implement_fp8 takes device B and C",
    )
}
