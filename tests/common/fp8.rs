//! The FP8 products' cases, shared by tests/fp8.rs (the CPU reference) and tests/gpu_fp8.rs
//! (the device): random FP8 operands with random scales, and the f64 oracle of
//! `C = act(α·Σ_blocks (sa·A_blk·B_blk)·sb + bias + β·C)` from the exactly dequantized
//! values.

use rand::{rngs::StdRng, Rng};
use rayon::prelude::*;
use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
use sparsek::{
    bf16, f16, Activation, Backend, BlockMask, BlockScales, BlockShape, BsrMatrix, ColumnScales,
    DType, Dense, DenseShape, Element, Fp8, Layout, QuantizedBsr, ScaleKind, Vector, F8E4M3,
    F8E5M2,
};

/// B's element types: the FP8 ones take scales (`Dense::with_scales`), f16/bf16 none.
pub trait BOperand: Element {
    fn attach<'a>(d: Dense<'a, Self>, s: ColumnScales<'a>) -> Dense<'a, Self>;
}
impl BOperand for F8E4M3 {
    fn attach<'a>(d: Dense<'a, Self>, s: ColumnScales<'a>) -> Dense<'a, Self> {
        d.with_scales(s)
    }
}
impl BOperand for F8E5M2 {
    fn attach<'a>(d: Dense<'a, Self>, s: ColumnScales<'a>) -> Dense<'a, Self> {
        d.with_scales(s)
    }
}
impl BOperand for f16 {
    fn attach<'a>(d: Dense<'a, Self>, s: ColumnScales<'a>) -> Dense<'a, Self> {
        assert_eq!(s.kind(), ScaleKind::None, "W8A16 cases attach no scales");
        d
    }
}
impl BOperand for bf16 {
    fn attach<'a>(d: Dense<'a, Self>, s: ColumnScales<'a>) -> Dense<'a, Self> {
        assert_eq!(s.kind(), ScaleKind::None, "W8A16 cases attach no scales");
        d
    }
}

/// `view.attach(scales)`.
pub trait Attach<'a> {
    fn attach(self, s: ColumnScales<'a>) -> Self;
}
impl<'a, T: BOperand> Attach<'a> for Dense<'a, T> {
    fn attach(self, s: ColumnScales<'a>) -> Self {
        T::attach(self, s)
    }
}

use super::PatternKind;

/// One FP8 product.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub block_rows: usize,
    pub block_cols: usize,
    pub block: BlockShape,
    pub kind: PatternKind,
    pub n: usize,
    pub b_layout: Layout,
    pub c_layout: Layout,
    pub alpha: f32,
    pub beta: f32,
    /// Extra elements of leading dimension for B and C (0: packed).
    pub ld_pad: usize,
    pub bias: bool,
    pub activation: Activation,
    /// A's scales: `None`, `PerTensor` or `PerBlock`.
    pub a_scale: ScaleKind,
    /// `PerBlock` only: blocks (r, c) with (r + c) % 3 == 2 take scales of 150-300 and
    /// values about 1/200 (e4m3 subnormals), beside the others' scales near 1/64: scaled
    /// weights past the f16 maximum if a kernel folded the scale into 16-bit weights.
    pub a_scale_wide: bool,
    /// B's scales (an FP8 B only): `None`, `PerTensor` or `PerColumn`.
    pub b_scale: ScaleKind,
    pub backend: Backend,
}

impl Case {
    /// A case of `block_rows x block_cols` blocks with everything else plain: C = A·B, f32
    /// accumulation, B column-major, C row-major, scales per block and per column.
    pub fn new(block_rows: usize, block_cols: usize, block: BlockShape, n: usize) -> Self {
        Self {
            block_rows,
            block_cols,
            block,
            kind: PatternKind::Random(0.5),
            n,
            b_layout: Layout::ColMajor,
            c_layout: Layout::RowMajor,
            alpha: 1.0,
            beta: 0.0,
            ld_pad: 0,
            bias: false,
            activation: Activation::None,
            a_scale: ScaleKind::PerBlock,
            a_scale_wide: false,
            b_scale: ScaleKind::PerColumn,
            backend: Backend::Auto,
        }
    }
}

/// The operands of one case and its f64 oracle (`m x n` row-major).
pub struct Data<Q, TB, O> {
    pub a: BsrMatrix<Q>,
    pub a_scales: BlockScales,
    /// B's buffer (`b_shape`, with its ld padding).
    pub b: Vec<TB>,
    pub b_shape: DenseShape,
    /// B's scale kind and values (empty without).
    pub b_scale: ScaleKind,
    pub b_scales: Vec<f32>,
    /// C's old contents (NaN where β = 0).
    pub c0: Vec<O>,
    pub c_shape: DenseShape,
    pub bias: Vec<O>,
    pub want: Vec<f64>,
}

impl<Q, TB, O> Data<Q, TB, O> {
    /// B's scales over `v` (host or device values).
    pub fn column_scales<'a>(&self, v: Vector<'a, f32>) -> ColumnScales<'a> {
        match self.b_scale {
            ScaleKind::PerTensor => ColumnScales::PerTensor(v),
            ScaleKind::PerColumn => ColumnScales::PerColumn(v),
            _ => ColumnScales::None,
        }
    }
    /// m, k, n.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.a.m(), self.a.k(), self.b_shape.cols)
    }
}

/// A random value of ±[0.05, 1) times `mag`, as `T` (never zero for FP8 at the magnitudes
/// used here).
fn value<T: Element>(rng: &mut StdRng, mag: f32) -> T {
    let v: f32 = rng.random_range(0.05..1.0);
    T::from_f32(if rng.random_bool(0.5) {
        v * mag
    } else {
        -v * mag
    })
}

/// A scale in [0.5, 2) / `mag`: stored values of magnitude `mag` read as about 1.
fn scale(rng: &mut StdRng, mag: f32) -> f32 {
    rng.random_range(0.5f32..2.0) / mag
}

/// Stored FP8 values spread up to 64 where a scale brings them back near 1; up to 1 without.
const SPREAD: f32 = 64.0;

/// The operands of `case`: A (FP8 `Q`) with random scales of `case.a_scale`; B of `TB`
/// (`Q` for W8A8, with scales of `case.b_scale`; f16/bf16 for W8A16, without); C of `O`,
/// NaN where β = 0; the bias of `O`; and the oracle.
pub fn make<Q: Fp8, TB: Element, O: Element>(case: &Case, rng: &mut StdRng) -> Data<Q, TB, O> {
    let mask = super::mask(case.kind, case.block_rows, case.block_cols, rng);
    let a_mag = if case.a_scale == ScaleKind::None {
        1.0
    } else {
        SPREAD
    };
    let wide = case.a_scale_wide && case.a_scale == ScaleKind::PerBlock;
    let (bm, bk) = (case.block.rows, case.block.cols);
    let is_wide = |br: usize, bc: usize| wide && (br + bc) % 3 == 2;
    let a: BsrMatrix<Q> = BsrMatrix::from_block_mask(&mask, case.block, |i, j| {
        value(
            rng,
            if is_wide(i / bm, j / bk) {
                1.0 / 200.0
            } else {
                a_mag
            },
        )
    })
    .unwrap();
    let a_scales = match case.a_scale {
        ScaleKind::PerTensor => BlockScales::PerTensor(scale(rng, a_mag)),
        ScaleKind::PerBlock => {
            let mut s = Vec::with_capacity(a.nnz_blocks());
            for br in 0..a.row_ptr().len() - 1 {
                for id in a.row_ptr()[br] as usize..a.row_ptr()[br + 1] as usize {
                    s.push(if is_wide(br, a.col_idx()[id] as usize) {
                        rng.random_range(150.0f32..300.0)
                    } else {
                        scale(rng, a_mag)
                    });
                }
            }
            BlockScales::PerBlock(s)
        }
        _ => BlockScales::None,
    };
    let (m, k, n) = (a.m(), a.k(), case.n);
    let fp8_b = TB::DTYPE.is_fp8();
    let b_scale = if fp8_b { case.b_scale } else { ScaleKind::None };
    let b_mag = if b_scale == ScaleKind::None {
        1.0
    } else {
        SPREAD
    };
    let mut b_shape = DenseShape::packed(k, n, case.b_layout);
    let mut c_shape = DenseShape::packed(m, n, case.c_layout);
    b_shape.ld += case.ld_pad;
    c_shape.ld += case.ld_pad;
    let b: Vec<TB> = (0..b_shape.required_len().unwrap())
        .map(|_| value(rng, b_mag))
        .collect();
    let b_scales: Vec<f32> = match b_scale {
        ScaleKind::PerTensor => vec![scale(rng, b_mag)],
        ScaleKind::PerColumn => (0..n).map(|_| scale(rng, b_mag)).collect(),
        _ => Vec::new(),
    };
    let c_len = c_shape.required_len().unwrap();
    let c0: Vec<O> = if case.beta == 0.0 {
        vec![O::from_f32(f32::NAN); c_len]
    } else {
        (0..c_len)
            .map(|_| O::from_f32(rng.random_range(-1.0f32..1.0)))
            .collect()
    };
    let bias: Vec<O> = (0..m)
        .map(|_| O::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect();

    // The oracle, from the exact dequantized values.
    let sb = |j: usize| -> f64 {
        match b_scale {
            ScaleKind::PerTensor => b_scales[0] as f64,
            ScaleKind::PerColumn => b_scales[j] as f64,
            _ => 1.0,
        }
    };
    // B dequantized, row-major k x n; block-rows of the product in parallel, each element
    // summed over A's blocks in order.
    let mut b64 = vec![0f64; k * n];
    b64.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(kk, row)| {
            for (j, v) in row.iter_mut().enumerate() {
                *v = b[b_shape.layout.offset(kk, j, b_shape.ld).unwrap()].to_f32() as f64 * sb(j);
            }
        });
    let mut acc = vec![0f64; m * n];
    let (row_ptr, col_idx, values) = (a.row_ptr(), a.col_idx(), a.values());
    acc.par_chunks_mut((bm * n).max(1))
        .enumerate()
        .for_each(|(br, acc)| {
            for id in row_ptr[br] as usize..row_ptr[br + 1] as usize {
                let sa = a_scales.of_block(id).unwrap() as f64;
                let blk = &values[id * bm * bk..][..bm * bk];
                for r in 0..bm {
                    let out = &mut acc[r * n..(r + 1) * n];
                    for (kk, av) in blk[r * bk..][..bk].iter().enumerate() {
                        let av = av.to_f32() as f64 * sa;
                        let kk = col_idx[id] as usize * bk + kk;
                        for (o, bv) in out.iter_mut().zip(&b64[kk * n..(kk + 1) * n]) {
                            *o += av * bv;
                        }
                    }
                }
            }
        });
    let want = (0..m * n)
        .map(|idx| {
            let (i, j) = (idx / n, idx % n);
            let mut v = case.alpha as f64 * acc[idx];
            if case.bias {
                v += bias[i].to_f32() as f64;
            }
            if case.beta != 0.0 {
                v += case.beta as f64
                    * c0[c_shape.layout.offset(i, j, c_shape.ld).unwrap()].to_f32() as f64;
            }
            super::act64(case.activation, v)
        })
        .collect();
    Data {
        a,
        a_scales,
        b,
        b_shape,
        b_scale,
        b_scales,
        c0,
        c_shape,
        bias,
        want,
    }
}

/// Tolerance on ‖out − ref‖/‖ref‖: f32 accumulation of exact FP8 products; the output's
/// rounding dominates.
pub fn tolerance(output: DType) -> f64 {
    match output {
        DType::Bf16 => 1e-2,
        DType::F16 => 2e-3,
        _ => 1e-3,
    }
}

/// A layer's FP8 weight: `m x k` of `block x block` blocks, each kept with probability
/// `density`, values uniform in [-1, 1), quantized to E4M3 with a scale per block.
pub fn random_e4m3_weight(
    m: usize,
    k: usize,
    block: usize,
    density: f64,
    rng: &mut StdRng,
) -> QuantizedBsr<F8E4M3> {
    let mask = BlockMask::random(m / block, k / block, density, &mut *rng).unwrap();
    let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(block, block), |_, _| {
        rng.random_range(-1.0f32..1.0)
    })
    .unwrap();
    w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap()
}

/// `x` (`features x tokens`, column-major: a row-major `tokens x features` activation)
/// quantized to E4M3 with a scale per token.
pub fn quantize_per_token(x: &[f32], features: usize, tokens: usize) -> QuantizedDense<F8E4M3> {
    QuantizedDense::<F8E4M3>::quantize(
        x,
        DenseShape::packed(features, tokens, Layout::ColMajor),
        ColumnGranularity::PerColumn,
    )
    .unwrap()
}
