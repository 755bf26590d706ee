//! The CPU reference of attention: per (batch, head, query row), the kept keys' scores in
//! f32 (inputs widened exactly), the softmax with the row max subtracted, O = Σ p·v / Σ p in
//! f32, rounded once. (Batch, head) pairs run in parallel on rayon's pool. Query head `h`
//! reads KV head `h / (heads of Q / heads of K)` (grouped-query attention); causal keeps
//! keys `j <= i + offset` (the alignment's offset, [`CausalAlignment::offset`]). With a
//! serving layout (its host values checked: [`HostKeys`], [`HostPacked`]), sequence `b`'s
//! queries and keys may be packed along seq (its rows from its offset), it has its own key
//! count (its bottom-right offset `len_k - len_q`) and its keys may sit in pages; the LSE of
//! packed queries is `[heads, total_q]`.

use rayon::prelude::*;

use super::heads::HeadsShape;
use super::layout::{HostKeys, HostPacked, SequenceRows};
use super::options::{AttentionOptions, CausalAlignment};
use super::patterns::BlockPatterns;
use crate::element::Element;
use crate::error::Error;

/// The views `attention_into` checked: each buffer holds its view.
pub(super) struct Operands<'a, T> {
    pub q: (&'a [T], &'a HeadsShape),
    pub k: (&'a [T], &'a HeadsShape),
    pub v: (&'a [T], &'a HeadsShape),
    pub o: (&'a mut [T], &'a HeadsShape),
}

/// One (sequence, head)'s O rows (`rows·head_dim`, packed) and LSE (`rows`), as computed.
type HeadResult = (Vec<f32>, Vec<f32>);

/// One (sequence, query head)'s rows.
struct Head<'a, T> {
    b: usize,
    /// The sequence's queries in Q and O, and its keys in K and V (before a key count or a
    /// page table).
    queries: SequenceRows,
    key_rows: SequenceRows,
    /// The query head (Q, O).
    h: usize,
    /// The KV head it reads (K, V).
    h_kv: usize,
    q: (&'a [T], &'a HeadsShape),
    k: (&'a [T], &'a HeadsShape),
    v: (&'a [T], &'a HeadsShape),
    pattern: Option<(&'a BlockPatterns, usize)>,
    /// Per-sequence keys (and pages), or the padded batch.
    keys: Option<HostKeys<'a>>,
    /// Causal: the alignment (query `i` keeps keys `j <= i + offset`).
    causal: Option<CausalAlignment>,
    scale: f32,
}

impl<T: Element> Head<'_, T> {
    /// Row `i`'s output (head_dim values) and LSE.
    fn row(&self, i: usize, scores: &mut Vec<(usize, f32)>, out: &mut [f32]) -> f32 {
        let (qd, qs) = self.q;
        let (kd, ks) = self.k;
        let (vd, vs) = self.v;
        let d = qs.head_dim;
        scores.clear();
        let kept_block = |j: usize| match self.pattern {
            None => true,
            Some((p, pat)) => p
                .row(pat, i / p.block_q())
                .binary_search(&((j / p.block_k()) as i32))
                .is_ok(),
        };
        // The sequence's keys; those past the causal diagonal are never kept: the row's keys
        // end there.
        let seq_k = self.keys.map_or(self.key_rows.len, |x| x.len(self.b));
        let keys = match self.causal {
            None => seq_k,
            Some(a) => {
                let last = (i as i128) + a.offset(self.queries.len, seq_k) as i128;
                (last + 1).clamp(0, seq_k as i128) as usize
            }
        };
        // Where key j is in K and V: (batch entry, row), a page's row when paged.
        let at = |j: usize| match self.keys {
            Some(x) if x.pages.is_some() => x.key(self.b, j),
            _ => (self.key_rows.batch, self.key_rows.start + j),
        };
        let (qb, qi) = (self.queries.batch, self.queries.start + i);
        let mut max = f32::NEG_INFINITY;
        for j in 0..keys {
            if !kept_block(j) {
                continue;
            }
            let (kb, kj) = at(j);
            let mut dot = 0f32;
            for c in 0..d {
                dot += qd[qs.offset(qb, self.h, qi, c)].to_f32()
                    * kd[ks.offset(kb, self.h_kv, kj, c)].to_f32();
            }
            let s = dot * self.scale;
            max = max.max(s);
            scores.push((j, s));
        }
        out.iter_mut().for_each(|x| *x = 0.0);
        if scores.is_empty() {
            return f32::NEG_INFINITY;
        }
        let mut sum = 0f32;
        for &(j, s) in scores.iter() {
            let p = (s - max).exp();
            sum += p;
            let (vb, vj) = at(j);
            for (c, x) in out.iter_mut().enumerate() {
                *x += p * vd[vs.offset(vb, self.h_kv, vj, c)].to_f32();
            }
        }
        out.iter_mut().for_each(|x| *x /= sum);
        max + sum.ln()
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn attention<T: Element>(
    ops: Operands<'_, T>,
    lse: Option<&mut [f32]>,
    mask: Option<&BlockPatterns>,
    keys: Option<HostKeys<'_>>,
    packed: HostPacked<'_>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    let qs = *ops.q.1;
    let ks = *ops.k.1;
    let (o, os) = (ops.o.0, *ops.o.1);
    let (heads, d) = (qs.heads, qs.head_dim);
    // The entry checked O: its view fits its buffer and addresses each element once, so
    // batch·heads·seq·d <= o.len(): every size below is bounded by O's buffer.
    let elements = os.elements().ok_or(Error::InvalidArgument(
        "batch * heads * seq * head_dim overflows".into(),
    ))?;
    if elements == 0 {
        return Ok(());
    }
    // The sequences (packed queries: the layout's batch, their rows within Q's checked
    // offsets) and the most rows one has (at most Q's seq).
    let batch = packed.sequences(qs.batch);
    let seq = (0..batch)
        .map(|b| packed.queries(b, qs.seq).len)
        .max()
        .unwrap_or(0);
    let pairs = batch * heads;
    if pairs == 0 {
        return Ok(());
    }
    // K's heads divide Q's (checked at the entry; 0 only with no query head, then no pair).
    let group = heads / ops.k.1.heads.max(1);
    let scale = opts.get_scale(d);
    let threads = rayon::current_num_threads().clamp(1, pairs);
    // Every buffer before the first write (so an allocation failure leaves O untouched):
    // one (rows, LSE) pair per thread, reused wave after wave.
    let mut buffers: Vec<HeadResult> = Vec::new();
    for _ in 0..threads {
        let mut rows = crate::format::try_vec("attention rows", seq * d)?;
        rows.resize(seq * d, 0f32);
        let mut lses = crate::format::try_vec("attention LSE rows", seq)?;
        lses.resize(seq, 0f32);
        buffers.push((rows, lses));
    }
    let compute = |bh: usize, (rows, lses): &mut HeadResult| {
        let (b, h) = (bh / heads, bh % heads);
        let queries = packed.queries(b, qs.seq);
        let head = Head {
            b,
            queries,
            key_rows: packed.keys(b, ks.seq),
            h,
            h_kv: h / group,
            q: ops.q,
            k: ops.k,
            v: ops.v,
            pattern: mask.map(|p| (p, p.pattern_of(b, h, heads))),
            keys,
            causal: opts.get_causal().then(|| opts.get_causal_alignment()),
            scale,
        };
        // K's rows are disjoint (checked at the entry): at most K's buffer of scores.
        let mut scores = Vec::new();
        for i in 0..queries.len {
            lses[i] = head.row(i, &mut scores, &mut rows[i * d..(i + 1) * d]);
        }
    };
    let mut lse = lse;
    // Waves of `threads` (sequence, head) pairs: each computes into its thread's buffers,
    // then the wave is written (O's views of different heads may interleave in memory).
    for first in (0..pairs).step_by(threads) {
        let wave = first..(first + threads).min(pairs);
        let bufs = &mut buffers[..wave.len()];
        bufs.par_iter_mut()
            .enumerate()
            .for_each(|(t, buf)| compute(first + t, buf));
        for (bh, (rows, lses)) in wave.zip(bufs.iter()) {
            let (b, h) = (bh / heads, bh % heads);
            let q = packed.queries(b, qs.seq);
            for i in 0..q.len {
                for c in 0..d {
                    o[os.offset(q.batch, h, q.start + i, c)] = T::from_f32(rows[i * d + c]);
                }
            }
            // [batch, heads, seq_q], or [heads, total_q] with packed queries.
            let at = match packed.q {
                None => bh * qs.seq,
                Some(_) => h * qs.seq + q.start,
            };
            if let Some(l) = lse.as_deref_mut() {
                l[at..at + q.len].copy_from_slice(&lses[..q.len]);
            }
        }
    }
    Ok(())
}
