//! The device path of the row scaling: the problem for C++ from operands `rowscale` checked,
//! the context check, and the launch.

use cudarc::driver::CudaSlice;

use crate::device::result::{check, check_contexts};
use crate::device::{sys, DeviceBsr};
use crate::element::Element;
use crate::error::Error;
use crate::options::Backend;

/// Device `rowscale`, after `crate::rowscale` validated the operands. Runs on the stream of
/// C's values.
pub(crate) fn rowscale<T: Element>(
    a: &DeviceBsr<T>,
    s: &CudaSlice<f32>,
    c_values: &mut CudaSlice<T>,
) -> Result<(), Error> {
    let problem = sys::RowscaleProblem {
        a: a.desc()?,
        s: 0,
        c: 0,
        stream: 0,
        mode: sys::Mode::Launch,
    };
    let stream = c_values.stream().clone();
    check_contexts(
        &stream,
        &[
            ("A.row_ptr", a.row_ptr.stream()),
            ("A.col_idx", a.col_idx.stream()),
            ("A.values", a.values.stream()),
            ("s", s.stream()),
        ],
    )?;
    stream.context().bind_to_thread()?;
    let bufs = sys::RowscaleBuffers {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        s,
        c_values: sys::Output::Launch(c_values),
    };
    check(sys::rowscale(problem, bufs, &stream), Backend::Auto).map(|_| ())
}
