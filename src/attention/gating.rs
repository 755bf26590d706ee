//! Top-k key-block gating: from block scores to a top-k-per-query-block mask
//! ([`BlockPatterns`], one pattern per (batch, head)).
//!
//! The contract, shared bit for bit with the device (`gpu::block_topk`, one launch; the C++
//! `sparsek::block_topk`, include/sparsek/attention.hpp):
//! - pooled scores: `s[i][j] = mean(Q block i) · mean(K block j)`, where the mean of a block
//!   is, per column, an f32 sum divided (IEEE f32 division) by its row count (only rows below
//!   `seq`): the rows in groups of 16, each group summed from 0 in ascending order, the group
//!   sums added from 0 in order (the device keeps a group's loads in flight together); the
//!   dot product is the fused multiply-add chain `acc = a[d].mul_add(b[d], acc)` from 0, `d`
//!   ascending;
//! - ranking (as [`BlockMask::topk_per_row`](crate::BlockMask::topk_per_row)): NaN counts
//!   as `-inf`, then IEEE 754's total order, higher first (`+0` above `-0`); equal keys go
//!   to the lower block;
//! - with `causal`, only key blocks `j` with `j·block_k <= (i+1)·block_q - 1 + offset` (some
//!   key not after the diagonal of the query block's last query; `offset` 0 top-left,
//!   `seq_k - seq_q` bottom-right: [`TopkOptions::causal_alignment`], as the attention's) are
//!   candidates, none when that bound is negative; row `i` keeps `min(top_k, candidates)`
//!   blocks, listed in ascending order;
//! - grouped-query attention (pooled: K with `heads_kv` heads dividing Q's): still one
//!   pattern per (batch, query head), query head `h`'s pooled Q scored against KV head
//!   `h / (heads / heads_kv)`'s pooled K; the set is recorded for `(batch, heads of Q)`.
//!
//! ```
//! use sparsek::attention::{block_topk_scores, TopkOptions};
//!
//! // 1 batch, 1 head, 2 query blocks x 3 key blocks of 128.
//! let scores = [0.5, f32::NAN, 0.5, /* row 1: */ -0.0, 0.0, 1.0];
//! let mask = block_topk_scores(&scores, 1, 1, 256, 384, &TopkOptions::new(2))?;
//! assert_eq!(mask.row(0, 0), [0, 2]); // the tie of 0.5s keeps both; NaN ranks last
//! assert_eq!(mask.row(0, 1), [1, 2]); // +0 ranks above -0
//! # Ok::<(), sparsek::Error>(())
//! ```

use super::check::check_buffer;
use super::gating_rules;
use super::heads::{Heads, HeadsShape};
use super::options::CausalAlignment;
use super::patterns::BlockPatterns;
use crate::check::rules::int;
use crate::dense::Storage;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::format::mask::select_top;
use crate::options::Backend;

/// How many key blocks each query block keeps, and the block shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopkOptions {
    top_k: usize,
    causal: bool,
    causal_alignment: CausalAlignment,
    block_q: usize,
    block_k: usize,
}

impl TopkOptions {
    /// `top_k` blocks per query block, 128×128 blocks, not causal.
    pub fn new(top_k: usize) -> Self {
        Self {
            top_k,
            causal: false,
            causal_alignment: CausalAlignment::TopLeft,
            block_q: 128,
            block_k: 128,
        }
    }
    /// Only key blocks with a key not after the diagonal of the query block's last query are
    /// candidates.
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }
    /// Where the causal diagonal sits (read only with [`causal`](Self::causal)): set it as
    /// the attention's [`AttentionOptions::causal_alignment`](crate::AttentionOptions::causal_alignment).
    pub fn causal_alignment(mut self, alignment: CausalAlignment) -> Self {
        self.causal_alignment = alignment;
        self
    }
    /// Rows per query block and keys per key block.
    pub fn blocks(mut self, block_q: usize, block_k: usize) -> Self {
        self.block_q = block_q;
        self.block_k = block_k;
        self
    }
    /// Blocks kept per query block (fewer where there are fewer candidates).
    pub fn top_k(&self) -> usize {
        self.top_k
    }
    /// Whether the candidates are causal.
    pub fn get_causal(&self) -> bool {
        self.causal
    }
    /// The causal alignment (meaningful with [`get_causal`](Self::get_causal)).
    pub fn get_causal_alignment(&self) -> CausalAlignment {
        self.causal_alignment
    }
    /// Rows per query block.
    pub fn block_q(&self) -> usize {
        self.block_q
    }
    /// Keys per key block.
    pub fn block_k(&self) -> usize {
        self.block_k
    }

    /// The causal diagonal's offset for these lengths (0 when not causal), in `i128`: the
    /// lengths are `usize`.
    fn offset(&self, seq_q: usize, seq_k: usize) -> i128 {
        match (self.causal, self.causal_alignment) {
            (true, CausalAlignment::BottomRight) => seq_k as i128 - seq_q as i128,
            _ => 0,
        }
    }

    /// Candidates of query block `i` among `k_blocks` (the blocks were checked to be ≥ 1),
    /// the diagonal at `offset`.
    fn candidates(&self, i: usize, k_blocks: usize, offset: i128) -> usize {
        if !self.causal {
            return k_blocks;
        }
        // In i128: (i + 1) * block_q < 2^128 for any usize values.
        let last_key = (i as i128 + 1) * self.block_q as i128 - 1 + offset;
        if last_key < 0 {
            return 0;
        }
        (last_key / self.block_k as i128 + 1).min(k_blocks as i128) as usize
    }
}

/// The facts the gating's rules read (`rules/gating.toml`, generated into
/// `super::gating_rules`): the dims and blocks, and for pooled scores Q and K's views, their
/// element type and where they are.
fn gating_facts(
    (batch, heads, seq_q, seq_k): (usize, usize, usize, usize),
    (block_q, block_k): (usize, usize),
    pooled: Option<(&HeadsShape, &HeadsShape, DType, bool)>,
) -> gating_rules::Facts {
    let (head_dim, k_batch, k_heads, k_head_dim, dtype, device) = match pooled {
        Some((q, k, t, device)) => (q.head_dim, k.batch, k.heads, k.head_dim, t, device),
        None => (0, 0, 0, 0, DType::F32, false),
    };
    gating_rules::Facts {
        batch: int(batch),
        heads: int(heads),
        seq_q: int(seq_q),
        seq_k: int(seq_k),
        block_q: int(block_q),
        block_k: int(block_k),
        pooled: pooled.is_some(),
        head_dim: int(head_dim),
        k_batch: int(k_batch),
        k_heads: int(k_heads),
        k_head_dim: int(k_head_dim),
        q: dtype,
        k: dtype,
        device,
        backend: Backend::Auto,
    }
}

/// Query and key blocks of the gating of these dims and the mask's rows, checked (the
/// table's dims: blocks ≥ 1, the counts and the mask's row offsets within `i32`).
fn gating_dims(
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    opts: &TopkOptions,
) -> Result<(usize, usize, usize), Error> {
    let facts = gating_facts(
        (batch, heads, seq_q, seq_k),
        (opts.block_q, opts.block_k),
        None,
    );
    gating_rules::dims(&facts)?;
    let (q_blocks, k_blocks) = (seq_q.div_ceil(opts.block_q), seq_k.div_ceil(opts.block_k));
    // The table bounds batch·heads·q_blocks below 2^31 (q_blocks ≥ 1 or the product is 0).
    let rows = batch.saturating_mul(heads).saturating_mul(q_blocks);
    Ok((q_blocks, k_blocks, rows))
}

/// The number of blocks the gating keeps for these dims (what the device allocates).
pub fn topk_nnzb(
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    opts: &TopkOptions,
) -> Result<usize, Error> {
    let (q_blocks, k_blocks, _) = gating_dims(batch, heads, seq_q, seq_k, opts)?;
    // The table bounds batch * heads by u64::MAX (usize on 64-bit targets; saturating elsewhere).
    let patterns = batch.saturating_mul(heads);
    if patterns == 0 {
        return Ok(0);
    }
    kept_per_pattern(opts, q_blocks, k_blocks, opts.offset(seq_q, seq_k))
        .checked_mul(patterns as u128)
        .filter(|&n| n <= i32::MAX as u128)
        .map(|n| n as usize)
        .ok_or(Error::InvalidArgument(
            "gating: the kept blocks do not fit i32".into(),
        ))
}

/// `Σ_{i < q_blocks} min(top_k, candidates(i))`, in closed form (no loop over the query
/// blocks, which may number 2^31); the diagonal at `offset` (within `[-seq_q, seq_k]`).
fn kept_per_pattern(opts: &TopkOptions, q_blocks: usize, k_blocks: usize, offset: i128) -> u128 {
    let kb = k_blocks as u128;
    let t = (opts.top_k as u128).min(kb);
    if !opts.causal || t == 0 {
        return q_blocks as u128 * t;
    }
    // Causal: rows before s (the first with (s+1)·bq - 1 + offset >= 0) have no candidate.
    // From s on, row s + u has candidates min(kb, f(u)), f(u) = (bq·u + c) / bk + 1 with
    // c = (s+1)·bq - 1 + offset >= 0, non-decreasing; min(t, candidates) = min(t, f(u))
    // since t <= kb, and f(u) >= t once bq·u + c >= (t-1)·bk.
    let (bq, bk) = (opts.block_q as i128, opts.block_k as i128);
    let s = if offset >= 0 {
        0
    } else {
        (1 - offset + bq - 1) / bq - 1
    };
    if s >= q_blocks as i128 {
        return 0;
    }
    let n = (q_blocks as i128 - s) as u128;
    let c = (s + 1) * bq - 1 + offset;
    let need = (t as i128 - 1) * bk;
    let below = if need > c {
        ((need - c + bq - 1) / bq) as u128
    } else {
        0
    }
    .min(n);
    // Σ_{u < below} f(u) = below + Σ_{u < below} floor((bq·u + c) / bk).
    below + floor_sum(below, bk as u128, bq as u128, c as u128) + (n - below) * t
}

/// `Σ_{i < n} floor((a·i + b) / m)` for `m >= 1` (the Euclidean-like reduction).
fn floor_sum(mut n: u128, mut m: u128, mut a: u128, mut b: u128) -> u128 {
    let mut sum = 0u128;
    loop {
        if n == 0 {
            return sum;
        }
        if a >= m {
            sum += n * (n - 1) / 2 * (a / m);
            a %= m;
        }
        if b >= m {
            sum += n * (b / m);
            b %= m;
        }
        let y = a * n + b;
        if y < m {
            return sum;
        }
        n = y / m;
        b = y % m;
        std::mem::swap(&mut m, &mut a);
    }
}

/// Rows per group of the pooled sums (the device's too: cpp/attention/gating.cu).
const POOL_GROUP: usize = 16;

/// The per-column means of the blocks of one head, `[blocks, head_dim]` (a fallible
/// allocation: a broadcast view, stride 0, may address far fewer elements than it pools).
fn pool<T: Element>(
    data: &[T],
    s: &HeadsShape,
    b: usize,
    h: usize,
    block: usize,
) -> Result<Vec<f32>, Error> {
    let d = s.head_dim;
    let blocks = s.seq.div_ceil(block);
    let len = blocks.checked_mul(d).ok_or(Error::InvalidArgument(
        "gating: blocks * head_dim overflows".into(),
    ))?;
    let mut out = crate::format::try_vec("pooled block means", len)?;
    out.resize(len, 0f32);
    for j in 0..blocks {
        let rows = (j * block..((j + 1) * block).min(s.seq)).len();
        for c in 0..d {
            let (mut total, end) = (0f32, j * block + rows);
            for g in (j * block..end).step_by(POOL_GROUP) {
                let part = (g..(g + POOL_GROUP).min(end))
                    .fold(0f32, |acc, r| acc + data[s.offset(b, h, r, c)].to_f32());
                total += part;
            }
            out[j * d + c] = total / rows as f32;
        }
    }
    Ok(out)
}

/// Q and K of a pooled gating: the table's inputs (K's batch and head_dim Q's, K's heads
/// dividing Q's, head_dim ≥ 1), their buffers hold their views, then the table's element
/// types (`device`: the operands are on the device). The one check of the pooled gating's
/// inputs, host and device.
pub(crate) fn check_gating_inputs(
    (q, q_len): (&HeadsShape, usize),
    (k, k_len): (&HeadsShape, usize),
    dtype: DType,
    device: bool,
) -> Result<(), Error> {
    let facts = gating_facts(
        (q.batch, q.heads, q.seq, k.seq),
        (1, 1),
        Some((q, k, dtype, device)),
    );
    gating_rules::inputs(&facts)?;
    check_buffer("Q", q, q_len)?;
    check_buffer("K", k, k_len)?;
    gating_rules::types(&facts)
}

/// Pooled block scores of host Q and K, `[batch, heads, q_blocks, k_blocks]` packed (heads:
/// Q's; query head `h` against KV head `h / (heads of Q / heads of K)`).
pub fn pooled_scores<T: Element>(
    q: &Heads<'_, T>,
    k: &Heads<'_, T>,
    block_q: usize,
    block_k: usize,
) -> Result<Vec<f32>, Error> {
    let (qd, kd) = match (&q.data, &k.data) {
        (Storage::Host(qd), Storage::Host(kd)) => (*qd, *kd),
        #[cfg(feature = "cuda")]
        _ => {
            return Err(Error::MixedLocations(
                "pooled_scores takes host Q and K (gpu::block_topk: device)",
            ))
        }
    };
    let (qs, ks) = (q.shape, k.shape);
    check_gating_inputs((&qs, qd.len()), (&ks, kd.len()), T::DTYPE, false)?;
    let opts = TopkOptions::new(0).blocks(block_q, block_k);
    let (q_blocks, k_blocks, rows) = gating_dims(qs.batch, qs.heads, qs.seq, ks.seq, &opts)?;
    let len = rows.checked_mul(k_blocks).ok_or(Error::InvalidArgument(
        "gating: the score matrix overflows".into(),
    ))?;
    let mut scores = crate::format::try_vec("block scores", len)?;
    if len == 0 {
        // No query or no key block: nothing to pool (batch·heads may be huge).
        return Ok(scores);
    }
    let d = qs.head_dim;
    // K's heads divide Q's (checked; not 0: there is a query block, so Q has a head).
    let group = qs.heads / ks.heads.max(1);
    for b in 0..qs.batch {
        for h in 0..qs.heads {
            let (pq, pk) = (
                pool(qd, &qs, b, h, block_q)?,
                pool(kd, &ks, b, h / group, block_k)?,
            );
            for i in 0..q_blocks {
                for j in 0..k_blocks {
                    let (a, c) = (&pq[i * d..(i + 1) * d], &pk[j * d..(j + 1) * d]);
                    scores.push(a.iter().zip(c).fold(0f32, |acc, (x, y)| x.mul_add(*y, acc)));
                }
            }
        }
    }
    Ok(scores)
}

/// The top-k mask of given scores (`[batch, heads, q_blocks, k_blocks]` packed).
pub fn block_topk_scores(
    scores: &[f32],
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    opts: &TopkOptions,
) -> Result<BlockPatterns, Error> {
    let (q_blocks, k_blocks, rows) = gating_dims(batch, heads, seq_q, seq_k, opts)?;
    let needed = rows.checked_mul(k_blocks).ok_or(Error::InvalidArgument(
        "gating: the score matrix overflows".into(),
    ))?;
    if scores.len() != needed {
        return Err(Error::ShapeMismatch {
            what: "length of scores (batch * heads * q_blocks * k_blocks)",
            expected: needed,
            got: scores.len(),
        });
    }
    let nnzb = topk_nnzb(batch, heads, seq_q, seq_k, opts)?;
    let mut row_ptr = crate::format::try_vec("row_ptr", rows + 1)?;
    let mut col_idx = crate::format::try_vec("col_idx", nnzb)?;
    row_ptr.push(0i32);
    // k_blocks <= scores.len() unless there are no rows.
    let mut keep = vec![false; if rows == 0 { 0 } else { k_blocks }];
    let mut order = Vec::new();
    let offset = opts.offset(seq_q, seq_k);
    for r in 0..rows {
        let cand = opts.candidates(r % q_blocks.max(1), k_blocks, offset);
        if opts.top_k == 0 || cand == 0 {
            // Nothing kept: no ranking (rows may number 2^31 with no key block).
            row_ptr.push(col_idx.len() as i32);
            continue;
        }
        let row = &scores[r * k_blocks..r * k_blocks + cand];
        keep.iter_mut().for_each(|x| *x = false);
        select_top(row, opts.top_k.min(cand), &mut order, &mut keep[..cand]);
        // Columns < k_blocks <= i32::MAX and at most nnzb <= i32::MAX of them (gating_dims).
        col_idx.extend(
            keep.iter()
                .enumerate()
                .filter(|(_, &k)| k)
                .map(|(j, _)| j as i32),
        );
        row_ptr.push(col_idx.len() as i32);
    }
    BlockPatterns::from_parts(
        opts.block_q,
        opts.block_k,
        q_blocks,
        k_blocks,
        batch * heads,
        row_ptr,
        col_idx,
    )?
    .with_heads(batch, heads)
}

/// The top-k mask of host Q and K's pooled scores ([`pooled_scores`]).
pub fn block_topk_pooled<T: Element>(
    q: &Heads<'_, T>,
    k: &Heads<'_, T>,
    opts: &TopkOptions,
) -> Result<BlockPatterns, Error> {
    let scores = pooled_scores(q, k, opts.block_q, opts.block_k)?;
    let (qs, ks) = (q.shape, k.shape);
    block_topk_scores(&scores, qs.batch, qs.heads, qs.seq, ks.seq, opts)
}
