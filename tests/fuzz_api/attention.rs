//! Target: attention / attention_into.

use std::fmt::Debug;

use rand::Rng;
use sparsek::{
    attention, attention_into, bf16, f16, AttentionOptions, BlockMask, BlockPatterns,
    CausalAlignment, Element, LseMut, MaskOperand,
};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome, ALLOC_LIMIT};
use crate::inputs::{dim, huge, product, rel_err, same_bits, tolerance, ty, Ty, CAP, SENTINEL};
use crate::operands::{gen_block, gen_view, View};
use crate::DRIVER;

/// A mask: per pattern, `q_blocks x k_blocks` bits, row-major.
#[derive(Debug, Clone)]
struct MaskSpec {
    block_q: usize,
    block_k: usize,
    q_blocks: usize,
    k_blocks: usize,
    bits: Vec<Vec<bool>>,
    /// `with_heads(batch, heads)`, if called.
    with_heads: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
enum AttnCall {
    /// `attention_into`, with an LSE of this length if any.
    Into { lse: Option<usize> },
    /// `attention` (allocating O and LSE).
    Alloc,
}

#[derive(Debug, Clone)]
struct AttnCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    ty: Ty,
    q: View,
    k: View,
    v: View,
    o: View,
    call: AttnCall,
    mask: Option<MaskSpec>,
    causal: bool,
    alignment: CausalAlignment,
    scale: Option<f32>,
}

/// A mask for Q's `heads` and K's `heads_kv`: per-head sets are made for either.
fn gen_mask_spec(
    rng: &mut FuzzRng,
    batch: usize,
    (heads, heads_kv): (usize, usize),
    seq_q: usize,
    seq_k: usize,
    clean: bool,
) -> MaskSpec {
    let (block_q, block_k) = (gen_block(rng, clean), gen_block(rng, clean));
    let blocks = |seq: usize, block: usize| if block == 0 { 1 } else { seq.div_ceil(block) };
    let (mut q_blocks, mut k_blocks) = (blocks(seq_q, block_q), blocks(seq_k, block_k));
    match rng.random_range(if clean { 4 } else { 0 }..12) {
        0 => q_blocks = q_blocks.saturating_add(1),
        1 => q_blocks = q_blocks.saturating_sub(1),
        2 => k_blocks = k_blocks.saturating_add(1),
        3 => k_blocks = k_blocks.saturating_sub(1),
        _ => {}
    }
    // A grid larger than the fuzz materializes: a small wrong one instead.
    if q_blocks > 64 || k_blocks > 64 {
        q_blocks = rng.random_range(0..=4);
        k_blocks = rng.random_range(0..=4);
    }
    // Per query head, or per KV head (a pattern the group shares).
    let heads = if rng.random_bool(0.5) {
        heads_kv
    } else {
        heads
    };
    let pairs = batch.saturating_mul(heads);
    let per_head = rng.random_bool(0.4) && pairs <= 16;
    let count = match rng.random_range(0..12) {
        0 if !clean => rng.random_range(0..=4),
        _ if per_head && (pairs > 0 || !clean) => pairs,
        _ => 1,
    };
    let p: f64 = [0.0, 0.3, 0.7, 1.0][rng.random_range(0..4)];
    let bits = (0..count)
        .map(|_| {
            (0..q_blocks * k_blocks)
                .map(|_| rng.random_bool(p))
                .collect()
        })
        .collect();
    let with_heads = match rng.random_range(0..10) {
        0 if !clean => None,
        1 if !clean => Some((dim(rng, 3, 0.2), dim(rng, 3, 0.2))),
        2 if !clean => Some((heads, batch)),
        _ if count > 1 || rng.random_bool(0.3) => Some((batch, heads)),
        _ => None,
    };
    MaskSpec {
        block_q,
        block_k,
        q_blocks,
        k_blocks,
        bits,
        with_heads,
    }
}

fn gen_attention(rng: &mut FuzzRng) -> AttnCase {
    let ty = ty(rng);
    // Half the cases clean (valid but for chance), half with defects.
    let clean = rng.random_bool(0.5);
    let p_huge = if clean { 0.0 } else { 0.06 };
    let batch = dim(rng, 3, p_huge);
    let heads = dim(rng, 3, p_huge);
    // K and V's heads: Q's, or (grouped-query attention) a divisor of them, or (unless clean)
    // any count.
    let heads_kv = match rng.random_range(0..10) {
        0..=4 => heads,
        5..=7 => {
            let divisors: Vec<usize> = (1..=heads.min(8)).filter(|x| heads % x == 0).collect();
            match divisors.len() {
                0 => heads,
                n => divisors[rng.random_range(0..n)],
            }
        }
        _ if clean => heads,
        _ => dim(rng, 4, p_huge),
    };
    let seq_q = dim(rng, 10, p_huge);
    let seq_k = dim(rng, 10, p_huge);
    let d = if rng.random_bool(p_huge) {
        huge(rng)
    } else {
        rng.random_range(clean as usize..=8)
    };
    let mut dims = [
        [batch, heads, seq_q, d],
        [batch, heads_kv, seq_k, d],
        [batch, heads_kv, seq_k, d],
        [batch, heads, seq_q, d],
    ];
    // Mismatched dims: one dim of one of K, V, O.
    if !clean && rng.random_bool(0.2) {
        let (t, i) = (rng.random_range(0..4), rng.random_range(0..4));
        dims[t][i] = if rng.random_bool(0.5) {
            dims[t][i] ^ 1
        } else {
            dim(rng, 4, 0.3)
        };
    }
    let views: Vec<View> = (0..4)
        .map(|t| gen_view(rng, dims[t], clean, t == 3))
        .collect();
    let call = if rng.random_bool(0.2) {
        AttnCall::Alloc
    } else {
        let needed = batch.saturating_mul(heads).saturating_mul(seq_q);
        AttnCall::Into {
            lse: match rng.random_range(0..10) {
                0..=2 => None,
                3 if !clean => Some(needed.saturating_sub(1).min(CAP)),
                4 => Some((needed.min(CAP) + rng.random_range(1..=3)).min(CAP)),
                _ => Some(needed.min(CAP)),
            },
        }
    };
    let mask = rng
        .random_bool(0.5)
        .then(|| gen_mask_spec(rng, batch, (heads, heads_kv), seq_q, seq_k, clean));
    let scale = match rng.random_range(if clean { 5 } else { 0 }..20) {
        0 => Some(0.0),
        1 => Some(-0.5),
        2 => Some(f32::NAN),
        3 => Some(f32::INFINITY),
        4 => Some(-0.0),
        5 => Some(1e-30),
        6 => Some(f32::MIN_POSITIVE),
        7..=10 => Some(rng.random_range(0.05f32..4.0)),
        _ => None,
    };
    AttnCase {
        clean,
        ty,
        q: views[0],
        k: views[1],
        v: views[2],
        o: views[3],
        call,
        mask,
        causal: rng.random_bool(0.5),
        alignment: if rng.random_bool(0.5) {
            CausalAlignment::TopLeft
        } else {
            CausalAlignment::BottomRight
        },
        scale,
    }
}

/// Whether attention must accept (given the mask was built), from the documented rules.
fn attention_valid(c: &AttnCase, o: &View, lse: Option<usize>, mask: Option<&MaskSpec>) -> bool {
    let (q, k, v) = (&c.q, &c.k, &c.v);
    let same = |a: &View, b: &View| (a.batch, a.d) == (b.batch, b.d);
    if !(same(q, k) && same(q, v) && same(q, o) && k.seq == v.seq && q.seq == o.seq) {
        return false;
    }
    // O has Q's heads; V has K's, which divide Q's (0 only when Q has none).
    if o.heads != q.heads || v.heads != k.heads {
        return false;
    }
    let divides = if k.heads == 0 {
        q.heads == 0
    } else {
        q.heads % k.heads == 0
    };
    if !divides {
        return false;
    }
    if q.d == 0 {
        return false;
    }
    if ![q, k, v, o].iter().all(|x| x.fits() && x.rows_ok()) {
        return false;
    }
    if !o.disjoint_rule() {
        return false;
    }
    let w = |x: usize| x as u128;
    let max = usize::MAX as u128;
    if let Some(len) = lse {
        let needed = product(&[q.batch, q.heads, q.seq]).unwrap_or(u128::MAX);
        if needed > max || w(len) < needed {
            return false;
        }
    }
    let scale = c.scale.unwrap_or(1.0 / (q.d as f32).sqrt());
    if !(scale.is_finite() && scale > 0.0) {
        return false;
    }
    // The element count, multiplied in order, must fit usize.
    let bh = w(q.batch) * w(q.heads);
    if bh > max
        || bh * w(q.seq) > max
        || (bh * w(q.seq)).checked_mul(w(q.d)).is_none_or(|e| e > max)
    {
        return false;
    }
    if let Some(m) = mask {
        if m.q_blocks != q.seq.div_ceil(m.block_q) || m.k_blocks != k.seq.div_ceil(m.block_k) {
            return false;
        }
        // One pattern, or batch * heads of them made for (Q's batch, Q's or K's heads).
        let count = m.bits.len();
        if count != 1 {
            match m.with_heads {
                Some((b, h)) if b == q.batch && (h == q.heads || h == k.heads) => {
                    if b.checked_mul(h) != Some(count) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }
    true
}

/// The naive f64 attention: per (b, h, i), a softmax over the kept keys of KV head
/// `h / (heads of Q / heads of K)`, the mask's pattern `b·mask_heads + h / (heads of Q /
/// mask_heads)`, the causal diagonal where the alignment puts it. `(O packed, LSE)`.
fn attention_reference<T: Element>(
    c: &AttnCase,
    (qd, kd, vd): (&[T], &[T], &[T]),
    mask: Option<&MaskSpec>,
    scale: f32,
) -> (Vec<f64>, Vec<f64>) {
    let (q, k, v) = (&c.q, &c.k, &c.v);
    let (batch, heads, sq, sk, d) = (q.batch, q.heads, q.seq, k.seq, q.d);
    let mut o = vec![0f64; batch * heads * sq * d];
    let mut lse = vec![f64::NEG_INFINITY; batch * heads * sq];
    if o.is_empty() {
        // Nothing to compute: loop over nothing, however long the other dims.
        return (o, lse);
    }
    let x = |data: &[T], at: usize| data[at].to_f32() as f64;
    let group = heads / k.heads.max(1);
    for b in 0..batch {
        for h in 0..heads {
            let hk = h / group;
            let pattern = mask.map_or(0, |m| match m.with_heads {
                Some((_, mh)) if m.bits.len() != 1 && mh > 0 => b * mh + h / (heads / mh),
                _ => 0,
            });
            let bits = mask.map(|m| &m.bits[pattern]);
            for i in 0..sq {
                let on_diagonal = |j: usize| match c.alignment {
                    CausalAlignment::TopLeft => j <= i,
                    CausalAlignment::BottomRight => j + sq <= i + sk,
                };
                let kept = |j: usize| {
                    let in_mask = match (mask, bits) {
                        (Some(m), Some(bits)) => bits[(i / m.block_q) * m.k_blocks + j / m.block_k],
                        _ => true,
                    };
                    in_mask && (!c.causal || on_diagonal(j))
                };
                let scores: Vec<(usize, f64)> = (0..sk)
                    .filter(|&j| kept(j))
                    .map(|j| {
                        let dot: f64 = (0..d)
                            .map(|t| x(qd, q.offset(b, h, i, t)) * x(kd, k.offset(b, hk, j, t)))
                            .sum();
                        (j, dot * scale as f64)
                    })
                    .collect();
                if scores.is_empty() {
                    continue;
                }
                let max = scores.iter().fold(f64::NEG_INFINITY, |m, s| m.max(s.1));
                let sum: f64 = scores.iter().map(|s| (s.1 - max).exp()).sum();
                let row = ((b * heads + h) * sq + i) * d;
                for &(j, s) in &scores {
                    let p = (s - max).exp() / sum;
                    for t in 0..d {
                        o[row + t] += p * x(vd, v.offset(b, hk, j, t));
                    }
                }
                lse[(b * heads + h) * sq + i] = max + sum.ln();
            }
        }
    }
    (o, lse)
}

/// LSE sentinel: no LSE of inputs in [-1, 1] comes near it.
const LSE_SENTINEL: f32 = -1.0e30;

fn check_lse(got: &[f32], want: &[f64]) -> Result<(), String> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w == f64::NEG_INFINITY {
            ensure!(
                g == f32::NEG_INFINITY,
                "LSE[{i}] = {g}, a row with no key: -inf"
            );
        } else {
            ensure!(
                (g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
                "LSE[{i}] = {g}, the reference {w}"
            );
        }
    }
    Ok(())
}

fn run_attention<T: Element>(c: &AttnCase, rng: &mut FuzzRng) -> Check {
    let q: Vec<T> = random_values(rng, c.q.len);
    let k: Vec<T> = random_values(rng, c.k.len);
    let v: Vec<T> = random_values(rng, c.v.len);
    // The mask, built as the caller would; a refusal here is checked against its rule.
    let mut mask_spec = c.mask.clone();
    if let Some(m) = mask_spec.as_mut().filter(|m| m.bits.is_empty()) {
        // No mask to take the grid from: the set is 0 x 0 blocks.
        (m.q_blocks, m.k_blocks) = (0, 0);
    }
    let patterns = match &c.mask {
        None => None,
        Some(m) => {
            let masks: Vec<BlockMask> = m
                .bits
                .iter()
                .map(|b| BlockMask::new(m.q_blocks, m.k_blocks, b.clone()).expect("a small mask"))
                .collect();
            let built = BlockPatterns::from_block_masks(m.block_q, m.block_k, &masks);
            ensure!(
                built.is_ok() == (m.block_q >= 1 && m.block_k >= 1),
                "from_block_masks with blocks {} x {} gave {:?}",
                m.block_q,
                m.block_k,
                built.as_ref().err()
            );
            let Ok(p) = built else {
                return Ok(Outcome::Rejected);
            };
            let p = match m.with_heads {
                None => p,
                Some((b, h)) => {
                    let r = p.with_heads(b, h);
                    let want = b.checked_mul(h) == Some(m.bits.len());
                    ensure!(
                        r.is_ok() == want,
                        "with_heads({b}, {h}) of {} patterns gave {:?}",
                        m.bits.len(),
                        r.as_ref().err()
                    );
                    match r {
                        Ok(p) => p,
                        Err(_) => {
                            // Not recorded: attention sees the set without (batch, heads).
                            mask_spec.as_mut().expect("a mask").with_heads = None;
                            BlockPatterns::from_block_masks(m.block_q, m.block_k, &masks)
                                .expect("built once")
                        }
                    }
                }
            };
            Some(p)
        }
    };
    let opts = {
        let o = AttentionOptions::new()
            .causal(c.causal)
            .causal_alignment(c.alignment);
        match c.scale {
            Some(s) => o.scale(s),
            None => o,
        }
    };
    let scale = c.scale.unwrap_or(1.0 / (c.q.d as f32).sqrt());
    match c.call {
        AttnCall::Into { lse: lse_len } => {
            let sentinel = T::from_f32(SENTINEL);
            let mut o = vec![sentinel; c.o.len];
            let mut lse = vec![LSE_SENTINEL; lse_len.unwrap_or(0)];
            let r = attention_into(
                c.q.heads(&q),
                c.k.heads(&k),
                c.v.heads(&v),
                c.o.heads_mut(&mut o),
                lse_len.map(|_| LseMut::Host(&mut lse)),
                patterns.as_ref().map(MaskOperand::Host),
                &opts,
            );
            let valid = attention_valid(c, &c.o, lse_len, mask_spec.as_ref());
            ensure!(
                r.is_ok() == valid,
                "attention_into gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            if r.is_err() {
                ensure!(
                    o.iter().all(|&x| same_bits(x, sentinel)),
                    "O written by a call that failed ({:?})",
                    r.err()
                );
                ensure!(
                    lse.iter().all(|&x| x.to_bits() == LSE_SENTINEL.to_bits()),
                    "LSE written by a call that failed"
                );
                return Ok(Outcome::Rejected);
            }
            // Every addressed element once (the rule above implies it).
            let offsets =
                c.o.offsets()
                    .ok_or("an accepted O with too many elements")?;
            let mut sorted = offsets.clone();
            sorted.sort_unstable();
            ensure!(
                sorted.windows(2).all(|w| w[0] != w[1]),
                "an accepted O addresses an element twice"
            );
            let (want_o, want_lse) =
                attention_reference(c, (&q, &k, &v), mask_spec.as_ref(), scale);
            let mut addressed = vec![false; o.len()];
            let mut pairs = Vec::with_capacity(offsets.len());
            for (&off, &w) in offsets.iter().zip(&want_o) {
                addressed[off] = true;
                ensure!(
                    !same_bits(o[off], sentinel),
                    "O[{off}] addressed but not written"
                );
                pairs.push((o[off].to_f32() as f64, w));
            }
            for (i, &x) in o.iter().enumerate() {
                ensure!(
                    addressed[i] || same_bits(x, sentinel),
                    "O[{i}] outside the view written"
                );
            }
            let err = rel_err(&pairs, 0.1);
            ensure!(
                err <= tolerance(c.ty),
                "O off the reference by {err:e} (tolerance {:e})",
                tolerance(c.ty)
            );
            if lse_len.is_some() {
                let n = want_lse.len();
                check_lse(&lse[..n], &want_lse)?;
                ensure!(
                    lse[n..]
                        .iter()
                        .all(|&x| x.to_bits() == LSE_SENTINEL.to_bits()),
                    "LSE past batch * heads * seq_q written"
                );
            }
            Ok(Outcome::Accepted)
        }
        AttnCall::Alloc => {
            let r = attention(
                c.q.heads(&q),
                c.k.heads(&k),
                c.v.heads(&v),
                patterns.as_ref(),
                &opts,
            );
            // O is packed [batch, heads, seq_q, head_dim] of Q's dims.
            let qv = &c.q;
            let packed = View {
                sb: qv.heads.saturating_mul(qv.seq.saturating_mul(qv.d)),
                sh: qv.seq.saturating_mul(qv.d),
                ss: qv.d,
                ..*qv
            };
            let elements = packed.needed().unwrap_or(u128::MAX);
            let lse_len = product(&[qv.batch, qv.heads, qv.seq]).unwrap_or(u128::MAX);
            let fits = elements <= usize::MAX as u128 && lse_len <= usize::MAX as u128;
            // Outputs beyond the guard's limit are refused (an allocation error).
            let small = elements <= (ALLOC_LIMIT / std::mem::size_of::<T>()) as u128
                && lse_len <= (ALLOC_LIMIT / 4) as u128;
            let mut o_view = packed;
            o_view.len = packed.needed_usize();
            let valid = fits
                && small
                && attention_valid(c, &o_view, Some(lse_len as usize), mask_spec.as_ref());
            ensure!(
                r.is_ok() == valid,
                "attention gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            let Ok((o, lse)) = r else {
                return Ok(Outcome::Rejected);
            };
            let (want_o, want_lse) =
                attention_reference(c, (&q, &k, &v), mask_spec.as_ref(), scale);
            ensure!(
                o.len() == want_o.len() && lse.len() == want_lse.len(),
                "attention returned {} and {} values, {} and {} expected",
                o.len(),
                lse.len(),
                want_o.len(),
                want_lse.len()
            );
            let pairs: Vec<(f64, f64)> = o
                .iter()
                .zip(&want_o)
                .map(|(x, &w)| (x.to_f32() as f64, w))
                .collect();
            let err = rel_err(&pairs, 0.1);
            ensure!(
                err <= tolerance(c.ty),
                "O off the reference by {err:e} (tolerance {:e})",
                tolerance(c.ty)
            );
            check_lse(&lse, &want_lse)?;
            Ok(Outcome::Accepted)
        }
    }
}

#[test]
fn fuzz_attention() {
    DRIVER.run("attention", 1, gen_attention, |c, rng| match c.ty {
        Ty::F32 => run_attention::<f32>(c, rng),
        Ty::Bf16 => run_attention::<bf16>(c, rng),
        Ty::F16 => run_attention::<f16>(c, rng),
    });
}
