//! The checks of the products' operands, below both the entry points and the device path.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

#[cfg(feature = "cuda")]
pub(super) use crate::check::check_gpu_types;
use crate::check::check_scale_len;
pub(super) use crate::check::{check_view, refuse_fp8, refuse_scales, same};
use crate::dense::DenseShape;
#[cfg(feature = "cuda")]
use crate::dense::Layout;
use crate::element::DType;
use crate::epilogue::Vector;
use crate::error::Error;
use crate::options::Backend;
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

/// Every check of the operands that holds for all backends: shapes agree (`(m, k)` of A,
/// which enters as `Aᵀ` when `transpose`) and B and C hold their views. The one validation
/// of the Rust entry point; A itself was validated when it was built.
pub(crate) fn check_operands(
    (m, k): (usize, usize),
    transpose: bool,
    b: &DenseShape,
    b_len: usize,
    c: &DenseShape,
    c_len: usize,
) -> Result<(), Error> {
    let (b_rows, c_rows) = if transpose {
        (
            (m, "rows of B (= m of A, for Aᵀ·B)"),
            (k, "rows of C (= k of A, for Aᵀ·B)"),
        )
    } else {
        ((k, "rows of B (= k of A)"), (m, "rows of C (= m of A)"))
    };
    if b.rows != b_rows.0 {
        return Err(Error::ShapeMismatch {
            what: b_rows.1,
            expected: b_rows.0,
            got: b.rows,
        });
    }
    if c.rows != c_rows.0 {
        return Err(Error::ShapeMismatch {
            what: c_rows.1,
            expected: c_rows.0,
            got: c.rows,
        });
    }
    if c.cols != b.cols {
        return Err(Error::ShapeMismatch {
            what: "columns of C (= columns of B)",
            expected: b.cols,
            got: c.cols,
        });
    }
    check_view("B", b, b_len)?;
    check_view("C", c, c_len)
}

/// The gated (GLU) epilogue's rules (`Epilogue::gated`): `op(A) = A`, `β = 0`, and A (`m`
/// rows of `bm`-row blocks) an even number of block-rows. Returns the rows of C: `m/2`.
pub(crate) fn check_gated(m: usize, bm: usize, transpose: bool, beta: f32) -> Result<usize, Error> {
    if transpose {
        return Err(Error::Gated("it takes op(A) = A only"));
    }
    if beta != 0.0 {
        return Err(Error::Gated(
            "it needs beta = 0 (C is the gated product alone)",
        ));
    }
    // bm >= 1 (a BsrMatrix's blocks are never empty): 2 * bm cannot be 0; checked for overflow.
    match bm.checked_mul(2) {
        Some(pair) if m % pair == 0 => Ok(m / 2),
        _ => Err(Error::Gated(
            "A needs an even number of block-rows (gate and up pairs)",
        )),
    }
}

/// The bias has the type of A's values ([`TakesBias`](crate::element::TakesBias)):
/// `expected` is A's type for an A read as it is, C's for an FP8 A with its scales.
/// [`Error::OperandTypes`] otherwise; `(a, b, c)` are the operands' types, `bias` the bias's
/// (`None`: no bias, nothing to check).
pub(crate) fn check_bias_type(
    (a, b, c): (DType, DType, DType),
    bias: Option<DType>,
    expected: DType,
) -> Result<(), Error> {
    match bias {
        Some(t) if t != expected => Err(Error::OperandTypes {
            a,
            b,
            c,
            bias: Some(t),
            reason: if a.is_fp8() {
                "the bias has C's type (an FP8 A's values, stored·scale, are carried in C's type)"
            } else {
                "the bias has A's type"
            },
        }),
        _ => Ok(()),
    }
}

/// An A read as it is (f16, bf16, f32) takes a B of its own type ([`Error::OperandTypes`]
/// otherwise; an f16/bf16 B with an FP8 A is W8A16, whose rules are [`check_fp8`]'s).
pub(crate) fn check_b_type((a, b, c): (DType, DType, DType)) -> Result<(), Error> {
    if a == b {
        return Ok(());
    }
    Err(Error::OperandTypes {
        a,
        b,
        c,
        bias: None,
        reason: "B must be of A's type (an FP8 A with its scales takes f16/bf16 B: W8A16)",
    })
}

/// The two kinds of FP8 product (include/sparsek/sparsek.hpp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fp8Kind {
    /// A and B FP8 of one type: the Hopper family on the device.
    W8A8,
    /// A FP8, B f16 or bf16 without scales: the Decode family on the device.
    W8A16,
}

/// What the checks of an FP8 product look at: the element types, the scales' kinds and
/// lengths, and the sizes those lengths follow.
pub(crate) struct Fp8Spec {
    /// A's element type.
    pub a: DType,
    /// A's scales: kind and number of values.
    pub a_scales: (ScaleKind, usize),
    /// A's stored blocks.
    pub nnzb: usize,
    /// B's element type.
    pub b: DType,
    /// B's scales: kind and number of values.
    pub b_scales: (ScaleKind, usize),
    /// B's per-column scales belong to its rows (a transposed view).
    pub b_scales_transposed: bool,
    /// Columns of B (and C).
    pub n: usize,
    /// C's element type.
    pub c: DType,
    /// Device operands (a buffer for no scale may hold 1 value).
    pub device: bool,
}

/// Every check of an FP8 product's types and scales that holds for every backend
/// (the product has checked the shapes): A FP8; C f16, bf16 or f32; B of A's FP8 type
/// (W8A8) or f16/bf16 (W8A16); A's scales none, per tensor (1 value) or per block (`nnzb`);
/// B's none, or when B is FP8 per tensor (1) or per column of the view (`n`). Typed errors,
/// never a panic.
pub(crate) fn check_fp8(spec: &Fp8Spec) -> Result<Fp8Kind, Error> {
    let (a, b, c) = (spec.a, spec.b, spec.c);
    let types = |reason: &'static str| Error::Fp8Types { a, b, c, reason };
    if !a.is_fp8() {
        return Err(types("A must be E4M3 or E5M2"));
    }
    if !(c.is_half() || c == DType::F32) {
        return Err(types("C must be f16, bf16 or f32"));
    }
    let kind = if b == a {
        Fp8Kind::W8A8
    } else if b.is_fp8() {
        return Err(types("B's FP8 type must be A's (W8A8)"));
    } else if b.is_half() {
        Fp8Kind::W8A16
    } else {
        return Err(types(
            "B must be of A's FP8 type (W8A8) or f16/bf16 (W8A16)",
        ));
    };
    let (a_kind, a_len) = spec.a_scales;
    if a_kind == ScaleKind::PerColumn {
        return Err(Error::ScalesNotTaken {
            operand: "A",
            kind: a_kind,
            reason: "A takes scales per tensor or per block (per column is B's)",
        });
    }
    check_scale_len("A", a_kind, spec.nnzb, a_len, spec.device)?;
    let (b_kind, b_len) = spec.b_scales;
    if b_kind != ScaleKind::None {
        if kind == Fp8Kind::W8A16 {
            return Err(Error::ScalesNotTaken {
                operand: "B",
                kind: b_kind,
                reason: "only FP8 operands take scales (W8A16: an f16/bf16 B is read as it is)",
            });
        }
        if b_kind == ScaleKind::PerBlock {
            return Err(Error::ScalesNotTaken {
                operand: "B",
                kind: b_kind,
                reason: "B takes scales per tensor or per column (per block is A's)",
            });
        }
        if b_kind == ScaleKind::PerColumn && spec.b_scales_transposed {
            return Err(Error::ScalesNotTaken {
                operand: "B",
                kind: b_kind,
                reason: "the view was transposed (Dense::t) after its per-column scales were \
                         attached: they scale its rows",
            });
        }
        check_scale_len("B", b_kind, spec.n, b_len, spec.device)?;
    }
    Ok(kind)
}

/// What the device adds to [`check_fp8`]: W8A8 reads B K-major (column-major), since FP8
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

/// FP8 products take `op(A) = A` only (on every backend, as the C++ API defines them).
pub(crate) fn check_fp8_op(transpose: bool, backend: Backend) -> Result<(), Error> {
    if transpose {
        return Err(Error::NotSupported {
            backend,
            reason: "op(A) = Aᵀ with an FP8 A: FP8 products take op(A) = A only (FP8 tensor \
                     cores read K-major operands; transpose A's blocks before quantizing)"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(a: DType, b: DType, c: DType) -> Fp8Spec {
        Fp8Spec {
            a,
            a_scales: (ScaleKind::None, 0),
            nnzb: 3,
            b,
            b_scales: (ScaleKind::None, 0),
            b_scales_transposed: false,
            n: 5,
            c,
            device: false,
        }
    }

    #[test]
    fn fp8_types() {
        use DType::*;
        assert_eq!(check_fp8(&spec(E4M3, E4M3, F32)).unwrap(), Fp8Kind::W8A8);
        assert_eq!(check_fp8(&spec(E5M2, Bf16, F16)).unwrap(), Fp8Kind::W8A16);
        for (a, b, c) in [
            (F16, F16, F32),
            (E4M3, E5M2, F32),
            (E4M3, F32, F32),
            (E4M3, E4M3, E4M3),
            (E5M2, F16, E5M2),
        ] {
            assert!(
                matches!(check_fp8(&spec(a, b, c)), Err(Error::Fp8Types { .. })),
                "{a} {b} {c}"
            );
        }
    }

    #[test]
    fn bias_and_b_types() {
        use DType::*;
        // A read as it is: the bias and B of A's type.
        assert!(check_bias_type((F16, F16, F32), Some(F16), F16).is_ok());
        assert!(check_bias_type((F16, F16, F32), None, F16).is_ok());
        assert!(matches!(
            check_bias_type((Bf16, Bf16, F32), Some(F32), Bf16),
            Err(Error::OperandTypes {
                bias: Some(F32),
                ..
            })
        ));
        assert!(check_b_type((F16, F16, F32)).is_ok());
        assert!(matches!(
            check_b_type((F16, Bf16, F32)),
            Err(Error::OperandTypes { bias: None, .. })
        ));
        // An FP8 A: the bias of C's type.
        assert!(check_bias_type((E4M3, F16, F32), Some(F32), F32).is_ok());
        for t in [E4M3, F16] {
            let e = check_bias_type((E4M3, F16, F32), Some(t), F32).unwrap_err();
            assert!(e.to_string().contains("C's type"), "{e}");
        }
    }

    #[test]
    fn fp8_scales() {
        use DType::*;
        let mut s = spec(E4M3, E4M3, F32);
        s.a_scales = (ScaleKind::PerBlock, 3);
        s.b_scales = (ScaleKind::PerColumn, 5);
        assert!(check_fp8(&s).is_ok());
        s.b_scales_transposed = true;
        assert!(matches!(check_fp8(&s), Err(Error::ScalesNotTaken { .. })));
        s.b_scales_transposed = false;
        s.a_scales = (ScaleKind::PerColumn, 5);
        assert!(matches!(check_fp8(&s), Err(Error::ScalesNotTaken { .. })));
        s.a_scales = (ScaleKind::PerTensor, 2);
        assert!(matches!(check_fp8(&s), Err(Error::ScaleLength { .. })));
        s.a_scales = (ScaleKind::PerTensor, 1);
        s.b_scales = (ScaleKind::PerBlock, 3);
        assert!(matches!(check_fp8(&s), Err(Error::ScalesNotTaken { .. })));
        s.b_scales = (ScaleKind::PerColumn, 4);
        assert!(matches!(check_fp8(&s), Err(Error::ScaleLength { .. })));
        s.b = F16;
        s.b_scales = (ScaleKind::PerTensor, 1);
        assert!(matches!(check_fp8(&s), Err(Error::ScalesNotTaken { .. })));
        // Device: a buffer for no value may hold one.
        let mut d = spec(E5M2, E5M2, Bf16);
        d.nnzb = 0;
        d.a_scales = (ScaleKind::PerBlock, 1);
        assert!(check_fp8(&d).is_err());
        d.device = true;
        assert!(check_fp8(&d).is_ok());
        #[cfg(feature = "cuda")]
        {
            assert!(check_fp8_device(Fp8Kind::W8A8, Layout::RowMajor, Backend::Auto).is_err());
            assert!(check_fp8_device(Fp8Kind::W8A16, Layout::RowMajor, Backend::Auto).is_ok());
        }
        assert!(check_fp8_op(true, Backend::Cpu).is_err());
    }
}
