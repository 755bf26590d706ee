//! Targets: the gating (pooled_scores, block_topk_scores, block_topk_pooled, topk_nnzb).

use std::fmt::Debug;
use std::time::Duration;

use rand::Rng;
use sparsek::{bf16, f16, BlockPatterns, CausalAlignment, Element};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome, ALLOC_LIMIT, I32_MAX};
use crate::inputs::{dim, huge, product, ty, Ty, CAP};
use crate::operands::{gen_block, gen_view, View};
use crate::DRIVER;

/// Which gating entry point a case calls.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gate {
    Pooled,
    TopkScores,
    TopkPooled,
    Nnzb,
}

#[derive(Debug, Clone)]
struct GateCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    ty: Ty,
    /// Q and K (the pooled calls).
    q: View,
    k: View,
    /// The problem (block_topk_scores, topk_nnzb; the pooled calls take Q's and K's).
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    top_k: usize,
    block_q: usize,
    block_k: usize,
    causal: bool,
    alignment: CausalAlignment,
    /// Length of the scores given to block_topk_scores.
    scores_len: usize,
}

fn gen_gate(rng: &mut FuzzRng, gate: Gate) -> GateCase {
    let clean = rng.random_bool(0.5);
    let p_huge = if clean { 0.0 } else { 0.08 };
    let ty = ty(rng);
    let (batch, heads) = (dim(rng, 3, p_huge), dim(rng, 3, p_huge));
    let (seq_q, seq_k) = (dim(rng, 12, p_huge), dim(rng, 12, p_huge));
    let d = if rng.random_bool(p_huge) {
        huge(rng)
    } else {
        rng.random_range(clean as usize..=6)
    };
    let (block_q, block_k) = (gen_block(rng, clean), gen_block(rng, clean));
    let kb = if block_k == 0 {
        0
    } else {
        seq_k.div_ceil(block_k)
    };
    let top_k = match rng.random_range(0..10) {
        0 if !clean => huge(rng),
        1 => 0,
        2 => kb,
        _ => rng.random_range(0..=kb.min(16) + 2),
    };
    // K's heads: Q's, or a divisor of them (grouped-query attention).
    let heads_kv = if rng.random_bool(0.4) {
        let divisors: Vec<usize> = (1..=heads.min(8)).filter(|x| heads % x == 0).collect();
        match divisors.len() {
            0 => heads,
            n => divisors[rng.random_range(0..n)],
        }
    } else {
        heads
    };
    let mut dims = [[batch, heads, seq_q, d], [batch, heads_kv, seq_k, d]];
    if !clean && rng.random_bool(0.2) {
        let (t, i) = (rng.random_range(0..2), rng.random_range(0..4));
        dims[t][i] = if rng.random_bool(0.5) {
            dims[t][i] ^ 1
        } else {
            dim(rng, 4, 0.3)
        };
    }
    let (q, k) = if matches!(gate, Gate::Pooled | Gate::TopkPooled) {
        (
            gen_view(rng, dims[0], clean, false),
            gen_view(rng, dims[1], clean, false),
        )
    } else {
        let none = View {
            batch: 0,
            heads: 0,
            seq: 0,
            d: 0,
            sb: 0,
            sh: 0,
            ss: 0,
            len: 0,
        };
        (none, none)
    };
    let needed = if block_q == 0 || block_k == 0 {
        None
    } else {
        product(&[batch, heads, seq_q.div_ceil(block_q), kb])
    };
    let scores_len = match needed {
        Some(n) if n <= CAP as u128 => match rng.random_range(0..if clean { 10 } else { 14 }) {
            10 => (n as usize).saturating_sub(1),
            11 => n as usize + 1,
            12 => rng.random_range(0..=64),
            _ => n as usize,
        },
        _ => rng.random_range(0..=64),
    };
    GateCase {
        clean,
        ty,
        q,
        k,
        batch,
        heads,
        seq_q,
        seq_k,
        top_k,
        block_q,
        block_k,
        causal: rng.random_bool(0.5),
        alignment: if rng.random_bool(0.5) {
            CausalAlignment::TopLeft
        } else {
            CausalAlignment::BottomRight
        },
        scores_len,
    }
}

/// Scores with ties, signed zeros, infinities and NaN.
fn gen_scores(rng: &mut FuzzRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.random_range(0..16) {
            0 => f32::NAN,
            1 => -f32::NAN,
            2 => f32::INFINITY,
            3 => f32::NEG_INFINITY,
            4 => 0.0,
            5 => -0.0,
            6 | 7 => 0.5,
            8 => -0.5,
            _ => rng.random_range(-2.0f32..2.0),
        })
        .collect()
}

/// Query and key blocks and the rows of the mask when the gating dims are valid: blocks at
/// least 1, `batch * heads * q_blocks < i32::MAX`, and `q_blocks`, `k_blocks` at most
/// `i32::MAX` whatever batch·heads is (as the C++ entry).
fn gating_dims(c: &GateCase, seq_q: usize, seq_k: usize) -> Option<(usize, usize, usize)> {
    if c.block_q == 0 || c.block_k == 0 {
        return None;
    }
    let (qb, kb) = (seq_q.div_ceil(c.block_q), seq_k.div_ceil(c.block_k));
    let pairs = product(&[c.batch, c.heads]).filter(|&p| p <= usize::MAX as u128)?;
    let rows = pairs.checked_mul(qb as u128)?;
    (rows < I32_MAX as u128 && qb <= I32_MAX && kb <= I32_MAX).then_some((qb, kb, rows as usize))
}

/// The causal diagonal's offset of a case: 0, or `seq_k - seq_q` bottom-right.
fn offset(c: &GateCase, seq_q: usize, seq_k: usize) -> i128 {
    match (c.causal, c.alignment) {
        (true, CausalAlignment::BottomRight) => seq_k as i128 - seq_q as i128,
        _ => 0,
    }
}

/// Candidates of query block `i` (the documented rule, counted key block by key block when
/// few): key blocks `j < k_blocks` with `j * block_k <= (i + 1) * block_q - 1 + offset`.
fn candidates(
    i: usize,
    kb: usize,
    block_q: usize,
    block_k: usize,
    causal: bool,
    off: i128,
) -> usize {
    if !causal {
        return kb;
    }
    let last = (i as i128 + 1) * block_q as i128 - 1 + off;
    if last < 0 {
        return 0;
    }
    if kb <= 4096 {
        (0..kb)
            .filter(|&j| j as i128 * block_k as i128 <= last)
            .count()
    } else {
        ((last / block_k as i128 + 1).min(kb as i128)) as usize
    }
}

/// Kept blocks of one pattern, `Σ_i min(top_k, candidates(i))`, computed without the
/// library's closed form: by key-block rank `c` (how many query blocks have at least `c`
/// candidates) when `top_k` is small, else query block by query block up to the first one
/// with `top_k` candidates (a binary search), else `None` (too long to count).
#[allow(clippy::too_many_arguments)]
fn kept_per_pattern(
    qb: usize,
    kb: usize,
    top_k: usize,
    bq: usize,
    bk: usize,
    causal: bool,
    off: i128,
) -> Option<u128> {
    let (n, t) = (qb as u128, top_k.min(kb) as u128);
    if !causal || t == 0 || n == 0 {
        return Some(n * t);
    }
    const STEPS: u128 = 200_000;
    let (bq, bk) = (bq as i128, bk as i128);
    if t <= STEPS {
        // #{i < n : candidates(i) >= c} = n - (first i with (i+1)·bq - 1 + off >= (c-1)·bk).
        let mut sum = 0u128;
        for c in 1..=t as i128 {
            let x = (c - 1) * bk + 1 - off; // (i+1)·bq >= x
            let first = if x <= bq { 0 } else { (x + bq - 1) / bq - 1 } as u128;
            sum += n - first.min(n);
        }
        return Some(sum);
    }
    let f = |i: u128| {
        let last = (i as i128 + 1) * bq - 1 + off;
        if last < 0 {
            0
        } else {
            ((last / bk + 1) as u128).min(kb as u128)
        }
    };
    let (mut lo, mut hi) = (0u128, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if f(mid) >= t {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    (lo <= STEPS).then(|| (0..lo).map(f).sum::<u128>() + (n - lo) * t)
}

/// The top-k rule of the module docs, by a sort: per row, the candidates ranked by score
/// (NaN as -inf, IEEE total order, higher first, ties to the lower block), the first
/// `min(top_k, candidates)` kept, listed ascending. `(row_ptr, col_idx)`.
fn topk_reference(
    c: &GateCase,
    scores: &[f32],
    qb: usize,
    kb: usize,
    rows: usize,
) -> (Vec<i32>, Vec<i32>) {
    let (mut row_ptr, mut col_idx) = (vec![0i32], Vec::new());
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let off = offset(c, c.seq_q, c.seq_k);
    for r in 0..rows {
        let cand = candidates(r % qb, kb, c.block_q, c.block_k, c.causal, off);
        if c.top_k.min(cand) == 0 {
            // Nothing kept (rows may number millions with no key block).
            row_ptr.push(col_idx.len() as i32);
            continue;
        }
        let row = &scores[r * kb..(r + 1) * kb];
        let mut order: Vec<usize> = (0..cand).collect();
        order.sort_by(|&a, &b| key(row[b]).total_cmp(&key(row[a])).then(a.cmp(&b)));
        let mut kept: Vec<i32> = order[..c.top_k.min(cand)]
            .iter()
            .map(|&j| j as i32)
            .collect();
        kept.sort_unstable();
        col_idx.extend(kept);
        row_ptr.push(col_idx.len() as i32);
    }
    (row_ptr, col_idx)
}

/// The pooled scores by the documented rule, bit for bit: per block and column, rows in
/// groups of 16 summed from 0, the group sums added from 0, divided by the rows; the dot
/// product a fused multiply-add chain. `[batch, heads, q_blocks, k_blocks]`, query head `h`
/// against KV head `h / (heads of Q / heads of K)`.
fn pooled_reference<T: Element>(
    (q, qd): (&View, &[T]),
    (k, kd): (&View, &[T]),
    block_q: usize,
    block_k: usize,
) -> Vec<f32> {
    let means = |v: &View, data: &[T], b: usize, h: usize, block: usize| -> Vec<Vec<f32>> {
        (0..v.seq.div_ceil(block))
            .map(|j| {
                let (start, end) = (
                    j * block,
                    j.saturating_mul(block).saturating_add(block).min(v.seq),
                );
                (0..v.d)
                    .map(|c| {
                        let mut total = 0f32;
                        let mut g = start;
                        while g < end {
                            let mut part = 0f32;
                            for r in g..(g + 16).min(end) {
                                part += data[v.offset(b, h, r, c)].to_f32();
                            }
                            total += part;
                            g += 16;
                        }
                        total / (end - start) as f32
                    })
                    .collect()
            })
            .collect()
    };
    let mut out = Vec::new();
    if q.batch == 0 || q.heads == 0 || q.seq == 0 || k.seq == 0 {
        // An empty score matrix: loop over nothing, however many (batch, head) pairs.
        return out;
    }
    let group = q.heads / k.heads.max(1);
    for b in 0..q.batch {
        for h in 0..q.heads {
            let (pq, pk) = (
                means(q, qd, b, h, block_q),
                means(k, kd, b, h / group, block_k),
            );
            for a in &pq {
                for c in &pk {
                    out.push(a.iter().zip(c).fold(0f32, |acc, (x, y)| x.mul_add(*y, acc)));
                }
            }
        }
    }
    out
}

fn bits_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// A mask the gating returned equals the reference arrays and records its problem.
fn check_gating_mask(
    c: &GateCase,
    m: &BlockPatterns,
    (qb, kb): (usize, usize),
    (row_ptr, col_idx): (&[i32], &[i32]),
) -> Result<(), String> {
    ensure!(
        (m.block_q(), m.block_k(), m.q_blocks(), m.k_blocks()) == (c.block_q, c.block_k, qb, kb),
        "mask dims {:?}",
        (m.block_q(), m.block_k(), m.q_blocks(), m.k_blocks())
    );
    ensure!(
        m.patterns() == c.batch * c.heads && m.heads() == Some((c.batch, c.heads)),
        "mask of {} patterns for {:?}",
        m.patterns(),
        m.heads()
    );
    ensure!(
        m.row_ptr() == row_ptr && m.col_idx() == col_idx,
        "mask ({:?}, {:?}), the reference ({row_ptr:?}, {col_idx:?})",
        m.row_ptr(),
        m.col_idx()
    );
    ensure!(m.nnzb() == col_idx.len(), "nnzb {}", m.nnzb());
    let opts = sparsek::TopkOptions::new(c.top_k)
        .blocks(c.block_q, c.block_k)
        .causal(c.causal)
        .causal_alignment(c.alignment);
    let n = sparsek::attention::topk_nnzb(c.batch, c.heads, c.seq_q, c.seq_k, &opts);
    ensure!(
        n.as_ref().ok() == Some(&col_idx.len()),
        "topk_nnzb gave {n:?}, the mask holds {}",
        col_idx.len()
    );
    Ok(())
}

fn run_gate<T: Element>(c: &GateCase, gate: Gate, rng: &mut FuzzRng) -> Check {
    use sparsek::attention::{block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb};
    let opts = sparsek::TopkOptions::new(c.top_k)
        .blocks(c.block_q, c.block_k)
        .causal(c.causal)
        .causal_alignment(c.alignment);
    match gate {
        Gate::Nnzb => {
            let r = topk_nnzb(c.batch, c.heads, c.seq_q, c.seq_k, &opts);
            let want = gating_dims(c, c.seq_q, c.seq_k).map(|(qb, kb, _)| {
                let pairs = (c.batch as u128) * (c.heads as u128);
                if pairs == 0 {
                    return Some(0);
                }
                let off = offset(c, c.seq_q, c.seq_k);
                kept_per_pattern(qb, kb, c.top_k, c.block_q, c.block_k, c.causal, off)
                    .map(|k| k * pairs)
            });
            match want {
                None => ensure!(r.is_err(), "topk_nnzb gave {r:?} for invalid dims"),
                Some(None) => {}
                Some(Some(n)) if n > I32_MAX as u128 => {
                    ensure!(
                        r.is_err(),
                        "topk_nnzb gave {r:?}, {n} blocks do not fit i32"
                    )
                }
                Some(Some(n)) => ensure!(
                    r.as_ref().ok() == Some(&(n as usize)),
                    "topk_nnzb gave {r:?}, the count is {n}"
                ),
            }
            Ok(if r.is_ok() {
                Outcome::Accepted
            } else {
                Outcome::Rejected
            })
        }
        Gate::TopkScores => {
            let scores = gen_scores(rng, c.scores_len);
            let r = block_topk_scores(&scores, c.batch, c.heads, c.seq_q, c.seq_k, &opts);
            let dims = gating_dims(c, c.seq_q, c.seq_k);
            // The mask's row offsets are allocated whole: beyond the guard's limit, an error.
            let valid = dims.is_some_and(|(_, kb, rows)| {
                rows as u128 * kb as u128 == scores.len() as u128 && (rows + 1) * 4 <= ALLOC_LIMIT
            });
            ensure!(
                r.is_ok() == valid,
                "block_topk_scores gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            let (Ok(m), Some((qb, kb, rows))) = (r, dims) else {
                return Ok(Outcome::Rejected);
            };
            let (row_ptr, col_idx) = topk_reference(c, &scores, qb, kb, rows);
            check_gating_mask(c, &m, (qb, kb), (&row_ptr, &col_idx))?;
            Ok(Outcome::Accepted)
        }
        Gate::Pooled | Gate::TopkPooled => {
            let qd: Vec<T> = random_values(rng, c.q.len);
            let kd: Vec<T> = random_values(rng, c.k.len);
            let (qh, kh) = (c.q.heads(&qd), c.k.heads(&kd));
            let (q, k) = (&c.q, &c.k);
            // K's heads divide Q's (0 only when Q has none).
            let divides = if k.heads == 0 {
                q.heads == 0
            } else {
                q.heads % k.heads == 0
            };
            let inputs_ok = (q.batch, q.d) == (k.batch, k.d)
                && divides
                && q.d >= 1
                && [q, k].iter().all(|v| v.fits() && v.rows_ok());
            let problem = GateCase {
                batch: q.batch,
                heads: q.heads,
                seq_q: q.seq,
                seq_k: k.seq,
                ..c.clone()
            };
            let dims = gating_dims(&problem, q.seq, k.seq);
            // The score matrix, allocated whole: beyond the guard's limit, an error.
            let fits = dims.is_some_and(|(_, kb, rows)| {
                rows as u128 * kb as u128 <= (ALLOC_LIMIT / 4) as u128
            });
            let valid = inputs_ok && fits;
            let r = if gate == Gate::Pooled {
                pooled_scores(&qh, &kh, c.block_q, c.block_k).map(Ok)
            } else {
                block_topk_pooled(&qh, &kh, &opts).map(Err)
            };
            ensure!(
                r.is_ok() == valid,
                "{gate:?} gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            let (Ok(r), Some((qb, kb, rows))) = (r, dims) else {
                return Ok(Outcome::Rejected);
            };
            let want = pooled_reference((q, &qd), (k, &kd), c.block_q, c.block_k);
            match r {
                Ok(scores) => ensure!(
                    bits_equal(&scores, &want),
                    "pooled scores {scores:?}, the reference {want:?}"
                ),
                Err(m) => {
                    let (row_ptr, col_idx) = topk_reference(&problem, &want, qb, kb, rows);
                    check_gating_mask(&problem, &m, (qb, kb), (&row_ptr, &col_idx))?;
                }
            }
            Ok(Outcome::Accepted)
        }
    }
}

fn fuzz_gate(name: &str, salt: u64, gate: Gate) {
    DRIVER.run(
        name,
        salt,
        |rng| gen_gate(rng, gate),
        |c, rng| match c.ty {
            Ty::F32 => run_gate::<f32>(c, gate, rng),
            Ty::Bf16 => run_gate::<bf16>(c, gate, rng),
            Ty::F16 => run_gate::<f16>(c, gate, rng),
        },
    );
}

/// The inputs the fuzz found hanging `pooled_scores` (and so `block_topk_pooled`): Q and K
/// as (batch, heads, seq, head_dim, strides, buffer length).
fn pooled_hang_inputs() -> [(View, View); 2] {
    let view = |batch, heads, seq, (sb, sh, ss), len| View {
        batch,
        heads,
        seq,
        d: 1,
        sb,
        sh,
        ss,
        len,
    };
    [
        // No head: an empty score matrix, and a loop over usize::MAX batches.
        (
            view(usize::MAX, 0, 1, (1, 1, 1), 0),
            view(usize::MAX, 0, 1, (1, 1, 1), 0),
        ),
        // No query: 2^40 broadcast heads (stride 0, one element), pooled one by one.
        (
            view(1, 1 << 40, 0, (0, 0, 1), 0),
            view(1, 1 << 40, 1, (0, 0, 1), 1),
        ),
    ]
}

/// Each hang input returns (Ok and empty) within a second.
fn check_pooled_hang_inputs(gate: Gate) {
    for (q, k) in pooled_hang_inputs() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (qd, kd) = (vec![0.5f32; q.len], vec![0.5f32; k.len]);
            let (qh, kh) = (q.heads(&qd), k.heads(&kd));
            let r = match gate {
                Gate::Pooled => sparsek::attention::pooled_scores(&qh, &kh, 1, 1)
                    .map(|s| s.len())
                    .map_err(|e| e.to_string()),
                _ => sparsek::attention::block_topk_pooled(
                    &qh,
                    &kh,
                    &sparsek::TopkOptions::new(1).blocks(1, 1),
                )
                .map(|m| m.nnzb())
                .map_err(|e| e.to_string()),
            };
            let _ = tx.send(r);
        });
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(r) => assert_eq!(r, Ok(0), "{gate:?} of Q {q:?}, K {k:?}"),
            Err(_) => panic!("{gate:?} of Q {q:?}, K {k:?}: no answer within 1 s (a hang)"),
        }
    }
}

// `pooled_scores` (src/attention/gating.rs) must return at once when the score matrix is
// empty (no head, no query block or no key block), not loop over every (batch, head) pair
// pooling Q and K: `batch = usize::MAX, heads = 0` would never return in a debug build
// (release drops the empty loop), 2^40 broadcast heads (stride_h = 0) with `seq_q = 0` in
// neither (`pooled_hang_inputs`). The fuzz draws such problems too; its watchdog aborts the
// process on a hang.
#[test]
fn fuzz_pooled_scores() {
    check_pooled_hang_inputs(Gate::Pooled);
    fuzz_gate("pooled_scores", 2, Gate::Pooled);
}

#[test]
fn fuzz_block_topk_scores() {
    fuzz_gate("block_topk_scores", 3, Gate::TopkScores);
}

// `block_topk_pooled` runs `pooled_scores` first: the same inputs (see fuzz_pooled_scores).
#[test]
fn fuzz_block_topk_pooled() {
    check_pooled_hang_inputs(Gate::TopkPooled);
    fuzz_gate("block_topk_pooled", 4, Gate::TopkPooled);
}

#[test]
fn fuzz_topk_nnzb() {
    fuzz_gate("topk_nnzb", 5, Gate::Nnzb);
}
