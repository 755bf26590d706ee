//! Shared by the integration tests: random BSR problems and the f64 oracle.
#![allow(dead_code)]

use rand::{rngs::StdRng, Rng};
use rayon::prelude::*;
use sparsek::{Activation, BlockMask, BlockShape, BsrMatrix, DType, DenseShape, Element, Layout};

/// A fresh seed every run, printed so that a failure can be replayed (SPARSEK_SEED).
pub fn seed() -> u64 {
    let s = std::env::var("SPARSEK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {s} (SPARSEK_SEED to replay)");
    s
}

/// Tolerance on ‖out−ref‖/‖ref‖ of the GPU tests: f32 accumulation; the output's own
/// rounding dominates.
pub fn tolerance(input: DType, output: DType) -> f64 {
    match (input, output) {
        (_, DType::Bf16) | (DType::Bf16, _) => 1e-2,
        (_, DType::F16) => 2e-3,
        _ => 1e-3,
    }
}

/// ‖out − ref‖ / ‖ref‖ of values in one order (absolute error when ref is 0), and the
/// number of non-finite outputs.
pub fn rel_err_values<O: Element>(out: &[O], reference: &[f64]) -> (f64, usize) {
    let (mut num, mut den, mut bad) = (0f64, 0f64, 0usize);
    for (o, r) in out.iter().zip(reference) {
        let o = o.to_f32() as f64;
        if !o.is_finite() {
            bad += 1;
            continue;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    let err = if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    };
    (err, bad)
}

/// Which pattern a random matrix gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatternKind {
    /// Each block kept with this probability (some rows end up empty).
    Random(f64),
    /// Every block.
    Full,
    /// No block at all.
    Empty,
    /// Exactly one block.
    Single,
    /// Alternate block-rows empty and full.
    EmptyAndFullRows,
}

pub fn mask(kind: PatternKind, rows: usize, cols: usize, rng: &mut StdRng) -> BlockMask {
    match kind {
        PatternKind::Random(p) => BlockMask::random(rows, cols, p, rng).unwrap(),
        PatternKind::Full => BlockMask::from_fn(rows, cols, |_, _| true).unwrap(),
        PatternKind::Empty => BlockMask::from_fn(rows, cols, |_, _| false).unwrap(),
        PatternKind::Single => {
            let (r, c) = if rows * cols == 0 {
                (usize::MAX, usize::MAX)
            } else {
                (rng.random_range(0..rows), rng.random_range(0..cols))
            };
            BlockMask::from_fn(rows, cols, |i, j| (i, j) == (r, c)).unwrap()
        }
        PatternKind::EmptyAndFullRows => BlockMask::from_fn(rows, cols, |i, _| i % 2 == 1).unwrap(),
    }
}

/// A value in ±[0.05, 1): never zero, so every stored block has a nonzero.
pub fn nonzero<T: Element>(rng: &mut StdRng) -> T {
    let v: f32 = rng.random_range(0.05..1.0);
    T::from_f32(if rng.random_bool(0.5) { v } else { -v })
}

pub fn random_bsr<T: Element>(
    kind: PatternKind,
    block_rows: usize,
    block_cols: usize,
    block: BlockShape,
    rng: &mut StdRng,
) -> BsrMatrix<T> {
    let mask = mask(kind, block_rows, block_cols, rng);
    BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero(rng)).unwrap()
}

pub fn random_vec<T: Element>(len: usize, rng: &mut StdRng) -> Vec<T> {
    (0..len)
        .map(|_| T::from_f32(rng.random_range(-1.0..1.0)))
        .collect()
}

/// Naive `α·A·B + β·C` in f64 from the dense form of A, as an m x n row-major matrix.
/// Each element sums its products in ascending k; rows run in parallel (rayon), and the
/// zeros of A are skipped a whole row of B at a time, so a large case costs its nonzeros
/// times n, spread over the cores.
pub fn reference<T: Element, O: Element>(
    a: &BsrMatrix<T>,
    b: &[T],
    b_shape: &DenseShape,
    c_old: &[O],
    c_shape: &DenseShape,
    alpha: f32,
    beta: f32,
) -> Vec<f64> {
    let (m, k, n) = (a.m(), a.k(), b_shape.cols);
    let dense = a.to_dense().unwrap();
    let b64 = dense_f64(b, b_shape);
    let mut out = vec![0f64; m * n];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            for (kk, av) in dense[i * k..(i + 1) * k].iter().enumerate() {
                let av = av.to_f32() as f64;
                if av != 0.0 {
                    for (o, bv) in row.iter_mut().zip(&b64[kk * n..(kk + 1) * n]) {
                        *o += av * bv;
                    }
                }
            }
            for (j, o) in row.iter_mut().enumerate() {
                let mut v = alpha as f64 * *o;
                if beta != 0.0 {
                    v += beta as f64
                        * c_old[c_shape.layout.offset(i, j, c_shape.ld).unwrap()].to_f32() as f64;
                }
                *o = v;
            }
        });
    out
}

/// The view `shape` of `data` in f64, row-major (`rows x cols`), rows converted in parallel.
pub fn dense_f64<T: Element>(data: &[T], shape: &DenseShape) -> Vec<f64> {
    let (rows, cols) = (shape.rows, shape.cols);
    let mut out = vec![0f64; rows * cols];
    out.par_chunks_mut(cols.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            for (j, v) in row.iter_mut().enumerate() {
                *v = data[shape.layout.offset(i, j, shape.ld).unwrap()].to_f32() as f64;
            }
        });
    out
}

/// ‖out − ref‖ / ‖ref‖ over the m x n view of `out` (absolute error when ref is 0), and
/// the number of non-finite outputs (unwritten NaN poison shows up here).
pub fn rel_err<O: Element>(out: &[O], shape: &DenseShape, reference: &[f64]) -> (f64, usize) {
    let (m, n) = (shape.rows, shape.cols);
    let (mut num, mut den, mut bad) = (0f64, 0f64, 0usize);
    for i in 0..m {
        for j in 0..n {
            let o = out[shape.layout.offset(i, j, shape.ld).unwrap()].to_f32() as f64;
            if !o.is_finite() {
                bad += 1;
                continue;
            }
            let r = reference[i * n + j];
            num += (o - r) * (o - r);
            den += r * r;
        }
    }
    let err = if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    };
    (err, bad)
}

/// The activation in f64, written independently of `Activation::apply`.
pub fn act64(a: Activation, x: f64) -> f64 {
    match a {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(3))).tanh())
        }
        Activation::Silu => x / (1.0 + (-x).exp()),
    }
}

/// Whether every element of `out` outside C's view (the ld padding) kept its old bits.
pub fn outside_untouched<O: Element>(out: &[O], c0: &[O], shape: &DenseShape) -> bool {
    (0..out.len()).all(|i| {
        let (outer, inner) = (i / shape.ld, i % shape.ld);
        let in_view = match shape.layout {
            Layout::RowMajor => inner < shape.cols && outer < shape.rows,
            Layout::ColMajor => inner < shape.rows && outer < shape.cols,
        };
        in_view || out[i].to_f32().to_bits() == c0[i].to_f32().to_bits()
    })
}

pub fn layouts() -> [Layout; 2] {
    [Layout::RowMajor, Layout::ColMajor]
}

/// Whether the device is an sm_90 (Hopper) part, where the Hopper family runs.
#[cfg(feature = "cuda")]
pub fn is_hopper(ctx: &std::sync::Arc<cudarc::driver::CudaContext>) -> bool {
    ctx.compute_capability()
        .map(|cc| cc == (9, 0))
        .unwrap_or(false)
}

/// The GPU for a test, or `None` (the test prints SKIPPED on stderr and returns) when there is
/// none; with SPARSEK_REQUIRE_GPU set (the GPU bundle's run script) a missing GPU fails.
#[cfg(feature = "cuda")]
pub fn device(test: &str) -> Option<std::sync::Arc<cudarc::driver::CudaContext>> {
    use std::io::Write;
    match sparsek::gpu::open_device() {
        Ok(ctx) => Some(ctx),
        Err(why) => {
            if std::env::var_os("SPARSEK_REQUIRE_GPU").is_some() {
                panic!("{test}: SPARSEK_REQUIRE_GPU is set but there is no GPU: {why}");
            }
            // Straight to the stderr handle: libtest captures print!/eprint!, not this.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no GPU ({why})");
            None
        }
    }
}

/// A device buffer of `v`, at least one element (CUDA has no empty allocations).
#[cfg(feature = "cuda")]
pub fn upload<T: Element>(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    v: &[T],
) -> cudarc::driver::CudaSlice<T> {
    if v.is_empty() {
        stream.alloc_zeros::<T>(1).unwrap()
    } else {
        stream.clone_htod(v).unwrap()
    }
}

/// The host copy of a device buffer.
#[cfg(feature = "cuda")]
pub fn download<T: Element>(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    d: &cudarc::driver::CudaSlice<T>,
) -> Vec<T> {
    let v = stream.clone_dtoh(d).unwrap();
    stream.synchronize().unwrap();
    v
}

/// Naive attention in f64 of `[batch, heads, seq, d]` views (`HeadsShape` strides):
/// `(O packed [b, h, seq_q, d], LSE [b, h, seq_q])`, O = 0 and LSE = -inf for rows that keep
/// no key. Top-left causal when `causal`; see [`attention_reference_aligned`].
#[allow(clippy::too_many_arguments)]
pub fn attention_reference<T: Element>(
    q: (&[T], &sparsek::HeadsShape),
    k: (&[T], &sparsek::HeadsShape),
    v: (&[T], &sparsek::HeadsShape),
    mask: Option<&sparsek::BlockPatterns>,
    causal: bool,
    scale: f64,
) -> (Vec<f64>, Vec<f64>) {
    attention_reference_aligned(
        q,
        k,
        v,
        mask,
        causal.then_some(sparsek::CausalAlignment::TopLeft),
        scale,
    )
}

/// Naive attention in f64, written from the documented rules alone: query head `h` reads KV
/// head `h / (heads of Q / heads of K)` (grouped-query attention: K and V may have fewer
/// heads); the mask's pattern of (b, h) is `b·mask_heads + h / (heads of Q / mask_heads)`
/// (one pattern for all when the set has one); `causal = Some(alignment)` keeps key `j` for
/// query `i` when `j <= i` (top-left) or `j + seq_q <= i + seq_k` (bottom-right).
#[allow(clippy::too_many_arguments)]
pub fn attention_reference_aligned<T: Element>(
    q: (&[T], &sparsek::HeadsShape),
    k: (&[T], &sparsek::HeadsShape),
    v: (&[T], &sparsek::HeadsShape),
    mask: Option<&sparsek::BlockPatterns>,
    causal: Option<sparsek::CausalAlignment>,
    scale: f64,
) -> (Vec<f64>, Vec<f64>) {
    attention_reference_layout(q, k, v, mask, causal, scale, None)
}

/// A serving layout as the reference reads it: sequence `b` has `seqlens_k[b]` keys; paged
/// (`pages = Some((table, max_pages, page_size))`), its key `j` is row `j % page_size` of
/// K and V's batch entry `table[b·max_pages + j / page_size]`.
#[derive(Clone, Copy)]
pub struct RefLayout<'a> {
    pub seqlens_k: &'a [i32],
    pub pages: Option<(&'a [i32], usize, usize)>,
}

/// [`attention_reference_aligned`] over a serving layout: each sequence's own key count
/// (its bottom-right diagonal at `seqlens_k[b] - seq_q`) and paged K/V; the mask's columns
/// are logical key blocks.
#[allow(clippy::too_many_arguments)]
pub fn attention_reference_layout<T: Element>(
    q: (&[T], &sparsek::HeadsShape),
    k: (&[T], &sparsek::HeadsShape),
    v: (&[T], &sparsek::HeadsShape),
    mask: Option<&sparsek::BlockPatterns>,
    causal: Option<sparsek::CausalAlignment>,
    scale: f64,
    layout: Option<RefLayout<'_>>,
) -> (Vec<f64>, Vec<f64>) {
    let (qd, qs) = q;
    let (kd, ks) = k;
    let (vd, vs) = v;
    let at = |s: &sparsek::HeadsShape, b: usize, h: usize, i: usize, c: usize| {
        b * s.stride_b + h * s.stride_h + i * s.stride_s + c
    };
    let (bn, hn, sq, sk, d) = (qs.batch, qs.heads, qs.seq, ks.seq, qs.head_dim);
    let group = hn.checked_div(ks.heads).unwrap_or(1);
    assert!(
        ks.heads == 0 || hn % ks.heads == 0,
        "the reference takes dividing heads"
    );
    // Sequence b's keys, and where its key j is in K and V (batch entry, row).
    let keys_of = |b: usize| layout.map_or(sk, |l| l.seqlens_k[b] as usize);
    let key_at = |b: usize, j: usize| match layout.and_then(|l| l.pages) {
        None => (b, j),
        Some((table, max_pages, page)) => (table[b * max_pages + j / page] as usize, j % page),
    };
    let keeps = |i: usize, j: usize, sk: usize| match causal {
        None => true,
        Some(sparsek::CausalAlignment::TopLeft) => j <= i,
        Some(sparsek::CausalAlignment::BottomRight) => j + sq <= i + sk,
    };
    // One query row: its O row and LSE (rows in parallel, each summed in key order).
    let row = |r: usize| -> (Vec<f64>, f64) {
        let (b, h, i) = (r / (hn * sq), r / sq % hn, r % sq);
        let hk = h / group;
        let mut o = vec![0f64; d];
        let p = mask.map(|m| match m.heads() {
            Some((_, mh)) if m.patterns() != 1 => b * mh + h / (hn / mh),
            _ => 0,
        });
        let mut s = Vec::new();
        let sk = keys_of(b);
        for j in 0..sk {
            let listed = match (mask, p) {
                (Some(m), Some(p)) => m
                    .row(p, i / m.block_q())
                    .contains(&((j / m.block_k()) as i32)),
                _ => true,
            };
            if !listed || !keeps(i, j, sk) {
                continue;
            }
            let (kb, kj) = key_at(b, j);
            let mut dot = 0f64;
            for c in 0..d {
                dot += qd[at(qs, b, h, i, c)].to_f32() as f64
                    * kd[at(ks, kb, hk, kj, c)].to_f32() as f64;
            }
            s.push((j, dot * scale));
        }
        if s.is_empty() {
            return (o, f64::NEG_INFINITY);
        }
        let max = s.iter().fold(f64::NEG_INFINITY, |m, &(_, x)| m.max(x));
        let mut sum = 0f64;
        for &(j, x) in &s {
            let e = (x - max).exp();
            sum += e;
            let (vb, vj) = key_at(b, j);
            for (c, oc) in o.iter_mut().enumerate() {
                *oc += e * vd[at(vs, vb, hk, vj, c)].to_f32() as f64;
            }
        }
        for oc in &mut o {
            *oc /= sum;
        }
        (o, max + sum.ln())
    };
    let rows: Vec<(Vec<f64>, f64)> = (0..bn * hn * sq).into_par_iter().map(row).collect();
    let lse = rows.iter().map(|r| r.1).collect();
    let o = rows.into_iter().flat_map(|r| r.0).collect();
    (o, lse)
}

/// A random stacked block mask: each row empty with probability 1/6, full with 1/6, else
/// each block kept with probability `density`. One pattern for every head (`per_head`
/// None), or one per (batch, head) of `per_head = Some((batch, heads))`, recorded.
pub fn random_patterns(
    rng: &mut StdRng,
    per_head: Option<(usize, usize)>,
    q_blocks: usize,
    k_blocks: usize,
    block: usize,
    density: f64,
) -> sparsek::BlockPatterns {
    random_patterns_blocks(rng, per_head, q_blocks, k_blocks, (block, block), density)
}

/// [`random_patterns`] of `block_q × block_k` blocks.
pub fn random_patterns_blocks(
    rng: &mut StdRng,
    per_head: Option<(usize, usize)>,
    q_blocks: usize,
    k_blocks: usize,
    (block_q, block_k): (usize, usize),
    density: f64,
) -> sparsek::BlockPatterns {
    let patterns = per_head.map_or(1, |(b, h)| b * h);
    let masks: Vec<BlockMask> = (0..patterns)
        .map(|_| {
            let kinds: Vec<f64> = (0..q_blocks).map(|_| rng.random_range(0.0..1.0)).collect();
            let bits: Vec<bool> = (0..q_blocks * k_blocks)
                .map(|x| {
                    let u = kinds[x / k_blocks.max(1)];
                    if u < 1.0 / 6.0 {
                        false
                    } else if u < 2.0 / 6.0 {
                        true
                    } else {
                        rng.random_range(0.0..1.0) < density
                    }
                })
                .collect();
            BlockMask::new(q_blocks, k_blocks, bits).unwrap()
        })
        .collect();
    let set = sparsek::BlockPatterns::from_block_masks(block_q, block_k, &masks).unwrap();
    match per_head {
        Some((b, h)) => set.with_heads(b, h).unwrap(),
        None => set,
    }
}

/// A KV cache in pages: sequence `b`'s `lens[b]` keys in `ceil(lens[b] / page_size)` pages
/// of a pool of `num_pages` (every sequence's pages and `spare` unused ones, in a shuffled
/// order), `max_pages` table entries per sequence (its pages, then -1: never read).
#[derive(Debug, Clone)]
pub struct PagedCache {
    pub lens: Vec<i32>,
    pub table: Vec<i32>,
    pub max_pages: usize,
    pub num_pages: usize,
    pub page_size: usize,
}

impl PagedCache {
    /// A shuffled cache of these lengths; `max_pages` at least each sequence's pages.
    pub fn shuffled(
        rng: &mut StdRng,
        lens: &[usize],
        page_size: usize,
        max_pages: usize,
        spare: usize,
    ) -> Self {
        let used: usize = lens.iter().map(|n| n.div_ceil(page_size)).sum();
        let num_pages = used + spare;
        let mut order: Vec<i32> = (0..num_pages as i32).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let mut table = vec![-1i32; lens.len() * max_pages];
        let mut next = 0;
        for (b, n) in lens.iter().enumerate() {
            let pages = n.div_ceil(page_size);
            assert!(
                pages <= max_pages,
                "sequence {b}: {pages} pages, {max_pages} entries"
            );
            table[b * max_pages..b * max_pages + pages].copy_from_slice(&order[next..next + pages]);
            next += pages;
        }
        Self {
            lens: lens.iter().map(|&n| n as i32).collect(),
            table,
            max_pages,
            num_pages,
            page_size,
        }
    }

    /// The longest sequence.
    pub fn max_len(&self) -> usize {
        self.lens.iter().map(|&n| n as usize).max().unwrap_or(0)
    }

    /// The reference's view of the layout.
    pub fn reference(&self) -> RefLayout<'_> {
        RefLayout {
            seqlens_k: &self.lens,
            pages: Some((&self.table, self.max_pages, self.page_size)),
        }
    }

    /// The pool's contents gathered per sequence: `[batch, heads, seq_k, d]` packed from a
    /// packed pool `[num_pages, heads, page_size, d]` (keys past a sequence's end: 0).
    pub fn gather<T: Element>(&self, pool: &[T], heads: usize, d: usize, seq_k: usize) -> Vec<T> {
        let batch = self.lens.len();
        let mut out = vec![T::default(); batch * heads * seq_k * d];
        for b in 0..batch {
            for h in 0..heads {
                for j in 0..self.lens[b] as usize {
                    let page = self.table[b * self.max_pages + j / self.page_size] as usize;
                    let src = ((page * heads + h) * self.page_size + j % self.page_size) * d;
                    let dst = ((b * heads + h) * seq_k + j) * d;
                    out[dst..dst + d].copy_from_slice(&pool[src..src + d]);
                }
            }
        }
        out
    }
}

/// `[batch, seq, heads, d]` storage with `pad` elements after each head's row (a gap that
/// must stay untouched in O), or the packed shape when `pad` is `None`.
pub fn heads_shape(
    batch: usize,
    heads: usize,
    seq: usize,
    d: usize,
    pad: Option<usize>,
) -> sparsek::HeadsShape {
    match pad {
        Some(pad) => {
            let sh = d + pad;
            sparsek::HeadsShape {
                batch,
                heads,
                seq,
                head_dim: d,
                stride_s: heads * sh,
                stride_h: sh,
                stride_b: seq * heads * sh,
            }
        }
        None => sparsek::HeadsShape::packed(batch, heads, seq, d),
    }
}

/// FP8 weights in f64 for the oracles (`tests/mlp.rs`, the fuzz_api targets).
pub mod dequantize;

/// The FP8 products' cases (`tests/fp8.rs`, `tests/gpu_fp8.rs`).
pub mod fp8;

/// The `C = α·A·B + β·C` cases the GPU test files share (`tests/gpu_*.rs`).
#[cfg(feature = "cuda")]
pub mod gpu_spmm;

/// The serving-layout attention cases the GPU attention tests share.
#[cfg(feature = "cuda")]
pub mod gpu_layout;

/// The packed (variable-length) attention cases and their f64 reference (CPU and GPU tests).
pub mod varlen;
