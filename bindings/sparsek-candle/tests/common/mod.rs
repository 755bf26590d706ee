//! Shared by the tests: random tensors (fresh, never zero), f64 references, comparisons.
#![allow(dead_code)]

use candle_core::{DType, Device, Tensor, WithDType};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{AttentionOptions, BlockMask, BlockPatterns, CausalAlignment};

/// A generator seeded from the test's name and SPARSEK_SEED (if set), printed so a failure
/// can be replayed.
pub fn rng(test: &str) -> StdRng {
    let base: u64 = std::env::var("SPARSEK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let seed = test.bytes().fold(base, |h, b| {
        h.wrapping_mul(0x100000001b3).wrapping_add(b as u64)
    });
    eprintln!("{test}: SPARSEK_SEED={base}");
    StdRng::seed_from_u64(seed)
}

/// `n` values in ±[0.05, 1) (never zero).
pub fn values(n: usize, rng: &mut StdRng) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let m = rng.random_range(0.05f32..1.0);
            if rng.random_bool(0.5) {
                m
            } else {
                -m
            }
        })
        .collect()
}

/// A random tensor of `dims` in `dtype` on `dev`.
pub fn tensor(dims: &[usize], dtype: DType, dev: &Device, rng: &mut StdRng) -> Tensor {
    let n = dims.iter().product();
    Tensor::from_vec(values(n, rng), dims, &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to_device(dev)
        .unwrap()
}

/// A tensor's values as f64, in its logical (row-major) order.
pub fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}

/// The raw bits of a tensor's elements (for bitwise comparisons).
pub fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.flatten_all().unwrap().to_device(&Device::Cpu).unwrap();
    match t.dtype() {
        DType::F16 => t
            .to_vec1::<half::f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::BF16 => t
            .to_vec1::<half::bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::F32 => t
            .to_vec1::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        d => panic!("bits of {d:?}"),
    }
}

/// The bits of host values.
pub fn bits_of<T: WithDType>(v: &[T]) -> Vec<u64> {
    let t = Tensor::from_slice(v, v.len(), &Device::Cpu).unwrap();
    bits(&t)
}

/// The largest |got - want| relative to the largest |want|.
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            assert!(g.is_finite(), "a non-finite output: {g}");
            (g - w).abs()
        })
        .fold(0f64, f64::max)
        / scale
}

/// The tolerance of a product of `k` terms accumulated in f32 and rounded to `dtype`.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F16 => 4e-3,
        DType::BF16 => 3e-2,
        _ => 1e-1,
    }
}

/// `y = act(x·Wᵀ + b)` in f64, with `w` masked by `mask` (blocks `bm x bk`).
pub fn linear_ref(
    x: &[f64],
    w: &[f64],
    bias: Option<&[f64]>,
    (out, inn): (usize, usize),
    mask: &BlockMask,
    (bm, bk): (usize, usize),
) -> Vec<f64> {
    let batch = x.len() / inn;
    let mut y = vec![0f64; batch * out];
    for b in 0..batch {
        for o in 0..out {
            let mut acc = bias.map_or(0.0, |v| v[o]);
            for i in 0..inn {
                if mask.get(o / bm, i / bk) == Some(true) {
                    acc += x[b * inn + i] * w[o * inn + i];
                }
            }
            y[b * out + o] = acc;
        }
    }
    y
}

pub fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

/// Attention in f64 over `[batch, heads, seq, d]` values (K/V with `hk` heads), a shared
/// block mask of 128 x 128 blocks, the options' causal masking.
#[allow(clippy::too_many_arguments)]
pub fn attention_ref(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (b, h, hk, sq, sk, d): (usize, usize, usize, usize, usize, usize),
    mask: Option<&BlockMask>,
    causal: Option<CausalAlignment>,
    scale: f64,
) -> Vec<f64> {
    let mut o = vec![0f64; b * h * sq * d];
    for bi in 0..b {
        for hi in 0..h {
            let kh = hi / (h / hk);
            for i in 0..sq {
                let qrow = &q[((bi * h + hi) * sq + i) * d..][..d];
                let keep = |j: usize| {
                    mask.is_none_or(|m| m.get(i / 128, j / 128) == Some(true))
                        && causal.is_none_or(|c| c.keeps(i, j, sq, sk))
                };
                let scores: Vec<Option<f64>> = (0..sk)
                    .map(|j| {
                        keep(j).then(|| {
                            let krow = &k[((bi * hk + kh) * sk + j) * d..][..d];
                            scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>()
                        })
                    })
                    .collect();
                let max = scores
                    .iter()
                    .flatten()
                    .fold(f64::NEG_INFINITY, |m, &s| m.max(s));
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let sum: f64 = scores.iter().flatten().map(|s| (s - max).exp()).sum();
                let out = &mut o[((bi * h + hi) * sq + i) * d..][..d];
                for (j, s) in scores.iter().enumerate() {
                    if let Some(s) = s {
                        let p = (s - max).exp() / sum;
                        let vrow = &v[((bi * hk + kh) * sk + j) * d..][..d];
                        for (o, vv) in out.iter_mut().zip(vrow) {
                            *o += p * vv;
                        }
                    }
                }
            }
        }
    }
    o
}

/// A random block mask whose every row keeps its diagonal block (so causal rows keep a key).
pub fn attention_mask(q_blocks: usize, k_blocks: usize, rng: &mut StdRng) -> BlockMask {
    let keep: Vec<bool> = (0..q_blocks * k_blocks)
        .map(|_| rng.random_bool(0.6))
        .collect();
    BlockMask::from_fn(q_blocks, k_blocks, |r, c| {
        r == c || c == 0 || keep[r * k_blocks + c]
    })
    .unwrap()
}

pub fn patterns(mask: &BlockMask) -> BlockPatterns {
    BlockPatterns::from_block_masks(128, 128, std::slice::from_ref(mask)).unwrap()
}

pub fn opts(causal: Option<CausalAlignment>) -> AttentionOptions {
    match causal {
        Some(a) => AttentionOptions::new().causal(true).causal_alignment(a),
        None => AttentionOptions::new(),
    }
}
