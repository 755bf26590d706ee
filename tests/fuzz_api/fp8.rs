//! Target: the FP8 products: `spmm` / `spmm_fused` / `dense_spmm` with an FP8 A and its
//! scales (`&QuantizedBsr` or `BsrOperand::Scaled`), `SparseLinear::new` with `forward` /
//! `forward_scaled` of FP8 weights, the deprecated names they replace (`spmm_fp8`,
//! `SparseLinear::new_fp8` / `forward_fp8`, checked bit for bit against the unified entries
//! in a fraction of cases), and a bare FP8 `BsrMatrix`, which the products must refuse.

use std::any::Any;
use std::fmt::Debug;

use rand::Rng;
use sparsek::{
    bf16, f16, Activation, Backend, BsrMatrix, Dense, Element, Epilogue, Layout, SpmmOptions,
    TakesB, TakesBias,
};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome};
use crate::inputs::{
    act_f64, buffer_len, dim, huge, rel_err, same_bits, sentinel_above, tolerance, Ty, CAP,
};
use crate::operands::{build_bsr, gen_bsr_spec, gen_dview, BsrSpec, DView};
use crate::DRIVER;

/// B's element type against A's FP8 type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fp8B {
    /// A's FP8 type (W8A8).
    Same,
    /// The other FP8 type (refused).
    Other,
    F16,
    Bf16,
    /// f32 (refused).
    F32,
}

/// Which entry a case calls.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fp8Entry {
    /// The deprecated `spmm_fp8` on host views.
    Spmm,
    /// A unified product on host views, A an FP8 matrix with its scales: a
    /// `&QuantizedBsr` (`quantized`) or `BsrOperand::Scaled`.
    Unified { call: UnifiedCall, quantized: bool },
    /// The deprecated `SparseLinear::new_fp8` and `forward_fp8` (x and y row-major).
    Linear,
    /// `SparseLinear::new` of a `QuantizedBsr`, then `forward`, or `forward_scaled` where x
    /// has scales (x and y row-major).
    LinearUnified,
    /// `spmm` / `spmm_fused` / `dense_spmm` with a bare FP8 `BsrMatrix` (no scales): always
    /// refused.
    Generic,
}

impl Fp8Entry {
    /// A layer's forward: x and y packed row-major, op(A) = A whatever the options say.
    fn layer(self) -> bool {
        matches!(self, Fp8Entry::Linear | Fp8Entry::LinearUnified)
    }
    /// A product on host views, B's scales attached by `Dense::with_scales` (FP8 B only).
    fn product(self) -> bool {
        matches!(self, Fp8Entry::Spmm | Fp8Entry::Unified { .. })
    }
}

/// The unified product a `Unified` case calls. `Spmm` and `Dense` take no epilogue (the
/// case draws no bias and no activation for them); `Dense` computes the same product as
/// `dense_spmm(Bᵀ, A, Cᵀ)` with op(A) flipped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum UnifiedCall {
    Spmm,
    Fused,
    Dense,
}

#[derive(Debug, Clone)]
struct Fp8Case {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    entry: Fp8Entry,
    /// A is E5M2 (else E4M3).
    e5m2: bool,
    b_ty: Fp8B,
    /// C's type: f32, f16, bf16, or A's FP8 type (refused).
    c_ty: Option<Ty>,
    a: BsrSpec,
    /// A's scales: kind (None, PerTensor, PerBlock) and the number of values given.
    a_scales: (sparsek::ScaleKind, usize),
    /// B (`k x n`), C (`m x n`).
    b: DView,
    c: DView,
    /// B's scales: kind (None, PerTensor, PerColumn), values given, and whether they were
    /// attached to the transposed view (`Dense::t` after `with_scales`).
    b_scales: (sparsek::ScaleKind, usize, bool),
    transpose: bool,
    alpha: f32,
    beta: f32,
    bias: Option<usize>,
    act: Activation,
    backend: Backend,
    nan_poison: bool,
    /// Also make the deprecated call (`spmm_fp8`, `new_fp8` / `forward_fp8`) on the same
    /// inputs: a unified entry's result must equal it bit for bit.
    cross_check: bool,
}

fn gen_fp8(rng: &mut FuzzRng) -> Fp8Case {
    use sparsek::ScaleKind as K;
    let clean = rng.random_bool(0.5);
    let entry = match rng.random_range(0..16) {
        0..=5 => Fp8Entry::Spmm,
        6..=10 => Fp8Entry::Unified {
            call: [UnifiedCall::Spmm, UnifiedCall::Fused, UnifiedCall::Dense]
                [rng.random_range(0..3)],
            quantized: rng.random_bool(0.5),
        },
        11 | 12 => Fp8Entry::Linear,
        13 | 14 => Fp8Entry::LinearUnified,
        _ => Fp8Entry::Generic,
    };
    let unified = matches!(entry, Fp8Entry::Unified { .. } | Fp8Entry::LinearUnified);
    // The unified entries bound B's type (`TakesB`): another FP8 type or f32 does not
    // compile there, so only the deprecated ones are given them.
    let b_ty = if clean || unified {
        [Fp8B::Same, Fp8B::Same, Fp8B::F16, Fp8B::Bf16][rng.random_range(0..4)]
    } else {
        [
            Fp8B::Same,
            Fp8B::Same,
            Fp8B::F16,
            Fp8B::Bf16,
            Fp8B::Other,
            Fp8B::F32,
        ][rng.random_range(0..6)]
    };
    let c_ty = if !clean && rng.random_bool(0.05) {
        None
    } else {
        Some([Ty::F32, Ty::F32, Ty::F16, Ty::Bf16][rng.random_range(0..4)])
    };
    let a = gen_bsr_spec(rng, clean);
    let (m, k) = (a.m(), a.k());
    let transpose = !clean && rng.random_bool(0.1);
    let n = rng.random_range(0..=6);
    let mut dims = [[k, n], [m, n]];
    if !clean && rng.random_bool(0.2) {
        let (t, i) = (rng.random_range(0..2), rng.random_range(0..2));
        dims[t][i] = match rng.random_range(0..3) {
            0 => dims[t][i] ^ 1,
            1 => huge(rng),
            _ => rng.random_range(0..=6),
        };
    }
    let (b, c) = if entry.layer() {
        // The layer's views: x row-major (xᵀ column-major, ld = in), y likewise.
        let packed = |rows: usize, cols: usize, rng: &mut FuzzRng| {
            let mut v = DView {
                rows,
                cols,
                layout: Layout::ColMajor,
                ld: rows.max(1),
                len: 0,
            };
            v.len = buffer_len(rng, v.needed(), clean);
            v
        };
        (packed(k, n, rng), packed(m, n, rng))
    } else {
        (
            gen_dview(rng, dims[0][0], dims[0][1], clean),
            gen_dview(rng, dims[1][0], dims[1][1], clean),
        )
    };
    // Scales: mostly of the right length; unless clean, sometimes off by one.
    let nnzb_guess = (a.br * a.bc) as f64 * a.p;
    let a_kind = [K::None, K::PerTensor, K::PerBlock, K::PerBlock][rng.random_range(0..4)];
    // PerBlock's count is known only once A is built: usize::MAX stands for nnzb (± 1).
    let a_len = match a_kind {
        K::None => 0,
        K::PerTensor if !clean && rng.random_bool(0.1) => 2,
        K::PerTensor => 1,
        _ => usize::MAX - if !clean && rng.random_bool(0.1) { 1 } else { 0 },
    };
    let _ = nnzb_guess;
    let fp8_b = matches!(b_ty, Fp8B::Same | Fp8B::Other);
    let b_kind = if fp8_b || (!clean && rng.random_bool(0.1)) {
        [K::None, K::PerTensor, K::PerColumn, K::PerColumn][rng.random_range(0..4)]
    } else {
        K::None
    };
    let b_len = match b_kind {
        K::None => 0,
        K::PerTensor => 1 + (!clean && rng.random_bool(0.1)) as usize,
        _ => {
            let off = !clean && rng.random_bool(0.1);
            if off {
                (b.cols.min(CAP) + 1).min(CAP)
            } else {
                b.cols.min(CAP)
            }
        }
    };
    let b_transposed = entry.product() && b_kind == K::PerColumn && !clean && rng.random_bool(0.1);
    let alpha = [1.0, 1.0, 0.0, -1.0, 0.5, rng.random_range(-2.0f32..2.0)][rng.random_range(0..6)];
    let beta = if rng.random_bool(0.3) {
        [1.0, -0.5, rng.random_range(-2.0f32..2.0)][rng.random_range(0..3)]
    } else {
        0.0
    };
    let epilogue = !matches!(
        entry,
        Fp8Entry::Unified {
            call: UnifiedCall::Spmm | UnifiedCall::Dense,
            ..
        }
    );
    let bias = (epilogue && rng.random_bool(0.5)).then(|| {
        if clean || rng.random_bool(0.7) {
            c.rows.min(CAP)
        } else {
            dim(rng, 8, 0.0)
        }
    });
    let act = if epilogue {
        [
            Activation::None,
            Activation::Relu,
            Activation::GeluTanh,
            Activation::Silu,
        ][rng.random_range(0..4)]
    } else {
        Activation::None
    };
    let backend = match rng.random_range(0..if clean { 10 } else { 14 }) {
        0..=5 => Backend::Auto,
        6..=9 => Backend::Cpu,
        10 | 11 => Backend::Hopper,
        _ => Backend::Decode,
    };
    Fp8Case {
        clean,
        entry,
        e5m2: rng.random_bool(0.5),
        b_ty,
        c_ty,
        a,
        a_scales: (a_kind, a_len),
        b,
        c,
        b_scales: (b_kind, b_len, b_transposed),
        transpose,
        alpha,
        beta,
        bias,
        act,
        backend,
        nan_poison: rng.random_bool(0.3),
        cross_check: unified && rng.random_bool(0.25),
    }
}

/// `Dense::with_scales` for B's types: FP8 ones attach, the others cannot (the generator
/// gives them scales only through the layer, which attaches any).
trait FuzzB: Element {
    fn attach<'a>(d: Dense<'a, Self>, s: sparsek::ColumnScales<'a>) -> Dense<'a, Self>;
}
impl FuzzB for sparsek::F8E4M3 {
    fn attach<'a>(d: Dense<'a, Self>, s: sparsek::ColumnScales<'a>) -> Dense<'a, Self> {
        d.with_scales(s)
    }
}
impl FuzzB for sparsek::F8E5M2 {
    fn attach<'a>(d: Dense<'a, Self>, s: sparsek::ColumnScales<'a>) -> Dense<'a, Self> {
        d.with_scales(s)
    }
}
macro_rules! no_attach {
    ($($t:ty),*) => {$(
        impl FuzzB for $t {
            fn attach<'a>(d: Dense<'a, Self>, _: sparsek::ColumnScales<'a>) -> Dense<'a, Self> {
                d
            }
        }
    )*};
}
no_attach!(f16, bf16, f32);

/// The documented acceptance of an FP8 case, from its description alone (A's scales as
/// given: kind and count; `nnzb`: A's stored blocks; whether B's scales could be attached).
fn fp8_valid(
    c: &Fp8Case,
    a_scales: (sparsek::ScaleKind, usize),
    nnzb: usize,
    b_scales_given: bool,
) -> bool {
    use sparsek::ScaleKind as K;
    let (m, k) = (c.a.m(), c.a.k());
    if c.entry == Fp8Entry::Generic {
        return false;
    }
    // The layer fixes op(A) = A (its options' transpose is ignored) and checks its bias
    // at construction.
    let transpose_ok = c.entry.layer() || !c.transpose;
    let shapes = c.b.rows == k && c.c.rows == m && c.c.cols == c.b.cols && c.b.ok() && c.c.ok();
    let bias = c.bias.is_none_or(|len| len == c.c.rows);
    let types = c.c_ty.is_some() && matches!(c.b_ty, Fp8B::Same | Fp8B::F16 | Fp8B::Bf16);
    let a_scales = match a_scales.0 {
        K::None => true,
        K::PerTensor => a_scales.1 == 1,
        _ => a_scales.1 == nnzb,
    };
    let (b_kind, b_len, b_t) = c.b_scales;
    let b_scales = !b_scales_given
        || b_kind == K::None
        || (c.b_ty == Fp8B::Same
            && !(b_kind == K::PerColumn && b_t)
            && match b_kind {
                K::PerTensor => b_len == 1,
                _ => b_len == c.b.cols,
            });
    transpose_ok
        && matches!(c.backend, Backend::Auto | Backend::Cpu)
        && shapes
        && bias
        && types
        && a_scales
        && b_scales
}

/// B's scales as `ColumnScales` of their kind.
fn scales_of(kind: sparsek::ScaleKind, v: &[f32]) -> sparsek::ColumnScales<'_> {
    use sparsek::ScaleKind as K;
    match kind {
        K::PerTensor => sparsek::ColumnScales::PerTensor(sparsek::Vector::Host(v)),
        K::PerColumn => sparsek::ColumnScales::PerColumn(sparsek::Vector::Host(v)),
        _ => sparsek::ColumnScales::None,
    }
}

/// The products' B (`k x n`) with its scales as the case draws them: attached (FP8 only), or
/// attached to the transposed view and transposed back (then they belong to B's rows).
fn b_view<'a, TB: FuzzB>(c: &Fp8Case, data: &'a [TB], scales: &'a [f32]) -> Dense<'a, TB> {
    let (kind, _, transposed) = c.b_scales;
    if transposed {
        TB::attach(c.b.dense(data).t(), scales_of(kind, scales)).t()
    } else {
        TB::attach(c.b.dense(data), scales_of(kind, scales))
    }
}

/// `v` (a `Vec`) as a slice of `U` where it is a `Vec<U>`: how a case generic over B's
/// type reaches the unified entries, whose bound (`TakesB`) admits A's FP8 type, f16 and
/// bf16 only.
fn as_type<U: 'static>(v: &dyn Any) -> Option<&[U]> {
    v.downcast_ref::<Vec<U>>().map(Vec::as_slice)
}

/// `QuantizedBsr::new` of A and its scales, checked against the scales as given: it
/// refuses (`Ok(Err)`) exactly a count that is not 0, 1 or nnzb for its kind.
fn quantized_a<Q: sparsek::Fp8>(
    a: &BsrMatrix<Q>,
    scales: &sparsek::BlockScales,
    (kind, len): (sparsek::ScaleKind, usize),
    nnzb: usize,
) -> Result<Result<sparsek::QuantizedBsr<Q>, sparsek::Error>, String> {
    use sparsek::ScaleKind as K;
    let q = sparsek::QuantizedBsr::new(a.clone(), scales.clone());
    let a_ok = match kind {
        K::None => true,
        K::PerTensor => len == 1,
        _ => len == nnzb,
    };
    ensure!(
        q.is_ok() == a_ok,
        "QuantizedBsr::new gave {:?}",
        q.as_ref().err()
    );
    Ok(q)
}

/// A unified product of the case's kind: `spmm`, `spmm_fused` or `dense_spmm` (as
/// `dense_spmm(Bᵀ, A, Cᵀ)` with op(A) flipped: the same product and the same checks).
#[allow(clippy::too_many_arguments)]
fn unified_product<'a, Q, X, O>(
    b: &[X],
    c: &Fp8Case,
    call: UnifiedCall,
    a: impl Into<sparsek::BsrOperand<'a, Q>>,
    b_scales: &[f32],
    yd: &mut [O],
    epilogue: &Epilogue<'_, O>,
    opts: &SpmmOptions,
) -> Result<(), sparsek::Error>
where
    Q: TakesB<X> + TakesBias<O> + 'a,
    X: FuzzB,
    O: Element,
{
    let b = b_view(c, b, b_scales);
    let y = c.c.dense_mut(yd);
    match call {
        UnifiedCall::Spmm => sparsek::spmm(a, b, y, opts),
        UnifiedCall::Fused => sparsek::spmm_fused(a, b, y, epilogue, opts),
        UnifiedCall::Dense => sparsek::dense_spmm(b.t(), a, y.t(), &opts.transpose_a(!c.transpose)),
    }
}

/// `SparseLinear::new` of FP8 weights, then `forward` (x without scales) or
/// `forward_scaled` (x with them).
fn unified_layer<Q, X, O>(
    x: &[X],
    c: &Fp8Case,
    q: sparsek::QuantizedBsr<Q>,
    bias: Option<Vec<O>>,
    opts: &SpmmOptions,
    x_scales: &[f32],
    yd: &mut [O],
) -> Result<(), sparsek::Error>
where
    Q: sparsek::Fp8 + TakesB<X> + TakesBias<O>,
    X: Element,
    O: Element,
{
    let layer = sparsek::SparseLinear::new(q, bias, c.act)?.with_options(*opts);
    match c.b_scales.0 {
        sparsek::ScaleKind::None => layer.forward(x, c.b.cols, yd),
        kind => layer.forward_scaled(x, scales_of(kind, x_scales), c.b.cols, yd),
    }
}

/// A unified entry and the deprecated one on the same inputs agree: both accept or both
/// refuse, and leave the same output, bit for bit.
fn same_result<O: Element>(
    r: &Result<(), sparsek::Error>,
    y: &[O],
    r_old: &Result<(), sparsek::Error>,
    y_old: &[O],
) -> Result<(), String> {
    ensure!(
        r.is_ok() == r_old.is_ok(),
        "the unified entry gave {:?}, the deprecated one {:?}",
        r.as_ref().err(),
        r_old.as_ref().err()
    );
    ensure!(
        y.len() == y_old.len() && y.iter().zip(y_old).all(|(&a, &b)| same_bits(a, b)),
        "the unified and the deprecated entries wrote different outputs"
    );
    Ok(())
}

/// A's FP8 types with what the unified entries bound: B of A's type, f16 or bf16, and a
/// bias of C's type (f32, f16, bf16; A's own compiles and is refused).
trait FuzzA:
    sparsek::Fp8
    + FuzzB
    + TakesB<f16>
    + TakesB<bf16>
    + TakesBias<f32>
    + TakesBias<f16>
    + TakesBias<bf16>
{
}
impl FuzzA for sparsek::F8E4M3 {}
impl FuzzA for sparsek::F8E5M2 {}

fn run_fp8<Q: FuzzA + TakesBias<O>, TB: FuzzB, O: Element>(
    c: &Fp8Case,
    rng: &mut FuzzRng,
) -> Check {
    use sparsek::ScaleKind as K;
    let a: BsrMatrix<Q> = build_bsr(rng, &c.a, |rng| Q::from_f32(rng.random_range(-1.0f32..1.0)));
    let (m, k) = (a.m(), a.k());
    let nnzb = a.nnz_blocks();
    let scale = |rng: &mut FuzzRng| rng.random_range(0.25f32..2.0);
    let a_len = if c.a_scales.1 >= usize::MAX - 1 {
        // nnzb, or nnzb + 1 (the generator's off-by-one).
        nnzb + (usize::MAX - c.a_scales.1)
    } else {
        c.a_scales.1
    };
    let a_scales = match c.a_scales.0 {
        K::None => sparsek::BlockScales::None,
        K::PerTensor if a_len == 1 => sparsek::BlockScales::PerTensor(scale(rng)),
        // Two per-tensor values are not representable in BlockScales: per block instead,
        // of a length that is then wrong unless nnzb = 2.
        _ => sparsek::BlockScales::PerBlock((0..a_len).map(|_| scale(rng)).collect()),
    };
    // The scales as given (two per-tensor values became a per-block list).
    let a_given = (a_scales.kind(), a_scales.as_slice().len());
    let sa = |blk: usize| a_scales.of_block(blk).unwrap_or(1.0) as f64;
    // A's dense form (dequantized) where it is small; else A stores nothing.
    let (bm, bk) = (c.a.bm, c.a.bk);
    let dense_a: Option<Vec<f64>> = match m.checked_mul(k) {
        Some(len) if len <= CAP * 4 => {
            let mut d = vec![0f64; len];
            let mut id = 0;
            for row in a.block_rows() {
                for (jb, &col) in row.col_idx.iter().enumerate() {
                    for r in 0..bm {
                        for cc in 0..bk {
                            d[(row.index * bm + r) * k + col as usize * bk + cc] =
                                row.values[jb * bm * bk + r * bk + cc].to_f32() as f64 * sa(id);
                        }
                    }
                    id += 1;
                }
            }
            Some(d)
        }
        _ => {
            ensure!(nnzb == 0, "a large matrix with blocks");
            None
        }
    };
    let b_data: Vec<TB> = random_values(rng, c.b.len);
    let (b_kind, b_len, _) = c.b_scales;
    let b_scale_values: Vec<f32> = (0..b_len).map(|_| scale(rng)).collect();
    // The products' B can carry scales only when FP8 (Dense::with_scales); the layer
    // attaches any, for the product to refuse.
    let b_scales_given = !c.entry.product() || TB::DTYPE.is_fp8();
    let sb = |j: usize| match if b_scales_given { b_kind } else { K::None } {
        K::PerTensor => b_scale_values[0] as f64,
        K::PerColumn => b_scale_values[j] as f64,
        _ => 1.0,
    };
    let b_at = |i: usize, j: usize| b_data[c.b.offset(i, j)].to_f32() as f64 * sb(j);
    let longest = [m, k, c.b.rows, c.b.cols, c.c.rows, c.c.cols]
        .into_iter()
        .max()
        .unwrap_or(0);
    // |A·B| per term is at most 2 · 2 (scales up to 2, values up to 1).
    let bound = c.alpha.abs() as f64 * 4.0 * longest as f64 + c.beta.abs() as f64 + 1.0;
    let sentinel = O::from_f32(sentinel_above(bound));
    let poison = if c.beta == 0.0 && c.nan_poison {
        O::from_f32(f32::NAN)
    } else {
        sentinel
    };
    let y = c.c;
    let (mut yd, addressed) = y.output(sentinel, poison, c.beta, rng);
    let before = yd.clone();
    let bias: Option<Vec<O>> = c.bias.map(|n| random_values(rng, n));
    let opts = SpmmOptions::new()
        .alpha(c.alpha)
        .beta(c.beta)
        .transpose_a(c.transpose)
        .backend(c.backend);
    let mut epilogue = Epilogue::<O>::new().activation(c.act);
    if let Some(bias) = &bias {
        epilogue = epilogue.bias(sparsek::Vector::Host(bias));
    }
    // A unified entry `$f::<Q, X, O>(b, ...)` with B as a vector of its own type X (the
    // entries bound it: `TakesB`).
    macro_rules! with_b {
        ($f:ident($($arg:expr),*)) => {
            if let Some(bx) = as_type::<Q>(&b_data) {
                $f::<Q, Q, O>(bx, $($arg),*)
            } else if let Some(bx) = as_type::<f16>(&b_data) {
                $f::<Q, f16, O>(bx, $($arg),*)
            } else if let Some(bx) = as_type::<bf16>(&b_data) {
                $f::<Q, bf16, O>(bx, $($arg),*)
            } else {
                return Err(format!(
                    "{:?} with B of {:?}: the generator gives the unified entries A's FP8 \
                     type, f16 or bf16",
                    c.entry,
                    TB::DTYPE
                ));
            }
        };
    }
    let deprecated_product = |yd: &mut [O]| {
        sparsek::spmm_fp8(
            sparsek::Fp8Operand::Host(&a, &a_scales),
            b_view(c, &b_data, &b_scale_values),
            y.dense_mut(yd),
            &epilogue,
            &opts,
        )
    };
    let deprecated_layer = |q: sparsek::QuantizedBsr<Q>, yd: &mut [O]| {
        sparsek::SparseLinear::new_fp8(q, bias.clone(), c.act).and_then(|layer| {
            layer.with_options(opts).forward_fp8(
                &b_data,
                scales_of(b_kind, &b_scale_values),
                c.b.cols,
                yd,
            )
        })
    };
    let r = match c.entry {
        Fp8Entry::Spmm => deprecated_product(&mut yd),
        Fp8Entry::Unified { call, quantized } => {
            let r = if quantized {
                match quantized_a(&a, &a_scales, a_given, nnzb)? {
                    Err(e) => Err(e),
                    Ok(q) => with_b!(unified_product(
                        c,
                        call,
                        &q,
                        &b_scale_values,
                        &mut yd,
                        &epilogue,
                        &opts
                    )),
                }
            } else {
                with_b!(unified_product(
                    c,
                    call,
                    sparsek::BsrOperand::Scaled(&a, &a_scales),
                    &b_scale_values,
                    &mut yd,
                    &epilogue,
                    &opts
                ))
            };
            if c.cross_check {
                let mut old = before.clone();
                let r_old = deprecated_product(&mut old);
                same_result(&r, &yd, &r_old, &old)?;
            }
            r
        }
        Fp8Entry::Linear => match quantized_a(&a, &a_scales, a_given, nnzb)? {
            Err(e) => Err(e),
            Ok(q) => deprecated_layer(q, &mut yd),
        },
        Fp8Entry::LinearUnified => {
            let (r, q) = match quantized_a(&a, &a_scales, a_given, nnzb)? {
                Err(e) => (Err(e), None),
                Ok(q) => (
                    with_b!(unified_layer(
                        c,
                        q.clone(),
                        bias.clone(),
                        &opts,
                        &b_scale_values,
                        &mut yd
                    )),
                    Some(q),
                ),
            };
            if let (true, Some(q)) = (c.cross_check, q) {
                let mut old = before.clone();
                let r_old = deprecated_layer(q, &mut old);
                same_result(&r, &yd, &r_old, &old)?;
            }
            r
        }
        Fp8Entry::Generic => {
            let bq: Vec<Q> = random_values(rng, c.b.len);
            match rng.random_range(0..3) {
                0 => sparsek::spmm(&a, c.b.dense(&bq), y.dense_mut(&mut yd), &opts),
                1 => {
                    let bias_q: Vec<Q> = random_values(rng, y.rows.min(CAP));
                    let e = sparsek::Epilogue::new()
                        .activation(c.act)
                        .bias(sparsek::Vector::Host(&bias_q));
                    sparsek::spmm_fused(&a, c.b.dense(&bq), y.dense_mut(&mut yd), &e, &opts)
                }
                _ => sparsek::dense_spmm(c.b.dense(&bq), &a, y.dense_mut(&mut yd), &opts),
            }
        }
    };
    let valid = fp8_valid(c, a_given, nnzb, b_scales_given);
    ensure!(
        r.is_ok() == valid,
        "{:?} gave {:?}, the oracle says valid = {valid}",
        c.entry,
        r.as_ref().err()
    );
    if r.is_err() {
        ensure!(
            yd.iter()
                .zip(&before)
                .all(|(&x, &y)| x.to_f32().to_bits() == y.to_f32().to_bits()),
            "C written by a call that failed ({:?})",
            r.err()
        );
        return Ok(Outcome::Rejected);
    }
    let mut pairs = Vec::with_capacity(addressed.len());
    let mut seen = vec![false; yd.len()];
    if !addressed.is_empty() {
        for i in 0..y.rows {
            for j in 0..y.cols {
                let dot: f64 = (0..k)
                    .map(|l| dense_a.as_ref().map_or(0.0, |d| d[i * k + l]) * b_at(l, j))
                    .sum();
                let off = y.offset(i, j);
                seen[off] = true;
                let mut v = c.alpha as f64 * dot;
                if let Some(b) = &bias {
                    v += b[i].to_f32() as f64;
                }
                if c.beta != 0.0 {
                    v += c.beta as f64 * before[off].to_f32() as f64;
                }
                ensure!(
                    c.beta != 0.0 || !same_bits(yd[off], poison),
                    "C({i}, {j}) not written"
                );
                pairs.push((yd[off].to_f32() as f64, act_f64(c.act, v)));
            }
        }
    }
    for (i, (&x, &b)) in yd.iter().zip(&before).enumerate() {
        ensure!(
            seen[i] || x.to_f32().to_bits() == b.to_f32().to_bits(),
            "C[{i}] outside the view written"
        );
    }
    let tol = tolerance(c.c_ty.unwrap_or(Ty::F32));
    let err = rel_err(&pairs, 0.1);
    ensure!(
        err <= tol,
        "C off the reference by {err:e} (tolerance {tol:e})"
    );
    Ok(Outcome::Accepted)
}

/// The monomorphization of one case: A's FP8 type, B's type, C's type.
fn run_fp8_typed<Q: FuzzA, R: sparsek::Fp8 + FuzzB>(c: &Fp8Case, rng: &mut FuzzRng) -> Check {
    fn by_c<Q: FuzzA, TB: FuzzB>(c: &Fp8Case, rng: &mut FuzzRng) -> Check {
        match c.c_ty {
            Some(Ty::F32) => run_fp8::<Q, TB, f32>(c, rng),
            Some(Ty::F16) => run_fp8::<Q, TB, f16>(c, rng),
            Some(Ty::Bf16) => run_fp8::<Q, TB, bf16>(c, rng),
            None => run_fp8::<Q, TB, Q>(c, rng),
        }
    }
    match c.b_ty {
        Fp8B::Same => by_c::<Q, Q>(c, rng),
        Fp8B::Other => by_c::<Q, R>(c, rng),
        Fp8B::F16 => by_c::<Q, f16>(c, rng),
        Fp8B::Bf16 => by_c::<Q, bf16>(c, rng),
        Fp8B::F32 => by_c::<Q, f32>(c, rng),
    }
}

#[test]
fn fuzz_spmm_fp8() {
    DRIVER.run("spmm_fp8", 15, gen_fp8, |c, rng| {
        if c.e5m2 {
            run_fp8_typed::<sparsek::F8E5M2, sparsek::F8E4M3>(c, rng)
        } else {
            run_fp8_typed::<sparsek::F8E4M3, sparsek::F8E5M2>(c, rng)
        }
    });
}
