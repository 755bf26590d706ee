//! Packed (variable-length) attention cases the CPU and GPU tests share (tests/attention.rs,
//! tests/gpu_attention.rs): Q and O, K and V, or both packed along seq by cumulative
//! sequence lengths (`SequenceLayout::cu_seqlens_q` / `cu_seqlens_k`), the other side padded;
//! packed views plain (`[1, heads, total, d]`) or fused (`[total, heads, d]` rows with 8
//! elements of padding after each head); an f64 reference written from the documented rules
//! alone; O poisoned with NaN inside its view and a sentinel everywhere else (64 rows past the
//! view, the fused gaps), so every element of every sequence must be written and nothing else.

use rand::{rngs::StdRng, Rng};
use rayon::prelude::*;
use sparsek::{BlockPatterns, CausalAlignment, Element, HeadsShape, SequenceLayout};

use super::{random_patterns, random_vec, tolerance};

/// O's elements outside its view (and past it) hold this; a write there is a bug.
pub const SENTINEL: f32 = 3.0;

/// Which heads a case's mask patterns are made for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaskHeads {
    /// One pattern for every (sequence, head).
    Shared,
    /// One per (sequence, query head).
    Query,
    /// One per (sequence, KV head).
    Kv,
}

/// One case: sequence `b` has `lens_q[b]` queries and `lens_k[b]` keys. A packed side holds
/// them one after another (its views' batch 1, seq the total); a padded side holds `pad_q` /
/// `pad_k` rows per sequence (then its `lens_*` are ignored). `slack`: max_seqlen above the
/// longest length (an upper bound). A mask of 128 × 128 blocks over the longest sequences.
#[derive(Debug, Clone)]
pub struct VarlenCase {
    pub heads: usize,
    pub heads_kv: usize,
    pub d: usize,
    pub lens_q: Vec<usize>,
    pub lens_k: Vec<usize>,
    pub packed_q: bool,
    pub packed_k: bool,
    pub pad_q: usize,
    pub pad_k: usize,
    pub fused: bool,
    pub slack: usize,
    pub mask: Option<MaskHeads>,
    pub causal: Option<CausalAlignment>,
}

impl VarlenCase {
    /// Both sides packed, these lengths, no mask, not causal.
    pub fn packed(
        heads: usize,
        heads_kv: usize,
        d: usize,
        lens_q: &[usize],
        lens_k: &[usize],
    ) -> Self {
        assert_eq!(lens_q.len(), lens_k.len());
        Self {
            heads,
            heads_kv,
            d,
            lens_q: lens_q.to_vec(),
            lens_k: lens_k.to_vec(),
            packed_q: true,
            packed_k: true,
            pad_q: 0,
            pad_k: 0,
            fused: false,
            slack: 0,
            mask: None,
            causal: None,
        }
    }
    /// Q and O padded to `seq_q` rows per sequence (K packed).
    pub fn padded_q(mut self, seq_q: usize) -> Self {
        self.packed_q = false;
        self.pad_q = seq_q;
        self
    }
    /// K and V padded to `seq_k` rows per sequence (Q packed).
    pub fn padded_k(mut self, seq_k: usize) -> Self {
        self.packed_k = false;
        self.pad_k = seq_k;
        self
    }
    pub fn fused(mut self) -> Self {
        self.fused = true;
        self
    }
    pub fn slack(mut self, slack: usize) -> Self {
        self.slack = slack;
        self
    }
    pub fn mask(mut self, heads: MaskHeads) -> Self {
        self.mask = Some(heads);
        self
    }
    pub fn causal(mut self, a: CausalAlignment) -> Self {
        self.causal = Some(a);
        self
    }
    pub fn batch(&self) -> usize {
        self.lens_q.len()
    }
    /// Sequence `b`'s queries and keys.
    pub fn len_q(&self, b: usize) -> usize {
        if self.packed_q {
            self.lens_q[b]
        } else {
            self.pad_q
        }
    }
    pub fn len_k(&self, b: usize) -> usize {
        if self.packed_k {
            self.lens_k[b]
        } else {
            self.pad_k
        }
    }
    /// The longest query and key sequences as the layout states them.
    pub fn max_seqlen_q(&self) -> usize {
        (0..self.batch()).map(|b| self.len_q(b)).max().unwrap_or(0) + self.slack
    }
    pub fn max_seqlen_k(&self) -> usize {
        (0..self.batch()).map(|b| self.len_k(b)).max().unwrap_or(0) + self.slack
    }
}

/// A `[batch, heads, seq, d]` view: packed, or fused `[batch, seq, heads, d + 8]`.
fn view(batch: usize, heads: usize, seq: usize, d: usize, fused: bool) -> HeadsShape {
    if fused {
        let sh = d + 8;
        HeadsShape {
            batch,
            heads,
            seq,
            head_dim: d,
            stride_s: heads * sh,
            stride_h: sh,
            stride_b: seq * heads * sh,
        }
    } else {
        HeadsShape::packed(batch, heads, seq, d)
    }
}

/// One query row of the reference: ((sequence, head, query), O row, LSE).
pub type RefRow = ((usize, usize, usize), Vec<f64>, f64);

/// A case's operands on the host: the views, Q, K, V, the offsets, the mask, and O's and the
/// LSE's poisoned starting contents.
pub struct VarlenData<T> {
    pub case: VarlenCase,
    pub qs: HeadsShape,
    pub ks: HeadsShape,
    /// O's view (Q's); its buffer holds 64 rows more.
    pub os: HeadsShape,
    pub q: Vec<T>,
    pub k: Vec<T>,
    pub v: Vec<T>,
    pub cu_q: Vec<i32>,
    pub cu_k: Vec<i32>,
    pub mask: Option<BlockPatterns>,
    /// O's buffer before the call: NaN in the view, the sentinel elsewhere.
    pub o0: Vec<T>,
    /// The LSE's length (`[heads, total_q]` packed, else `[batch, heads, seq_q]`), NaN before.
    pub lse_len: usize,
}

impl<T: Element> VarlenData<T> {
    pub fn new(c: &VarlenCase, rng: &mut StdRng) -> Self {
        let batch = c.batch();
        let cu_q = SequenceLayout::offsets(&c.lens_q).unwrap();
        let cu_k = SequenceLayout::offsets(&c.lens_k).unwrap();
        let (qb, qseq) = if c.packed_q {
            (1, *cu_q.last().unwrap() as usize)
        } else {
            (batch, c.pad_q)
        };
        let (kb, kseq) = if c.packed_k {
            (1, *cu_k.last().unwrap() as usize)
        } else {
            (batch, c.pad_k)
        };
        let qs = view(qb, c.heads, qseq, c.d, c.fused);
        let ks = view(kb, c.heads_kv, kseq, c.d, c.fused);
        let os = view(qb, c.heads, qseq, c.d, c.fused);
        let q = random_vec(qs.required_len().unwrap(), rng);
        let k = random_vec(ks.required_len().unwrap(), rng);
        let v = random_vec(ks.required_len().unwrap(), rng);
        let mask = c.mask.map(|heads| {
            let per_head = match heads {
                MaskHeads::Shared => None,
                MaskHeads::Query => Some((batch, c.heads)),
                MaskHeads::Kv => Some((batch, c.heads_kv)),
            };
            random_patterns(
                rng,
                per_head,
                c.max_seqlen_q().div_ceil(128),
                c.max_seqlen_k().div_ceil(128),
                128,
                0.5,
            )
        });
        let o_len = os.required_len().unwrap() + 64 * os.stride_s.max(c.d);
        let mut o0 = vec![T::from_f32(SENTINEL); o_len];
        for_each_view_offset(&os, |at| o0[at] = T::from_f32(f32::NAN));
        let lse_len = if c.packed_q {
            c.heads * qseq
        } else {
            batch * c.heads * c.pad_q
        };
        Self {
            case: c.clone(),
            qs,
            ks,
            os,
            q,
            k,
            v,
            cu_q,
            cu_k,
            mask,
            o0,
            lse_len,
        }
    }

    /// The host layout over `cu_q`, `cu_k` (the packed sides').
    pub fn host_layout(&self) -> SequenceLayout<'_> {
        let c = &self.case;
        let mut l = SequenceLayout::new(c.batch());
        if c.packed_q {
            l = l.cu_seqlens_q(&self.cu_q, c.max_seqlen_q());
        }
        if c.packed_k {
            l = l.cu_seqlens_k(&self.cu_k, c.max_seqlen_k());
        }
        l
    }

    /// Sequence `b`'s rows in Q (and O) and in K (and V): (batch entry, first row, rows).
    pub fn q_rows(&self, b: usize) -> (usize, usize, usize) {
        let c = &self.case;
        if c.packed_q {
            (0, self.cu_q[b] as usize, c.lens_q[b])
        } else {
            (b, 0, c.pad_q)
        }
    }
    pub fn k_rows(&self, b: usize) -> (usize, usize, usize) {
        let c = &self.case;
        if c.packed_k {
            (0, self.cu_k[b] as usize, c.lens_k[b])
        } else {
            (b, 0, c.pad_k)
        }
    }
    /// The LSE index of sequence `b`'s query `i` of head `h`.
    pub fn lse_at(&self, b: usize, h: usize, i: usize) -> usize {
        let c = &self.case;
        if c.packed_q {
            h * self.qs.seq + self.cu_q[b] as usize + i
        } else {
            (b * c.heads + h) * c.pad_q + i
        }
    }

    /// The f64 reference, written from the documented rules: sequence `b`'s query `i` of
    /// head `h` reads KV head `h / (heads / heads_kv)`, keys `j < len_k(b)` of its own rows,
    /// kept when listed in row `i / 128` of pattern `b·mask_heads + h / (heads / mask_heads)`
    /// (0 when shared) and, causal, when `j <= i` (top-left) or `j + len_q(b) <= i + len_k(b)`
    /// (bottom-right). Per (sequence, head, query): (O row, LSE), O = 0 and LSE = -inf when no
    /// key is kept.
    pub fn reference(&self) -> Vec<RefRow> {
        let c = &self.case;
        let (qs, ks) = (&self.qs, &self.ks);
        let at = |s: &HeadsShape, b: usize, h: usize, i: usize, x: usize| {
            b * s.stride_b + h * s.stride_h + i * s.stride_s + x
        };
        let group = c.heads / c.heads_kv;
        let scale = 1.0 / (c.d as f64).sqrt();
        let rows: Vec<(usize, usize, usize)> = (0..c.batch())
            .flat_map(|b| {
                let nq = self.q_rows(b).2;
                (0..c.heads).flat_map(move |h| (0..nq).map(move |i| (b, h, i)))
            })
            .collect();
        rows.into_par_iter()
            .map(|(b, h, i)| {
                let (qb, q0, nq) = self.q_rows(b);
                let (kb, k0, nk) = self.k_rows(b);
                let hk = h / group;
                let pattern = self.mask.as_ref().map(|m| match m.heads() {
                    Some((_, mh)) if m.patterns() != 1 => (m, b * mh + h / (c.heads / mh)),
                    _ => (m, 0),
                });
                let mut s = Vec::new();
                for j in 0..nk {
                    let listed = pattern
                        .is_none_or(|(m, p)| m.row(p, i / 128).contains(&((j / 128) as i32)));
                    let causal = match c.causal {
                        None => true,
                        Some(CausalAlignment::TopLeft) => j <= i,
                        Some(CausalAlignment::BottomRight) => j + nq <= i + nk,
                    };
                    if !listed || !causal {
                        continue;
                    }
                    let dot: f64 = (0..c.d)
                        .map(|x| {
                            self.q[at(qs, qb, h, q0 + i, x)].to_f32() as f64
                                * self.k[at(ks, kb, hk, k0 + j, x)].to_f32() as f64
                        })
                        .sum();
                    s.push((j, dot * scale));
                }
                let mut o = vec![0f64; c.d];
                if s.is_empty() {
                    return ((b, h, i), o, f64::NEG_INFINITY);
                }
                let max = s.iter().fold(f64::NEG_INFINITY, |m, &(_, x)| m.max(x));
                let mut sum = 0f64;
                for &(j, x) in &s {
                    let e = (x - max).exp();
                    sum += e;
                    for (y, oy) in o.iter_mut().enumerate() {
                        *oy += e * self.v[at(ks, kb, hk, k0 + j, y)].to_f32() as f64;
                    }
                }
                o.iter_mut().for_each(|x| *x /= sum);
                ((b, h, i), o, max + sum.ln())
            })
            .collect()
    }

    /// Checks a call's O buffer and LSE against the reference: every element of every
    /// sequence's rows written (finite; 0 with LSE = -inf where no key is kept), the relative
    /// error within the dtype's tolerance, the LSE within 1e-3, and every element outside the
    /// view still the sentinel. Returns (relative error, LSE error, empty rows).
    pub fn check(&self, o: &[T], lse: &[f32]) -> (f64, f64, usize) {
        let c = &self.case;
        let os = &self.os;
        let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
        for ((b, h, i), want, want_lse) in self.reference() {
            let (qb, q0, _) = self.q_rows(b);
            let got_lse = lse[self.lse_at(b, h, i)];
            if want_lse == f64::NEG_INFINITY {
                empty += 1;
                assert_eq!(
                    got_lse,
                    f32::NEG_INFINITY,
                    "{c:?}: LSE of empty row ({b}, {h}, {i})"
                );
            } else {
                lse_err = lse_err.max((got_lse as f64 - want_lse).abs());
            }
            for (x, &w) in want.iter().enumerate() {
                let got = o[qb * os.stride_b + h * os.stride_h + (q0 + i) * os.stride_s + x]
                    .to_f32() as f64;
                assert!(got.is_finite(), "{c:?}: O row ({b}, {h}, {i}) not written");
                if want_lse == f64::NEG_INFINITY {
                    assert_eq!(got, 0.0, "{c:?}: O of an empty row ({b}, {h}, {i})");
                }
                num += (got - w) * (got - w);
                den += w * w;
            }
        }
        let mut inside = vec![false; o.len()];
        for_each_view_offset(os, |at| inside[at] = true);
        let outside = o
            .iter()
            .zip(&inside)
            .filter(|(x, &inside)| !inside && x.to_f32() != SENTINEL)
            .count();
        assert_eq!(
            outside, 0,
            "{c:?}: {outside} elements written outside O's view"
        );
        let rel = if den > 0.0 {
            (num / den).sqrt()
        } else {
            num.sqrt()
        };
        let tol = tolerance(T::DTYPE, T::DTYPE);
        assert!(
            rel <= tol,
            "{c:?} {:?}: rel {rel:.3e} above {tol:.0e}",
            T::DTYPE
        );
        assert!(
            lse_err <= 1e-3,
            "{c:?} {:?}: LSE error {lse_err:.3e}",
            T::DTYPE
        );
        (rel, lse_err, empty)
    }
}

/// Calls `f` with the offset of every element of the view.
pub fn for_each_view_offset(s: &HeadsShape, mut f: impl FnMut(usize)) {
    for b in 0..s.batch {
        for h in 0..s.heads {
            for i in 0..s.seq {
                for x in 0..s.head_dim {
                    f(b * s.stride_b + h * s.stride_h + i * s.stride_s + x);
                }
            }
        }
    }
}

/// `batch` lengths in `0..=most`: one 0 and one 1 among them when `batch >= 3`, none a
/// multiple of 128 by design (random), the rest uniform.
pub fn draw_lens(rng: &mut StdRng, batch: usize, most: usize) -> Vec<usize> {
    let mut lens: Vec<usize> = (0..batch).map(|_| rng.random_range(0..=most)).collect();
    if batch >= 3 {
        lens[0] = 0;
        lens[batch / 2] = 1;
    }
    lens
}
