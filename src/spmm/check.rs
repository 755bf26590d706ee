//! The checks of the products' operands, below both the entry points and the device path.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use super::rules::Facts;
use super::{bsr_block, bsr_dims, is_device, BsrOperand};
use crate::check::check_scale_len;
use crate::check::rules::int;
pub(super) use crate::check::{check_view, same};
#[cfg(feature = "cuda")]
use crate::dense::Layout;
use crate::dense::{Dense, DenseMut};
use crate::element::{DType, Element};
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::options::{Backend, SpmmOptions};
use crate::scale::ScaleKind;

/// The location errors of the products' operands.
#[cfg(feature = "cuda")]
pub(crate) const OPERANDS_TOGETHER: &str = "A, B and C must be all host or all device";
pub(crate) const BIAS_WITH_OPERANDS: &str = "the bias must be where A, B and C are";
pub(crate) const B_SCALES_WITH_OPERANDS: &str = "B's scales must be where A, B and C are";

/// Host operands run on the CPU backend alone.
pub(crate) fn check_host_backend(backend: Backend) -> Result<(), Error> {
    if matches!(backend, Backend::Auto | Backend::Cpu) {
        Ok(())
    } else {
        Err(Error::BackendUnavailable {
            backend,
            reason: "operands are on the host; upload them (DeviceBsr, Dense::device)".into(),
        })
    }
}

/// A vector of a product with host operands (the bias, B's scales): a host slice, else
/// `MixedLocations(what)` (only a device vector can be elsewhere).
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
pub(crate) fn host_vector<'a, V>(
    v: Option<Vector<'a, V>>,
    what: &'static str,
) -> Result<Option<&'a [V]>, Error> {
    match v {
        None => Ok(None),
        Some(Vector::Host(s)) => Ok(Some(s)),
        #[cfg(feature = "cuda")]
        Some(Vector::Device(_)) => Err(Error::MixedLocations(what)),
    }
}

/// A vector of a product with device operands: a device buffer, else `MixedLocations(what)`.
#[cfg(feature = "cuda")]
pub(crate) fn device_vector<'a, V>(
    v: Option<Vector<'a, V>>,
    what: &'static str,
) -> Result<Option<&'a CudaSlice<V>>, Error> {
    match v {
        None => Ok(None),
        Some(Vector::Device(s)) => Ok(Some(s)),
        Some(Vector::Host(_)) => Err(Error::MixedLocations(what)),
    }
}

/// The facts the products' rules read (`rules/spmm.toml`, generated into `super::rules`),
/// from the operands of a product with `epilogue`. Sizes are `usize` values, which a rule's
/// 128-bit integers hold.
pub(crate) fn facts<TA: Element, TB: Element, O: Element, V: Element>(
    a: &BsrOperand<'_, TA>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
) -> Facts {
    let (m, k) = bsr_dims(a);
    let (a_scaled, a_scales) = match a {
        BsrOperand::Host(_) => (false, ScaleKind::None),
        BsrOperand::Scaled(_, s) => (true, s.kind()),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => (true, a.scale_kind()),
    };
    Facts {
        m: int(m),
        k: int(k),
        bm: int(bsr_block(a).rows),
        transpose: options.transpose_a,
        gated: epilogue.gated,
        beta_zero: options.beta == 0.0,
        b_rows: int(b.shape.rows),
        b_cols: int(b.shape.cols),
        c_rows: int(c.shape.rows),
        c_cols: int(c.shape.cols),
        a: TA::DTYPE,
        b: TB::DTYPE,
        c: O::DTYPE,
        a_scaled,
        a_scales,
        b_scales: b.scales.kind(),
        b_scales_transposed: b.scales_transposed,
        device: is_device(a),
        backend: options.backend,
        has_bias: epilogue.bias.is_some(),
        bias: V::DTYPE,
    }
}

/// The gated product's rules on a gate-and-up weight alone (`m x k` in `bm`-row blocks; the
/// table's `gated_*` rules), its other operands taken to fit: what a layer checks when it is
/// built, before any activation exists.
pub(crate) fn check_gated_weight(m: usize, k: usize, bm: usize) -> Result<(), Error> {
    super::rules::shapes(&Facts {
        m: int(m),
        k: int(k),
        bm: int(bm),
        transpose: false,
        gated: true,
        beta_zero: true,
        b_rows: int(k),
        b_cols: 0,
        c_rows: int(m / 2),
        c_cols: 0,
        a: DType::F16,
        b: DType::F16,
        c: DType::F16,
        a_scaled: false,
        a_scales: ScaleKind::None,
        b_scales: ScaleKind::None,
        b_scales_transposed: false,
        device: false,
        backend: Backend::Auto,
        has_bias: false,
        bias: DType::F16,
    })
}

/// The FP8 rules only Rust's operands can break: A's and B's scales hold the number of values
/// their kinds need (1 per tensor, `nnzb` per block, `n` per column; the table's rules have
/// passed, so each kind is one its operand takes). A device buffer for no value may hold one.
pub(crate) fn check_scale_counts(
    (a_kind, a_len, nnzb): (ScaleKind, usize, usize),
    (b_kind, b_len, n): (ScaleKind, usize, usize),
    device: bool,
) -> Result<(), Error> {
    check_scale_len("A", a_kind, nnzb, a_len, device)?;
    check_scale_len("B", b_kind, n, b_len, device)
}

/// The two kinds of FP8 product (include/sparsek/sparsek.hpp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fp8Kind {
    /// A and B FP8 of one type: the Hopper family on the device.
    W8A8,
    /// A FP8, B f16 or bf16 without scales: the Decode family on the device (and Hopper's
    /// W8A16 rows for e4m3 A, f16 B).
    W8A16,
}

/// What the device adds to the table's FP8 rules: W8A8 reads B K-major (column-major), since FP8
/// tensor cores (WGMMA) read K-major operands only.
#[cfg(feature = "cuda")]
pub(crate) fn check_fp8_device(
    kind: Fp8Kind,
    b_layout: Layout,
    backend: Backend,
) -> Result<(), Error> {
    if kind == Fp8Kind::W8A8 && b_layout != Layout::ColMajor {
        return Err(Error::NotSupported {
            backend,
            reason: "W8A8 (an FP8 B) on the device needs B column-major (K-major: x row-major \
                     in y = x·Wᵀ): FP8 tensor cores read K-major operands only"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_counts() {
        use ScaleKind::*;
        assert!(check_scale_counts((PerBlock, 3, 3), (PerColumn, 5, 5), false).is_ok());
        assert!(matches!(
            check_scale_counts((PerTensor, 2, 3), (None, 0, 5), false),
            Err(Error::ScaleLength { operand: "A", .. })
        ));
        assert!(matches!(
            check_scale_counts((PerTensor, 1, 3), (PerColumn, 4, 5), false),
            Err(Error::ScaleLength { operand: "B", .. })
        ));
        // Device: a buffer for no value may hold one.
        assert!(check_scale_counts((PerBlock, 1, 0), (None, 0, 5), false).is_err());
        assert!(check_scale_counts((PerBlock, 1, 0), (None, 0, 5), true).is_ok());
        #[cfg(feature = "cuda")]
        {
            assert!(check_fp8_device(Fp8Kind::W8A8, Layout::RowMajor, Backend::Auto).is_err());
            assert!(check_fp8_device(Fp8Kind::W8A16, Layout::RowMajor, Backend::Auto).is_ok());
        }
    }
}
