//! The device path of SDDMM: the problem for C++ from operands `sddmm` checked, the context
//! check, and the launch (or the selection alone, [`can_implement_sddmm`]).

use cudarc::driver::{CudaSlice, CudaStream};

use super::check::check_operands;
use crate::dense::{Dense, DenseShape, Storage};
use crate::device::result::{backend, check, check_contexts, dense_desc};
use crate::device::{sys, DeviceBsr};
use crate::element::Element;
use crate::error::Error;
use crate::options::{Backend, SpmmOptions};

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
/// checked by `check_sddmm`.
fn sddmm_problem<T: Element, O: Element>(
    a_shape: &DenseShape,
    b_shape: &DenseShape,
    s: &DeviceBsr<O>,
    options: &SpmmOptions,
) -> Result<sys::SddmmProblem, Error> {
    Ok(sys::SddmmProblem {
        a: dense_desc(a_shape, T::DTYPE)?,
        b: dense_desc(b_shape, T::DTYPE)?,
        s: s.desc()?,
        alpha: options.alpha,
        beta: options.beta,
        backend: backend(options.backend)?,
        stream: 0,
        mode: sys::Mode::Select,
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
    // A kernel writes S's values: unsettled until `DeviceBsr::settle`.
    s.settled = false;
    let bufs = sys::SddmmBuffers {
        a: ops.a,
        b: ops.b,
        row_ptr: &s.row_ptr,
        col_idx: &s.col_idx,
        values: sys::Output::Launch(&mut s.values),
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
    check_operands::<T, O>((s.m, s.k), a, b, options, true)?;
    let problem = sddmm_problem::<T, O>(&a.shape, &b.shape, s, options)?;
    let stream = s.values.stream().clone();
    check_sddmm_contexts(a_data, b_data, s, &stream)?;
    stream.context().bind_to_thread()?;
    let bufs = sys::SddmmBuffers {
        a: a_data,
        b: b_data,
        row_ptr: &s.row_ptr,
        col_idx: &s.col_idx,
        values: sys::Output::Select(&s.values),
    };
    check(sys::sddmm(problem, bufs, &stream), options.backend)
}
