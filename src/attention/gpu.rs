//! Attention and top-k gating on the device: [`DeviceBlockPatterns`] (a validated mask in
//! device memory), the device path of [`attention_into`](super::attention_into), and the device
//! gating ([`block_topk`], [`block_topk_scores`]), one launch each.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::check::MaskDims;
use super::gating::{check_gating_inputs, topk_nnzb, TopkOptions};
use super::heads::{Heads, HeadsShape};
use super::layout::{IndexArray, SequenceLayout};
use super::options::{AttentionOptions, CausalAlignment};
use super::patterns::BlockPatterns;
use crate::dense::Storage;
use crate::device::device_bsr::{download_prefix, upload_slice};
use crate::device::result::{backend, check, check_contexts, dtype, to_i32, to_i64};
use crate::device::sys;
use crate::element::Element;
use crate::error::Error;
use crate::options::Backend;

/// A validated attention mask ([`BlockPatterns`]) in device memory: its `row_ptr` and
/// `col_idx` in cudarc buffers, freed on drop. Built by [`upload`](Self::upload) or by the
/// device gating ([`block_topk`]); either way every pattern invariant holds.
///
/// ```no_run
/// use sparsek::cudarc::driver::CudaContext;
/// use sparsek::gpu::DeviceBlockPatterns;
/// use sparsek::{BlockMask, BlockPatterns};
///
/// let mask = BlockMask::from_fn(4, 4, |r, c| c <= r)?;
/// let patterns = BlockPatterns::from_block_masks(128, 128, &[mask])?;
/// let stream = CudaContext::new(0)?.default_stream();
/// let on_device = DeviceBlockPatterns::upload(&patterns, &stream)?;
/// assert_eq!(on_device.download()?.col_idx(), patterns.col_idx());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DeviceBlockPatterns {
    pub(crate) block_q: usize,
    pub(crate) block_k: usize,
    pub(crate) q_blocks: usize,
    pub(crate) k_blocks: usize,
    pub(crate) patterns: usize,
    /// The (batch, heads) a per-head set was made for (see [`BlockPatterns::heads`]).
    pub(crate) heads: Option<(usize, usize)>,
    pub(crate) nnzb: usize,
    pub(crate) row_ptr: CudaSlice<i32>,
    pub(crate) col_idx: CudaSlice<i32>,
}

impl DeviceBlockPatterns {
    /// Copies validated patterns to the device on `stream`.
    pub fn upload(p: &BlockPatterns, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(Self {
            block_q: p.block_q(),
            block_k: p.block_k(),
            q_blocks: p.q_blocks(),
            k_blocks: p.k_blocks(),
            patterns: p.patterns(),
            heads: p.heads(),
            nnzb: p.nnzb(),
            row_ptr: upload_slice(p.row_ptr(), stream)?,
            col_idx: upload_slice(p.col_idx(), stream)?,
        })
    }

    /// Copies the patterns back to the host (on the buffers' stream).
    pub fn download(&self) -> Result<BlockPatterns, Error> {
        let stream = self.row_ptr.stream().clone();
        // patterns * q_blocks < i32::MAX: checked when the set was made.
        let rows = self.patterns * self.q_blocks + 1;
        let row_ptr = download_prefix(&self.row_ptr, rows, &stream)?;
        let col_idx = download_prefix(&self.col_idx, self.nnzb, &stream)?;
        let p = BlockPatterns::from_parts(
            self.block_q,
            self.block_k,
            self.q_blocks,
            self.k_blocks,
            self.patterns,
            row_ptr,
            col_idx,
        )?;
        match self.heads {
            Some((batch, heads)) => p.with_heads(batch, heads),
            None => Ok(p),
        }
    }

    /// The (batch, heads) a per-head set was made for, if recorded.
    pub fn heads(&self) -> Option<(usize, usize)> {
        self.heads
    }

    /// What an attention problem is checked against.
    pub(crate) fn dims(&self) -> MaskDims {
        MaskDims {
            block_q: self.block_q,
            block_k: self.block_k,
            q_blocks: self.q_blocks,
            k_blocks: self.k_blocks,
            patterns: self.patterns,
            heads: self.heads,
        }
    }

    /// Rows of a query block.
    pub fn block_q(&self) -> usize {
        self.block_q
    }
    /// Keys of a key block.
    pub fn block_k(&self) -> usize {
        self.block_k
    }
    /// Query blocks per pattern.
    pub fn q_blocks(&self) -> usize {
        self.q_blocks
    }
    /// Key blocks per pattern row.
    pub fn k_blocks(&self) -> usize {
        self.k_blocks
    }
    /// Patterns: 1 (shared by every (batch, head)) or batch·heads.
    pub fn patterns(&self) -> usize {
        self.patterns
    }
    /// Kept blocks over all patterns.
    pub fn nnzb(&self) -> usize {
        self.nnzb
    }
}

fn heads_desc(s: &HeadsShape) -> Result<sys::HeadsDesc, Error> {
    Ok(sys::HeadsDesc {
        data: 0,
        batch: to_i64("batch", s.batch)?,
        heads: to_i64("heads", s.heads)?,
        seq: to_i64("seq", s.seq)?,
        head_dim: to_i64("head_dim", s.head_dim)?,
        stride_b: to_i64("stride_b", s.stride_b)?,
        stride_h: to_i64("stride_h", s.stride_h)?,
        stride_s: to_i64("stride_s", s.stride_s)?,
    })
}

/// The seam's value of a causal alignment (`sparsek::CausalAlignment`).
fn causal_alignment(a: CausalAlignment) -> sys::CausalAlignment {
    match a {
        CausalAlignment::TopLeft => sys::CausalAlignment::TopLeft,
        CausalAlignment::BottomRight => sys::CausalAlignment::BottomRight,
    }
}

fn gpu_dtype<T: Element>(backend: Backend) -> Result<sys::DType, Error> {
    match T::DTYPE {
        t if t.is_half() => Ok(dtype(t)),
        other => Err(Error::UnsupportedTypes {
            backend,
            input: other,
            output: other,
        }),
    }
}

/// The device operands of one attention forward, validated by `crate::attention`.
pub(crate) struct AttentionOperands<'a, 'b, T> {
    pub q: &'b Heads<'a, T>,
    pub k: &'b Heads<'a, T>,
    pub v: &'b Heads<'a, T>,
    /// O's buffer and view.
    pub o: (&'a mut CudaSlice<T>, HeadsShape),
    /// `batch*heads*seq_q` floats when present (checked by the caller).
    pub lse: Option<&'a mut CudaSlice<f32>>,
    pub mask: Option<&'a DeviceBlockPatterns>,
    /// The layout, its arrays on the device (checked by the caller).
    pub layout: &'b SequenceLayout<'a>,
}

/// A device array of a layout (the caller checked every one is on the device).
fn device_array<'a>(a: Option<IndexArray<'a>>) -> Option<&'a CudaSlice<i32>> {
    match a {
        Some(IndexArray::Device(s)) => Some(s),
        _ => None,
    }
}

/// Device attention, after `crate::attention` validated shapes, buffers and the mask's dims.
/// Runs on O's stream.
pub(crate) fn run_attention<T: Element>(
    ops: AttentionOperands<'_, '_, T>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    let (Storage::Device(q), Storage::Device(k), Storage::Device(v)) =
        (&ops.q.data, &ops.k.data, &ops.v.data)
    else {
        return Err(Error::MixedLocations(
            "attention takes Q, K, V and O all on the device",
        ));
    };
    let (o, o_shape) = ops.o;
    let requested = opts.get_backend();
    let problem =
        attention_problem::<T>(ops.q, ops.k, ops.v, &o_shape, ops.mask, ops.layout, opts)?;
    let stream = o.stream().clone();
    check_contexts(
        &stream,
        &[("Q", q.stream()), ("K", k.stream()), ("V", v.stream())],
    )?;
    if let Some(lse) = &ops.lse {
        check_contexts(&stream, &[("LSE", lse.stream())])?;
    }
    if let Some(m) = ops.mask {
        check_contexts(
            &stream,
            &[
                ("mask row_ptr", m.row_ptr.stream()),
                ("mask col_idx", m.col_idx.stream()),
            ],
        )?;
    }
    let seqlens_k = device_array(ops.layout.get_seqlens_k());
    let page_table = device_array(ops.layout.get_page_table().map(|t| t.table()));
    let cu_seqlens_q = device_array(ops.layout.get_cu_seqlens_q());
    let cu_seqlens_k = device_array(ops.layout.get_cu_seqlens_k());
    for (name, a) in [
        ("seqlens_k", seqlens_k),
        ("page_table", page_table),
        ("cu_seqlens_q", cu_seqlens_q),
        ("cu_seqlens_k", cu_seqlens_k),
    ] {
        if let Some(a) = a {
            check_contexts(&stream, &[(name, a.stream())])?;
        }
    }
    stream.context().bind_to_thread()?;
    let bufs = sys::AttentionBuffers {
        q,
        k,
        v,
        o: sys::Output::Launch(o),
        lse: ops.lse,
        mask: ops.mask.map(|m| (&m.row_ptr, &m.col_idx)),
        seqlens_k,
        page_table,
        cu_seqlens_q,
        cu_seqlens_k,
    };
    check(sys::attention(problem, bufs, &stream), requested).map(|_| ())
}

fn attention_problem<T: Element>(
    q: &Heads<'_, T>,
    k: &Heads<'_, T>,
    v: &Heads<'_, T>,
    o: &HeadsShape,
    mask: Option<&DeviceBlockPatterns>,
    layout: &SequenceLayout<'_>,
    opts: &AttentionOptions,
) -> Result<sys::AttentionProblem, Error> {
    let dims = layout.dims();
    let requested = opts.get_backend();
    let (has_mask, block_q, block_k, q_blocks, k_blocks, patterns, nnzb) = match mask {
        Some(m) => (
            true, m.block_q, m.block_k, m.q_blocks, m.k_blocks, m.patterns, m.nnzb,
        ),
        None => (false, 128, 128, 0, 0, 0, 0),
    };
    let (mask_batch, mask_heads) = mask.and_then(|m| m.heads).unwrap_or((0, 0));
    Ok(sys::AttentionProblem {
        q: heads_desc(&q.shape)?,
        k: heads_desc(&k.shape)?,
        v: heads_desc(&v.shape)?,
        o: heads_desc(o)?,
        dtype: gpu_dtype::<T>(requested)?,
        lse: 0,
        has_mask,
        block_q: to_i32("block_q", block_q)?,
        block_k: to_i32("block_k", block_k)?,
        q_blocks: to_i64("q_blocks", q_blocks)?,
        k_blocks: to_i64("k_blocks", k_blocks)?,
        patterns: to_i64("patterns", patterns)?,
        nnzb: to_i64("nnzb", nnzb)?,
        mask_batch: to_i64("batch of the mask", mask_batch)?,
        mask_heads: to_i64("heads of the mask", mask_heads)?,
        row_ptr: 0,
        col_idx: 0,
        causal: opts.get_causal(),
        causal_alignment: causal_alignment(opts.get_causal_alignment()),
        // The arrays' addresses are filled by sys::attention.
        layout: sys::LayoutDesc {
            cu_seqlens_q: 0,
            cu_seqlens_k: 0,
            seqlens_k: 0,
            page_table: 0,
            max_pages: to_i64("max_pages", dims.max_pages)?,
            batch: to_i64("batch of the layout", dims.batch)?,
            max_seqlen_q: to_i64("max_seqlen_q", dims.max_seqlen_q)?,
            max_seqlen_k: to_i64("max_seqlen_k", dims.max_seqlen_k)?,
        },
        check_indices: opts.get_check_indices(),
        scale: opts.get_scale(q.shape.head_dim),
        backend: backend(requested)?,
        stream: 0,
        mode: sys::Mode::Select,
    })
}

/// The gating's inputs on the device: Q and K to pool, or given scores.
enum GatingInput<'a, T> {
    Pooled(&'a CudaSlice<T>, &'a CudaSlice<T>, HeadsShape, HeadsShape),
    Scores(&'a CudaSlice<f32>),
}

/// The one gating launch of both entries, after their checks: the problem for C++, the
/// output arrays (row offsets known before the launch, columns filled by it) and the launch
/// on the inputs' stream.
fn run_gating<T: Element>(
    input: GatingInput<'_, T>,
    (batch, heads, seq_q, seq_k): (usize, usize, usize, usize),
    opts: &TopkOptions,
) -> Result<DeviceBlockPatterns, Error> {
    let nnzb = topk_nnzb(batch, heads, seq_q, seq_k, opts)?;
    let (q_blocks, k_blocks) = (
        seq_q.div_ceil(opts.block_q()),
        seq_k.div_ceil(opts.block_k()),
    );
    let rows = batch * heads * q_blocks; // < 2^31: checked by topk_nnzb
    let empty = HeadsShape::packed(0, 0, 0, 1);
    let (pooled, qs, ks, t, stream) = match &input {
        GatingInput::Pooled(_, kd, qs, ks) => (
            true,
            *qs,
            *ks,
            gpu_dtype::<T>(Backend::Auto)?,
            kd.stream().clone(),
        ),
        GatingInput::Scores(s) => (false, empty, empty, sys::DType::F16, s.stream().clone()),
    };
    if let GatingInput::Pooled(qd, ..) = &input {
        check_contexts(&stream, &[("Q", qd.stream())])?;
    }
    let problem = sys::GatingProblem {
        pooled,
        q: heads_desc(&qs)?,
        k: heads_desc(&ks)?,
        dtype: t,
        scores: 0,
        batch: to_i64("batch", batch)?,
        heads: to_i64("heads", heads)?,
        seq_q: to_i64("seq_q", seq_q)?,
        seq_k: to_i64("seq_k", seq_k)?,
        top_k: to_i32("top_k", opts.top_k())?,
        causal: opts.get_causal(),
        causal_alignment: causal_alignment(opts.get_causal_alignment()),
        block_q: to_i32("block_q", opts.block_q())?,
        block_k: to_i32("block_k", opts.block_k())?,
        q_blocks: to_i64("q_blocks", q_blocks)?,
        k_blocks: to_i64("k_blocks", k_blocks)?,
        nnzb: to_i64("nnzb", nnzb)?,
        row_ptr: 0,
        col_idx: 0,
        stream: 0,
    };
    stream.context().bind_to_thread()?;
    let mut row_ptr = stream.alloc_zeros::<i32>(rows + 1)?;
    let mut col_idx = stream.alloc_zeros::<i32>(nnzb.max(1))?;
    let (qk, scores) = match input {
        GatingInput::Pooled(q, k, _, _) => (Some((q, k)), None),
        GatingInput::Scores(s) => (None, Some(s)),
    };
    let bufs = sys::GatingBuffers {
        qk,
        scores,
        row_ptr: &mut row_ptr,
        col_idx: &mut col_idx,
    };
    check(sys::block_topk(problem, bufs, &stream), Backend::Auto)?;
    Ok(DeviceBlockPatterns {
        block_q: opts.block_q(),
        block_k: opts.block_k(),
        q_blocks,
        k_blocks,
        patterns: batch * heads,
        heads: Some((batch, heads)),
        nnzb,
        row_ptr,
        col_idx,
    })
}

/// Top-k key-block gating on the device from mean-pooled Q and K (one launch on K's
/// stream): the same mask, bit for bit, as the CPU's
/// [`block_topk_pooled`](crate::attention::block_topk_pooled) (the contract, ties and NaN
/// included, is there and in include/sparsek/attention.hpp).
pub fn block_topk<T: Element>(
    q: &Heads<'_, T>,
    k: &Heads<'_, T>,
    opts: &TopkOptions,
) -> Result<DeviceBlockPatterns, Error> {
    let (Storage::Device(qd), Storage::Device(kd)) = (&q.data, &k.data) else {
        return Err(Error::MixedLocations(
            "block_topk takes Q and K on the device",
        ));
    };
    let (qs, ks) = (q.shape(), k.shape());
    check_gating_inputs((&qs, qd.len()), (&ks, kd.len()), T::DTYPE, true)?;
    run_gating(
        GatingInput::Pooled(qd, kd, qs, ks),
        (qs.batch, qs.heads, qs.seq, ks.seq),
        opts,
    )
}

/// Top-k key-block gating on the device from the caller's scores (`batch*heads*q_blocks*
/// k_blocks` floats, `[batch, heads, q_blocks, k_blocks]` packed), one launch on their
/// stream; the same mask as the CPU's
/// [`block_topk_scores`](crate::attention::block_topk_scores).
pub fn block_topk_scores(
    scores: &CudaSlice<f32>,
    dims: (usize, usize, usize, usize),
    opts: &TopkOptions,
) -> Result<DeviceBlockPatterns, Error> {
    let (batch, heads, seq_q, seq_k) = dims;
    topk_nnzb(batch, heads, seq_q, seq_k, opts)?; // the dims' checks
    let needed = (batch * heads * seq_q.div_ceil(opts.block_q()))
        .checked_mul(seq_k.div_ceil(opts.block_k()))
        .ok_or(Error::InvalidArgument(
            "batch * heads * q_blocks * k_blocks overflows".into(),
        ))?;
    if scores.len() < needed {
        return Err(Error::BufferTooSmall {
            operand: "scores",
            needed,
            got: scores.len(),
        });
    }
    run_gating::<f32>(GatingInput::Scores(scores), dims, opts)
}
