//! The serving-layout cases the GPU attention tests share (tests/gpu_attention.rs for the
//! Hopper family, tests/gpu_attention_decode.rs for the decode family): per-sequence key
//! counts and paged K/V (a shuffled pool), uploaded, run through `attention_with_layout` with
//! device arrays, and checked against the f64 reference (`attention_reference_layout`) with
//! O and LSE poisoned with NaN (every element must be written).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};
use rand::{rngs::StdRng, Rng};
use sparsek::{
    attention_with_layout, AttentionOptions, BlockPatterns, CausalAlignment, DeviceBlockPatterns,
    Element, Error, Heads, HeadsMut, HeadsShape, LseMut, MaskOperand, PageTable, SequenceLayout,
};

use super::{
    attention_reference_layout, random_patterns_blocks, random_vec, tolerance, upload, PagedCache,
    RefLayout,
};

/// Which heads a case's mask patterns are made for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PerHead {
    Shared,
    Query,
    Kv,
}

/// One case: `lens[b]` keys per sequence (the batch is `lens.len()`), `max_seqlen_k` the
/// longest plus `slack`; paged in pages of `page` keys (a shuffled pool with spare pages, -1
/// past each sequence's pages) or padded to `max_seqlen_k + 3` keys; a mask of `block_q ×
/// block_k` blocks over the logical key blocks, or none.
#[derive(Debug, Clone)]
pub struct LayoutCase {
    pub heads: usize,
    pub heads_kv: usize,
    pub seq_q: usize,
    pub d: usize,
    pub lens: Vec<usize>,
    pub slack: usize,
    pub page: Option<usize>,
    pub mask: Option<(usize, usize)>,
    pub per_head: PerHead,
    pub causal: Option<CausalAlignment>,
    /// K and V rows no sequence keeps (past each one's keys, spare pages) are NaN: a kernel
    /// must not read them into a result (the decode family zero-fills them; the Hopper family
    /// weights its last block's by 0 and needs them finite).
    pub poison_tail: bool,
}

impl LayoutCase {
    /// A paged case without mask or causality.
    pub fn paged(
        heads: usize,
        heads_kv: usize,
        seq_q: usize,
        d: usize,
        lens: &[usize],
        page: usize,
    ) -> Self {
        Self {
            heads,
            heads_kv,
            seq_q,
            d,
            lens: lens.to_vec(),
            slack: 0,
            page: Some(page),
            mask: None,
            per_head: PerHead::Shared,
            causal: None,
            poison_tail: false,
        }
    }
    /// The same keys padded (seqlens_k alone).
    pub fn unpaged(mut self) -> Self {
        self.page = None;
        self
    }
    pub fn causal(mut self, a: CausalAlignment) -> Self {
        self.causal = Some(a);
        self
    }
    pub fn mask(mut self, block_q: usize, block_k: usize, per_head: PerHead) -> Self {
        self.mask = Some((block_q, block_k));
        self.per_head = per_head;
        self
    }
    pub fn slack(mut self, slack: usize) -> Self {
        self.slack = slack;
        self
    }
    pub fn poison_tail(mut self) -> Self {
        self.poison_tail = true;
        self
    }
    pub fn batch(&self) -> usize {
        self.lens.len()
    }
    pub fn max_seqlen_k(&self) -> usize {
        self.lens.iter().copied().max().unwrap_or(0) + self.slack
    }
    /// Query rows per KV head (the decode family takes at most 16).
    pub fn rows_per_kv_head(&self) -> usize {
        self.seq_q * (self.heads / self.heads_kv)
    }
}

/// A case's operands on the host (for the reference) and on the device.
pub struct Prepared<T: DeviceRepr> {
    pub case: LayoutCase,
    pub q: Vec<T>,
    pub k: Vec<T>,
    pub v: Vec<T>,
    pub qs: HeadsShape,
    pub ks: HeadsShape,
    pub lens: Vec<i32>,
    pub cache: Option<PagedCache>,
    pub mask: Option<BlockPatterns>,
    pub dq: CudaSlice<T>,
    pub dk: CudaSlice<T>,
    pub dv: CudaSlice<T>,
    pub dlens: CudaSlice<i32>,
    pub dtable: Option<CudaSlice<i32>>,
    pub dmask: Option<DeviceBlockPatterns>,
}

impl<T: Element + DeviceRepr> Prepared<T> {
    pub fn new(stream: &Arc<CudaStream>, c: &LayoutCase, rng: &mut StdRng) -> Self {
        let batch = c.batch();
        let max_len = c.max_seqlen_k();
        let cache = c.page.map(|page| {
            PagedCache::shuffled(rng, &c.lens, page, max_len.div_ceil(page).max(1) + 1, 3)
        });
        let ks = match &cache {
            Some(p) => HeadsShape::packed(p.num_pages, c.heads_kv, p.page_size, c.d),
            None => HeadsShape::packed(batch, c.heads_kv, max_len + 3, c.d),
        };
        let qs = HeadsShape::packed(batch, c.heads, c.seq_q, c.d);
        let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
        let mut k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
        let mut v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
        if c.poison_tail {
            // Rows (batch entry, row) some sequence keeps; every other row NaN.
            let mut kept = vec![false; ks.batch * ks.seq];
            for (b, &n) in c.lens.iter().enumerate() {
                for j in 0..n {
                    let (e, r) = match &cache {
                        Some(p) => (
                            p.table[b * p.max_pages + j / p.page_size] as usize,
                            j % p.page_size,
                        ),
                        None => (b, j),
                    };
                    kept[e * ks.seq + r] = true;
                }
            }
            for e in 0..ks.batch {
                for h in 0..ks.heads {
                    for r in 0..ks.seq {
                        if !kept[e * ks.seq + r] {
                            let at = e * ks.stride_b + h * ks.stride_h + r * ks.stride_s;
                            for x in &mut k[at..at + c.d] {
                                *x = T::from_f32(f32::NAN);
                            }
                            for x in &mut v[at..at + c.d] {
                                *x = T::from_f32(f32::NAN);
                            }
                        }
                    }
                }
            }
        }
        let per_head = match c.per_head {
            PerHead::Shared => None,
            PerHead::Query => Some((batch, c.heads)),
            PerHead::Kv => Some((batch, c.heads_kv)),
        };
        let mask = c.mask.map(|(bq, bk)| {
            random_patterns_blocks(
                rng,
                per_head,
                c.seq_q.div_ceil(bq),
                max_len.div_ceil(bk),
                (bq, bk),
                0.5,
            )
        });
        let lens: Vec<i32> = c.lens.iter().map(|&n| n as i32).collect();
        Self {
            case: c.clone(),
            dq: upload(stream, &q),
            dk: upload(stream, &k),
            dv: upload(stream, &v),
            dlens: upload_i32(stream, &lens),
            dtable: cache.as_ref().map(|p| upload_i32(stream, &p.table)),
            dmask: mask
                .as_ref()
                .map(|m| DeviceBlockPatterns::upload(m, stream).unwrap()),
            q,
            k,
            v,
            qs,
            ks,
            lens,
            cache,
            mask,
        }
    }

    /// O's elements and LSE's floats.
    pub fn out_lens(&self) -> (usize, usize) {
        (
            self.qs.required_len().unwrap(),
            self.case.batch() * self.case.heads * self.case.seq_q,
        )
    }

    /// One launch into `o` and `lse` with these key counts and table (the case's own, or
    /// others of the same lengths: the refusal tests').
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with(
        &self,
        o: &mut CudaSlice<T>,
        lse: &mut CudaSlice<f32>,
        lens: &CudaSlice<i32>,
        table: Option<&CudaSlice<i32>>,
        max_seqlen_k: usize,
        opts: &AttentionOptions,
    ) -> Result<(), Error> {
        let c = &self.case;
        let mut layout = SequenceLayout::new(c.batch()).seqlens_k(lens, max_seqlen_k);
        if let (Some(t), Some(p)) = (table, &self.cache) {
            layout = layout.page_table(PageTable::new(t, p.max_pages, p.page_size));
        }
        let (qs, ks) = (self.qs, self.ks);
        attention_with_layout(
            Heads::device(&self.dq, qs.batch, qs.heads, qs.seq, qs.head_dim),
            Heads::device(&self.dk, ks.batch, ks.heads, ks.seq, ks.head_dim),
            Heads::device(&self.dv, ks.batch, ks.heads, ks.seq, ks.head_dim),
            HeadsMut::device(o, qs.batch, qs.heads, qs.seq, qs.head_dim),
            Some(LseMut::Device(lse)),
            self.dmask.as_ref().map(MaskOperand::Device),
            &layout,
            opts,
        )
    }

    /// One launch of the case into `o` and `lse`.
    pub fn launch(
        &self,
        o: &mut CudaSlice<T>,
        lse: &mut CudaSlice<f32>,
        opts: &AttentionOptions,
    ) -> Result<(), Error> {
        self.launch_with(
            o,
            lse,
            &self.dlens,
            self.dtable.as_ref(),
            self.case.max_seqlen_k(),
            opts,
        )
    }

    /// The case's options: its causality and `backend`.
    pub fn options(&self, backend: sparsek::Backend) -> AttentionOptions {
        let c = &self.case;
        AttentionOptions::new()
            .causal(c.causal.is_some())
            .causal_alignment(c.causal.unwrap_or_default())
            .backend(backend)
    }

    /// O and LSE (downloaded) against the f64 reference: every element written, empty rows
    /// O = 0 and LSE = -inf, the relative error within the dtype's tolerance.
    pub fn check(&self, o: &[T], lse: &[f32]) {
        let c = &self.case;
        let reference = match &self.cache {
            Some(p) => p.reference(),
            None => RefLayout {
                seqlens_k: &self.lens,
                pages: None,
            },
        };
        let (ro, rl) = attention_reference_layout(
            (&self.q, &self.qs),
            (&self.k, &self.ks),
            (&self.v, &self.ks),
            self.mask.as_ref(),
            c.causal,
            1.0 / (c.d as f64).sqrt(),
            Some(reference),
        );
        let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
        for (li, &want_lse) in rl.iter().enumerate() {
            if want_lse == f64::NEG_INFINITY {
                empty += 1;
                assert_eq!(lse[li], f32::NEG_INFINITY, "{c:?}: LSE of empty row {li}");
            } else {
                lse_err = lse_err.max((lse[li] as f64 - want_lse).abs());
            }
            for x in 0..c.d {
                let got = o[li * c.d + x].to_f32() as f64;
                assert!(
                    got.is_finite(),
                    "{c:?}: O row {li} col {x} = {got} (not written?)"
                );
                if want_lse == f64::NEG_INFINITY {
                    assert_eq!(got, 0.0, "{c:?}: O of an empty row {li}");
                }
                let want = ro[li * c.d + x];
                num += (got - want) * (got - want);
                den += want * want;
            }
        }
        let rel = if den > 0.0 {
            (num / den).sqrt()
        } else {
            num.sqrt()
        };
        let tol = tolerance(T::DTYPE, T::DTYPE);
        println!(
            "{c:?} {:?}: rel {rel:.2e} (tol {tol:.0e}), LSE err {lse_err:.2e}, empty rows {empty}",
            T::DTYPE
        );
        assert!(rel <= tol, "{c:?} {:?}: rel {rel:.3e}", T::DTYPE);
        assert!(
            lse_err <= 1e-3,
            "{c:?} {:?}: LSE err {lse_err:.3e}",
            T::DTYPE
        );
    }

    /// Poisoned O and LSE, one launch, the check: Ok, or the launch's error (nothing
    /// checked then; the caller decides whether the refusal was expected).
    pub fn run(&self, stream: &Arc<CudaStream>, opts: &AttentionOptions) -> Result<(), Error> {
        let (o_len, lse_len) = self.out_lens();
        let mut o = upload(stream, &vec![T::from_f32(f32::NAN); o_len]);
        let mut lse = upload(stream, &vec![f32::NAN; lse_len]);
        self.launch(&mut o, &mut lse, opts)?;
        self.check(
            &stream.clone_dtoh(&o).unwrap(),
            &stream.clone_dtoh(&lse).unwrap(),
        );
        Ok(())
    }
}

/// `v` on the device (one zero when empty: a buffer is never empty).
pub fn upload_i32(stream: &Arc<CudaStream>, v: &[i32]) -> CudaSlice<i32> {
    if v.is_empty() {
        stream.alloc_zeros::<i32>(1).unwrap()
    } else {
        stream.clone_htod(v).unwrap()
    }
}

/// Key counts of `batch` sequences, at most `most`, not multiples of anything: the first 0,
/// the second `most` (when there is one), the rest drawn.
pub fn draw_lens(rng: &mut StdRng, batch: usize, most: usize) -> Vec<usize> {
    let mut l: Vec<usize> = (0..batch).map(|_| rng.random_range(0..=most)).collect();
    l[0] = 0;
    if batch > 1 {
        l[1] = most;
    }
    l
}

/// 100 launches of `p` with `opts`: O and LSE bitwise identical every time (`None` when the
/// first launch is refused: the caller says whether that was expected).
pub fn repeats_identical<T: Element + DeviceRepr>(
    stream: &Arc<CudaStream>,
    p: &Prepared<T>,
    opts: &AttentionOptions,
) -> Option<Error> {
    let (o_len, lse_len) = p.out_lens();
    let mut o = stream.alloc_zeros::<T>(o_len.max(1)).unwrap();
    let mut lse = stream.alloc_zeros::<f32>(lse_len.max(1)).unwrap();
    let mut first: Option<(Vec<u32>, Vec<u32>)> = None;
    for run in 0..100 {
        stream.memset_zeros(&mut o).unwrap();
        if let Err(e) = p.launch(&mut o, &mut lse, opts) {
            assert_eq!(run, 0, "{:?}: run {run} refused: {e}", p.case);
            return Some(e);
        }
        let got = (
            stream
                .clone_dtoh(&o)
                .unwrap()
                .iter()
                .map(|x| x.to_f32().to_bits())
                .collect::<Vec<_>>(),
            stream
                .clone_dtoh(&lse)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert!(*f == got, "{:?}: run {run} differs from the first", p.case),
        }
    }
    println!("{:?}: 100 runs bitwise identical (O and LSE)", p.case);
    None
}
