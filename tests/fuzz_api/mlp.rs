//! Target: the gated MLP (BsrMatrix::interleave_block_rows, SparseMlp::new / forward on
//! the host; QuantizedBsr::interleave_block_rows, SparseMlp::new / forward with FP8 weights
//! and the deprecated SparseMlp::new_fp8 / forward_fp8, checked bit for bit against them in
//! a fraction of cases; the gated epilogue through all; SparseMlp::forward_with_bias with
//! biases of the weights' type, of the right length or one off).

use std::fmt::Debug;

use rand::Rng;
use sparsek::{
    bf16, f16, Activation, Backend, BsrMatrix, Element, MlpBias, QuantizedBsr, SparseMlp, TakesB,
    Vector,
};

use crate::dequantize::dequantized64;
use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome};
use crate::inputs::{
    act_f64, buffer_len, huge, rel_err, same_bits, sentinel_above, tol2, tolerance, Ty,
};
use crate::operands::{build_bsr, gen_bsr_spec, BsrSpec};
use crate::DRIVER;

/// The types of y (and of FP8 weights): the fuzz's three and the two FP8 ones.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MlpTy {
    F32,
    Bf16,
    F16,
    E4M3,
    E5M2,
}

impl MlpTy {
    /// The non-FP8 type's tolerance class.
    fn ty(self) -> Ty {
        match self {
            MlpTy::Bf16 => Ty::Bf16,
            MlpTy::F16 => Ty::F16,
            _ => Ty::F32,
        }
    }
}

/// FP8 weights (W8A16): their type and, per weight (gate, up, down), per-block scales
/// (else one per tensor).
#[derive(Debug, Clone, Copy)]
struct MlpFp8 {
    e5m2: bool,
    per_block: [bool; 3],
    /// Through `SparseMlp::new` / `forward`, else the deprecated `new_fp8` / `forward_fp8`
    /// (always for an f32 x, which the unified `forward` does not compile with: `TakesB`).
    unified: bool,
    /// Also through the other pair, on the same inputs: the same acceptance and the same
    /// h and y, bit for bit.
    cross_check: bool,
}

#[derive(Debug, Clone)]
struct MlpCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    /// x's and h's type (the weights' too, unless FP8).
    tin: Ty,
    tout: MlpTy,
    /// FP8 weights, or weights of `tin`.
    fp8: Option<MlpFp8>,
    gate: BsrSpec,
    up: BsrSpec,
    down: BsrSpec,
    act: Activation,
    backend: Backend,
    batch: usize,
    x_len: usize,
    h_len: usize,
    y_len: usize,
    /// The lengths of the gate_up and down biases (16-bit and f32 weights only), if any.
    gate_up_bias: Option<usize>,
    down_bias: Option<usize>,
}

fn gen_mlp(rng: &mut FuzzRng) -> MlpCase {
    let clean = rng.random_bool(0.5);
    let gate = gen_bsr_spec(rng, clean);
    // Clean: up of gate's shape, down taking gate's rows; else sometimes not.
    let mut up = gate;
    if !clean && rng.random_bool(0.3) {
        up = gen_bsr_spec(rng, false);
    }
    if up.bm <= 4 && up.bk <= 4 {
        // A pattern of its own (huge specs stay empty).
        up.p = [0.0, 0.5, 1.0][rng.random_range(0..3)];
    }
    let mut down = gen_bsr_spec(rng, clean);
    let m = gate.m();
    if m <= 64 && (clean || rng.random_bool(0.5)) {
        // down's k = gate's m (small: a mask of a few blocks), bk a divisor of it.
        down.bk = (1..=4).rev().find(|d| m % d == 0).unwrap_or(1).max(1);
        down.bc = if m == 0 { 0 } else { m / down.bk };
    }
    let batch = if !clean && rng.random_bool(0.05) {
        huge(rng)
    } else {
        rng.random_range(0..=4)
    };
    let need =
        |rows: usize, cols: usize| -> Option<u128> { (rows as u128).checked_mul(cols as u128) };
    let (hidden, inter, out) = (gate.k(), gate.m(), down.m());
    let x_len = buffer_len(rng, need(batch, hidden), clean);
    let h_len = buffer_len(rng, need(batch, inter), clean);
    let y_len = buffer_len(rng, need(batch, out), clean);
    let mut fp8 = rng.random_bool(0.3).then(|| MlpFp8 {
        e5m2: rng.random_bool(0.5),
        per_block: [
            rng.random_bool(0.5),
            rng.random_bool(0.5),
            rng.random_bool(0.5),
        ],
        unified: rng.random_bool(0.5),
        cross_check: rng.random_bool(0.25),
    });
    // Types the products refuse (an FP8 y; an f32 x for FP8 weights) only when not clean.
    let wrong_types = !clean && rng.random_bool(0.3);
    let (tin, tout) = match (fp8.is_some(), wrong_types) {
        (false, false) => [
            (Ty::F32, MlpTy::F32),
            (Ty::F16, MlpTy::F32),
            (Ty::Bf16, MlpTy::Bf16),
            (Ty::F16, MlpTy::F16),
        ][rng.random_range(0..4)],
        (false, true) => [
            (Ty::F32, MlpTy::E4M3),
            (Ty::F16, MlpTy::E5M2),
            (Ty::Bf16, MlpTy::E4M3),
        ][rng.random_range(0..3)],
        (true, false) => [
            (Ty::F16, MlpTy::F32),
            (Ty::Bf16, MlpTy::Bf16),
            (Ty::F16, MlpTy::F16),
            (Ty::Bf16, MlpTy::F32),
        ][rng.random_range(0..4)],
        (true, true) => [
            (Ty::F32, MlpTy::F32),
            (Ty::F16, MlpTy::E5M2),
            (Ty::Bf16, MlpTy::E4M3),
        ][rng.random_range(0..3)],
    };
    if let Some(f) = fp8.as_mut() {
        f.unified &= tin != Ty::F32;
    }
    let backend = if clean || rng.random_bool(0.8) {
        [Backend::Auto, Backend::Cpu][rng.random_range(0..2)]
    } else {
        [Backend::Decode, Backend::Hopper, Backend::Wmma][rng.random_range(0..3)]
    };
    // A bias of the right length, or (not clean) one off; only where it is small to hold.
    let bias_len = |rng: &mut FuzzRng, want: usize| -> Option<usize> {
        (fp8.is_none() && want <= 4096 && rng.random_bool(0.3)).then(|| {
            if !clean && rng.random_bool(0.3) {
                if rng.random_bool(0.5) {
                    want + 1
                } else {
                    want.saturating_sub(1)
                }
            } else {
                want
            }
        })
    };
    let gate_up_bias = inter.checked_mul(2).and_then(|n| bias_len(rng, n));
    let down_bias = bias_len(rng, out);
    MlpCase {
        clean,
        tin,
        tout,
        fp8,
        gate,
        up,
        down,
        act: [
            Activation::None,
            Activation::Relu,
            Activation::GeluTanh,
            Activation::Silu,
        ][rng.random_range(0..4)],
        backend,
        batch,
        x_len,
        h_len,
        y_len,
        gate_up_bias,
        down_bias,
    }
}

/// The poison of an MLP output: above any result for the fuzz's types, a plain value for an
/// FP8 y (always refused, so never a result).
fn mlp_sentinel<T: Element>() -> T {
    if T::DTYPE.is_fp8() {
        T::from_f32(-3.5)
    } else {
        T::from_f32(sentinel_above(1e3))
    }
}

/// The weights of a case as the MLP reads them, in f64 (dense, row-major).
struct MlpDense {
    gate: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

/// What one forward did against the model: `valid` (the oracle's acceptance) and, where the
/// only defect is a type, `type_error` (the error a refusal must be). A refused call leaves
/// h and y bitwise untouched; an accepted one writes h = act(G·x) ⊙ (U·x) and y = D·h (from
/// the h written) in the first `batch` rows, nothing past them.
#[allow(clippy::too_many_arguments)]
fn check_mlp_forward<X: Element, O: Element>(
    c: &MlpCase,
    (hidden, inter, out): (usize, usize, usize),
    r: Result<(), sparsek::Error>,
    valid: bool,
    type_error: Option<fn(&sparsek::Error) -> bool>,
    (x, h, y): (&[X], &[X], &[O]),
    (bias_gu, bias_d): (Option<&[f64]>, Option<&[f64]>),
    dense: impl FnOnce() -> Result<MlpDense, String>,
) -> Check {
    let batch = c.batch;
    let (sentinel_h, sentinel_y) = (mlp_sentinel::<X>(), mlp_sentinel::<O>());
    ensure!(
        r.is_ok() == valid,
        "forward gave {:?}, the oracle says valid = {valid}",
        r.as_ref().err()
    );
    if let Err(e) = r {
        if let Some(expected) = type_error {
            ensure!(expected(&e), "a wrong type gave {e:?}");
        }
        ensure!(
            h.iter().all(|&v| same_bits(v, sentinel_h))
                && y.iter().all(|&v| same_bits(v, sentinel_y)),
            "h or y written by a call that failed ({e:?})"
        );
        return Ok(Outcome::Rejected);
    }
    if batch == 0 || (inter == 0 && out == 0) {
        // Nothing addressed (batch may be huge with no row of h or y to write).
        ensure!(
            h.iter().all(|&v| same_bits(v, sentinel_h))
                && y.iter().all(|&v| same_bits(v, sentinel_y)),
            "h or y written with nothing to write"
        );
        return Ok(Outcome::Accepted);
    }
    let MlpDense {
        gate: gd,
        up: ud,
        down: dd,
    } = dense()?;
    let mut h_pairs = Vec::new();
    let mut y_pairs = Vec::new();
    for b in 0..batch {
        for i in 0..inter {
            let (mut g, mut u) = (0f64, 0f64);
            for k in 0..hidden {
                let xv = x[b * hidden + k].to_f32() as f64;
                g += gd[i * hidden + k] * xv;
                u += ud[i * hidden + k] * xv;
            }
            if let Some(bg) = bias_gu {
                // gate_up's rows: gate row i in pair i / bm, the up row bm after it.
                let bm = c.gate.bm;
                let row = (i / bm) * 2 * bm + i % bm;
                g += bg[row];
                u += bg[row + bm];
            }
            h_pairs.push((h[b * inter + i].to_f32() as f64, act_f64(c.act, g) * u));
        }
        for o in 0..out {
            let v: f64 = (0..inter)
                .map(|i| dd[o * inter + i] * h[b * inter + i].to_f32() as f64)
                .sum::<f64>()
                + bias_d.map_or(0.0, |bd| bd[o]);
            ensure!(
                !same_bits(y[b * out + o], sentinel_y) || out == 0,
                "y[{b}][{o}] not written"
            );
            y_pairs.push((y[b * out + o].to_f32() as f64, v));
        }
    }
    ensure!(
        h[batch * inter..].iter().all(|&v| same_bits(v, sentinel_h))
            && y[batch * out..].iter().all(|&v| same_bits(v, sentinel_y)),
        "h or y written past batch rows"
    );
    let (eh, ey) = (rel_err(&h_pairs, 0.1), rel_err(&y_pairs, 0.1));
    ensure!(
        eh <= tolerance(c.tin) * 2.0,
        "h off the reference by {eh:e}"
    );
    ensure!(
        ey <= tol2(c.tin, c.tout.ty()),
        "y off the reference by {ey:e}"
    );
    Ok(Outcome::Accepted)
}

/// `batch x cols` values fit a buffer of `len`.
fn mlp_fits(batch: usize, cols: usize, len: usize) -> bool {
    (batch as u128)
        .checked_mul(cols as u128)
        .is_some_and(|n| n <= usize::MAX as u128 && n <= len as u128)
}

/// Whether the forward's checks other than the element types pass: a host backend, and x,
/// h and y (of these lengths) holding `batch` columns of hidden, inter and out values.
fn mlp_otherwise_valid(
    c: &MlpCase,
    (hidden, inter, out): (usize, usize, usize),
    (x_len, h_len, y_len): (usize, usize, usize),
) -> bool {
    matches!(c.backend, Backend::Auto | Backend::Cpu)
        && mlp_fits(c.batch, hidden, x_len)
        && mlp_fits(c.batch, inter, h_len)
        && mlp_fits(c.batch, out, y_len)
}

fn dense64<T: Element>(m: &BsrMatrix<T>) -> Result<Vec<f64>, String> {
    Ok(m.to_dense()
        .map_err(|e| format!("to_dense: {e}"))?
        .iter()
        .map(|v| v.to_f32() as f64)
        .collect())
}

fn run_mlp<T: Element, O: Element>(c: &MlpCase, rng: &mut FuzzRng) -> Check {
    let val = |rng: &mut FuzzRng| T::from_f32(rng.random_range(-1.0f32..1.0));
    let (gate, up, down) = (
        build_bsr(rng, &c.gate, val),
        build_bsr(rng, &c.up, val),
        build_bsr(rng, &c.down, val),
    );
    let same_shape = gate.m() == up.m() && gate.k() == up.k() && gate.block() == up.block();
    let gu = BsrMatrix::interleave_block_rows(&gate, &up);
    ensure!(
        gu.is_ok() == same_shape,
        "interleave_block_rows of {:?} and {:?} gave {:?}",
        c.gate,
        c.up,
        gu.as_ref().err()
    );
    let Ok(gu) = gu else {
        return Ok(Outcome::Rejected);
    };
    let back = gu
        .deinterleave_block_rows()
        .map_err(|e| format!("deinterleave: {e}"))?;
    ensure!(
        back == (gate.clone(), up.clone()),
        "deinterleave(interleave(g, u)) != (g, u)"
    );
    let mlp = sparsek::SparseMlp::from_interleaved(gu, down.clone(), c.act);
    let weights_ok = down.k() == gate.m();
    ensure!(
        mlp.is_ok() == weights_ok,
        "SparseMlp of inter {} and down's k {} gave {:?}",
        gate.m(),
        down.k(),
        mlp.as_ref().err()
    );
    let Ok(mlp) = mlp else {
        return Ok(Outcome::Rejected);
    };
    let mlp = mlp.with_backend(c.backend);
    let dims = (gate.k(), gate.m(), down.m());
    let x: Vec<T> = random_values(rng, c.x_len);
    let mut h = vec![mlp_sentinel::<T>(); c.h_len];
    let mut y = vec![mlp_sentinel::<O>(); c.y_len];
    let bias_gu: Option<Vec<T>> = c.gate_up_bias.map(|n| random_values(rng, n));
    let bias_d: Option<Vec<T>> = c.down_bias.map(|n| random_values(rng, n));
    let r = if bias_gu.is_some() || bias_d.is_some() {
        let bias = MlpBias {
            gate_up: bias_gu.as_deref().map(Vector::Host),
            down: bias_d.as_deref().map(Vector::Host),
        };
        mlp.forward_with_bias(&x, c.batch, &mut h, &mut y, &bias)
    } else {
        mlp.forward(&x, c.batch, &mut h, &mut y)
    };
    // Each bias, if any, holds one value per row of its product's output.
    let bias_ok = c
        .gate_up_bias
        .is_none_or(|n| Some(n) == dims.1.checked_mul(2))
        && c.down_bias.is_none_or(|n| n == dims.2);
    let otherwise_valid = mlp_otherwise_valid(c, dims, (x.len(), h.len(), y.len())) && bias_ok;
    // Only y can have a wrong type here (an FP8 one): the products' UnsupportedTypes.
    let types_ok = !O::DTYPE.is_fp8();
    let type_error: Option<fn(&sparsek::Error) -> bool> = (otherwise_valid && !types_ok)
        .then_some(|e| matches!(e, sparsek::Error::UnsupportedTypes { .. }));
    let f64s = |v: &Option<Vec<T>>| -> Option<Vec<f64>> {
        v.as_ref()
            .map(|v| v.iter().map(|e| e.to_f32() as f64).collect())
    };
    let (bgu64, bd64) = (f64s(&bias_gu), f64s(&bias_d));
    check_mlp_forward(
        c,
        dims,
        r,
        otherwise_valid && types_ok,
        type_error,
        (&x, &h, &y),
        (bgu64.as_deref(), bd64.as_deref()),
        || {
            Ok(MlpDense {
                gate: dense64(&gate)?,
                up: dense64(&up)?,
                down: dense64(&down)?,
            })
        },
    )
}

/// The FP8 weights' types, with the x types the unified `forward` bounds them to take.
trait MlpQ: sparsek::Fp8 + TakesB<f16> + TakesB<bf16> {}
impl MlpQ for sparsek::F8E4M3 {}
impl MlpQ for sparsek::F8E5M2 {}

/// x's types of the FP8 MLP: `forward_unified` is `SparseMlp::forward`, which compiles with
/// those FP8 weights take (f16, bf16: `TakesB`) and is `None` for the others (f32, refused
/// when run through the deprecated `forward_fp8`).
trait MlpX: Element {
    fn forward_unified<Q: MlpQ, O: Element>(
        mlp: &SparseMlp<QuantizedBsr<Q>>,
        x: &[Self],
        batch: usize,
        h: &mut [Self],
        y: &mut [O],
    ) -> Option<Result<(), sparsek::Error>>;
}
macro_rules! mlp_x {
    ($($t:ty: $takes:tt),*) => {$(
        impl MlpX for $t {
            fn forward_unified<Q: MlpQ, O: Element>(
                mlp: &SparseMlp<QuantizedBsr<Q>>,
                x: &[Self],
                batch: usize,
                h: &mut [Self],
                y: &mut [O],
            ) -> Option<Result<(), sparsek::Error>> {
                mlp_x!(@ $takes, mlp, x, batch, h, y)
            }
        }
    )*};
    (@ true, $mlp:ident, $x:ident, $batch:ident, $h:ident, $y:ident) => {
        Some($mlp.forward($x, $batch, $h, $y))
    };
    (@ false, $mlp:ident, $x:ident, $batch:ident, $h:ident, $y:ident) => {{
        let _ = ($mlp, $x, $batch, $h, $y);
        None
    }};
}
mlp_x!(f16: true, bf16: true, f32: false);

/// An MLP of FP8 weights (`Q`, quantized from random f32 ones) through `new` / `forward` or
/// the deprecated `new_fp8` / `forward_fp8`, with x and h of `X` (W8A16 takes f16/bf16) and
/// y of `O` (f16, bf16 or f32).
fn run_mlp_fp8<Q: MlpQ, X: MlpX, O: Element>(c: &MlpCase, rng: &mut FuzzRng) -> Check {
    let Some(f) = c.fp8 else {
        return Err("run_mlp_fp8 without FP8 weights".into());
    };
    let val = |rng: &mut FuzzRng| rng.random_range(-1.0f32..1.0);
    let (gate, up, down) = (
        build_bsr(rng, &c.gate, val),
        build_bsr(rng, &c.up, val),
        build_bsr(rng, &c.down, val),
    );
    let quantize = |m: &BsrMatrix<f32>, per_block: bool| {
        m.quantize_fp8::<Q>(if per_block {
            sparsek::BlockGranularity::PerBlock
        } else {
            sparsek::BlockGranularity::PerTensor
        })
        .map_err(|e| format!("quantize_fp8 of finite values: {e}"))
    };
    let (gq, uq, dq) = (
        quantize(&gate, f.per_block[0])?,
        quantize(&up, f.per_block[1])?,
        quantize(&down, f.per_block[2])?,
    );
    let same_shape = gate.m() == up.m() && gate.k() == up.k() && gate.block() == up.block();
    let weights_ok = same_shape && down.k() == gate.m();
    let construct = |unified: bool| {
        if unified {
            SparseMlp::new(&gq, &uq, dq.clone(), c.act)
        } else {
            SparseMlp::new_fp8(&gq, &uq, dq.clone(), c.act)
        }
    };
    let name = |unified: bool| if unified { "new" } else { "new_fp8" };
    let mlp = construct(f.unified);
    ensure!(
        mlp.is_ok() == weights_ok,
        "{} of {:?}, {:?}, {:?} gave {:?}",
        name(f.unified),
        c.gate,
        c.up,
        c.down,
        mlp.as_ref().err()
    );
    let other = f.cross_check.then(|| construct(!f.unified));
    if let Some(o) = &other {
        ensure!(
            o.is_ok() == mlp.is_ok(),
            "{} gave {:?}, {} {:?}",
            name(f.unified),
            mlp.as_ref().err(),
            name(!f.unified),
            o.as_ref().err()
        );
    }
    let Ok(mlp) = mlp else {
        return Ok(Outcome::Rejected);
    };
    let mlp = mlp.with_backend(c.backend);
    let dims = (gate.k(), gate.m(), down.m());
    let x: Vec<X> = random_values(rng, c.x_len);
    let mut h = vec![mlp_sentinel::<X>(); c.h_len];
    let mut y = vec![mlp_sentinel::<O>(); c.y_len];
    // `forward`, or the deprecated `forward_fp8`; `None` where `forward` does not compile
    // (an f32 x).
    let forward = |mlp: &SparseMlp<QuantizedBsr<Q>>, unified: bool, h: &mut [X], y: &mut [O]| {
        if unified {
            X::forward_unified(mlp, &x, c.batch, h, y)
        } else {
            Some(mlp.forward_fp8(&x, c.batch, h, y))
        }
    };
    let Some(r) = forward(&mlp, f.unified, &mut h, &mut y) else {
        return Err(
            "the unified forward with an f32 x (the generator gives it forward_fp8)".into(),
        );
    };
    if let Some(Ok(other)) = other {
        let other = other.with_backend(c.backend);
        let mut h_other = vec![mlp_sentinel::<X>(); c.h_len];
        let mut y_other = vec![mlp_sentinel::<O>(); c.y_len];
        if let Some(r_other) = forward(&other, !f.unified, &mut h_other, &mut y_other) {
            ensure!(
                r.is_ok() == r_other.is_ok(),
                "forward gave {:?}, the other pair {:?}",
                r.as_ref().err(),
                r_other.as_ref().err()
            );
            let same = |a: &[X], b: &[X]| a.iter().zip(b).all(|(&u, &v)| same_bits(u, v));
            ensure!(
                same(&h, &h_other) && y.iter().zip(&y_other).all(|(&u, &v)| same_bits(u, v)),
                "the unified and the deprecated pairs wrote different h or y"
            );
        }
    }
    let otherwise_valid = mlp_otherwise_valid(c, dims, (x.len(), h.len(), y.len()));
    use sparsek::DType;
    let types_ok = matches!(X::DTYPE, DType::F16 | DType::Bf16)
        && matches!(O::DTYPE, DType::F16 | DType::Bf16 | DType::F32);
    let type_error: Option<fn(&sparsek::Error) -> bool> =
        (otherwise_valid && !types_ok).then_some(|e| matches!(e, sparsek::Error::Fp8Types { .. }));
    check_mlp_forward(
        c,
        dims,
        r,
        otherwise_valid && types_ok,
        type_error,
        (&x, &h, &y),
        (None, None),
        || {
            Ok(MlpDense {
                gate: dequantized64(&gq),
                up: dequantized64(&uq),
                down: dequantized64(&dq),
            })
        },
    )
}

fn run_mlp_fp8_of<Q: MlpQ>(c: &MlpCase, rng: &mut FuzzRng) -> Check {
    match (c.tin, c.tout) {
        (Ty::F16, MlpTy::F32) => run_mlp_fp8::<Q, f16, f32>(c, rng),
        (Ty::Bf16, MlpTy::Bf16) => run_mlp_fp8::<Q, bf16, bf16>(c, rng),
        (Ty::F16, MlpTy::F16) => run_mlp_fp8::<Q, f16, f16>(c, rng),
        (Ty::Bf16, MlpTy::F32) => run_mlp_fp8::<Q, bf16, f32>(c, rng),
        (Ty::F32, MlpTy::F32) => run_mlp_fp8::<Q, f32, f32>(c, rng),
        (Ty::F16, MlpTy::E5M2) => run_mlp_fp8::<Q, f16, sparsek::F8E5M2>(c, rng),
        (Ty::Bf16, MlpTy::E4M3) => run_mlp_fp8::<Q, bf16, sparsek::F8E4M3>(c, rng),
        other => Err(format!("no FP8 MLP type pair {other:?} in the fuzz")),
    }
}

#[test]
fn fuzz_sparse_mlp() {
    DRIVER.run("SparseMlp", 18, gen_mlp, |c, rng| {
        match (c.fp8, c.tin, c.tout) {
            (Some(f), _, _) if f.e5m2 => run_mlp_fp8_of::<sparsek::F8E5M2>(c, rng),
            (Some(_), _, _) => run_mlp_fp8_of::<sparsek::F8E4M3>(c, rng),
            (None, Ty::F32, MlpTy::F32) => run_mlp::<f32, f32>(c, rng),
            (None, Ty::F16, MlpTy::F32) => run_mlp::<f16, f32>(c, rng),
            (None, Ty::Bf16, MlpTy::Bf16) => run_mlp::<bf16, bf16>(c, rng),
            (None, Ty::F16, MlpTy::F16) => run_mlp::<f16, f16>(c, rng),
            (None, Ty::F32, MlpTy::E4M3) => run_mlp::<f32, sparsek::F8E4M3>(c, rng),
            (None, Ty::F16, MlpTy::E5M2) => run_mlp::<f16, sparsek::F8E5M2>(c, rng),
            (None, Ty::Bf16, MlpTy::E4M3) => run_mlp::<bf16, sparsek::F8E4M3>(c, rng),
            other => Err(format!("no type pair {other:?} in the fuzz")),
        }
    });
}
