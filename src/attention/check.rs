//! The checks of attention's operands, below both the entry point and the device path: the
//! table's rules (`rules/attention.toml`, generated into `super::rules`, as the C++ entry
//! checks them) and what only Rust's operands carry.

use super::heads::HeadsShape;
use super::layout::{LayoutDims, SequenceLayout};
use super::options::AttentionOptions;
use super::rules::{self, Facts};
use crate::check::rules::int;
use crate::element::DType;
use crate::error::Error;
use crate::options::Backend;

/// The buffer holds the view, and the view's rows do not overlap (`stride_s >= head_dim`
/// over several rows): an input may repeat a head (`stride_h = 0`) or a batch, never rows
/// within a head, so every per-head size is bounded by the buffer.
pub(crate) fn check_buffer(
    operand: &'static str,
    shape: &HeadsShape,
    len: usize,
) -> Result<(), Error> {
    let needed = shape.required_len().ok_or(Error::InvalidArgument(format!(
        "{operand}: its view's extent overflows usize"
    )))?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    if shape.seq > 1 && shape.stride_s < shape.head_dim {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.stride_s,
            min: shape.head_dim,
        });
    }
    Ok(())
}

/// The facts attention's rules read (`rules/attention.toml`, generated into
/// `super::rules`): the four views' dims, their element type, where they are, the mask's and
/// the layout's dims.
pub(crate) fn facts(
    [q, k, v, o]: [&HeadsShape; 4],
    mask: Option<MaskDims>,
    layout: LayoutDims,
    dtype: DType,
    device: bool,
    backend: Backend,
) -> Facts {
    let m = mask.unwrap_or(MaskDims {
        block_q: 0,
        block_k: 0,
        q_blocks: 0,
        k_blocks: 0,
        patterns: 0,
        heads: None,
    });
    let (mask_batch, mask_heads) = m.heads.unwrap_or((0, 0));
    Facts {
        batch: int(q.batch),
        heads: int(q.heads),
        seq_q: int(q.seq),
        head_dim: int(q.head_dim),
        k_batch: int(k.batch),
        k_heads: int(k.heads),
        seq_k: int(k.seq),
        k_head_dim: int(k.head_dim),
        v_batch: int(v.batch),
        v_heads: int(v.heads),
        v_seq: int(v.seq),
        v_head_dim: int(v.head_dim),
        o_batch: int(o.batch),
        o_heads: int(o.heads),
        o_seq: int(o.seq),
        o_head_dim: int(o.head_dim),
        q: dtype,
        k: dtype,
        v: dtype,
        o: dtype,
        device,
        backend,
        has_mask: mask.is_some(),
        block_q: int(m.block_q),
        block_k: int(m.block_k),
        q_blocks: int(m.q_blocks),
        k_blocks: int(m.k_blocks),
        patterns: int(m.patterns),
        made_for: m.heads.is_some(),
        mask_batch: int(mask_batch),
        mask_heads: int(mask_heads),
        layout: layout.any(),
        varlen_q: layout.varlen_q,
        varlen_k: layout.varlen_k,
        seqlens_k: layout.seqlens_k,
        paged: layout.paged,
        layout_batch: int(layout.batch),
        max_pages: int(layout.max_pages),
        max_seqlen_q: int(layout.max_seqlen_q),
        max_seqlen_k: int(layout.max_seqlen_k),
        page_size: int(layout.page_size),
    }
}

/// The one validation of the entry, for every backend: the table's shapes (the views' dims
/// agree, K and V's heads dividing Q's, the mask and the layout fit them), then what only
/// Rust's operands carry (buffers hold their views and the layout's arrays their entries, O
/// does not overlap itself, LSE's length, the scale as Rust gives it), then the table's
/// element types (`device`: the operands are on the device).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_operands(
    [q, k, v, o]: [&HeadsShape; 4],
    lens: [usize; 4],
    lse_len: Option<usize>,
    mask: Option<MaskDims>,
    layout: &SequenceLayout<'_>,
    opts: &AttentionOptions,
    dtype: DType,
    device: bool,
) -> Result<(), Error> {
    let facts = facts(
        [q, k, v, o],
        mask,
        layout.dims(),
        dtype,
        device,
        opts.get_backend(),
    );
    rules::shapes(&facts)?;
    layout.check_lengths()?;
    for (operand, shape, len) in [
        ("Q", q, lens[0]),
        ("K", k, lens[1]),
        ("V", v, lens[2]),
        ("O", o, lens[3]),
    ] {
        check_buffer(operand, shape, len)?;
    }
    // O's writes must not race: no two of its elements may share an address. (In safe Rust
    // an output cannot alias an input: `&mut` against `&`.)
    if !o.is_disjoint() {
        return Err(Error::Overlap {
            output: "O",
            other: "O",
        });
    }
    if let Some(len) = lse_len {
        let needed = q
            .batch
            .checked_mul(q.heads)
            .and_then(|x| x.checked_mul(q.seq))
            .ok_or(Error::InvalidArgument(
                "batch * heads * seq_q overflows".into(),
            ))?;
        if len < needed {
            return Err(Error::BufferTooSmall {
                operand: "LSE",
                needed,
                got: len,
            });
        }
    }
    // The scale as Rust gives it (None: the default 1/sqrt(head_dim), which C++ says with 0).
    let scale = opts.get_scale(q.head_dim);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "scale = {scale}: must be finite and > 0"
        )));
    }
    rules::types(&facts)
}

/// The dims of a mask (host or device) that an attention problem is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaskDims {
    pub block_q: usize,
    pub block_k: usize,
    pub q_blocks: usize,
    pub k_blocks: usize,
    pub patterns: usize,
    pub heads: Option<(usize, usize)>,
}

/// The dims check of [`BlockPatterns::check_dims_grouped`], for the host and the device
/// patterns: `(batch, heads of Q, heads of K, seq_q, seq_k)`. The table's rules
/// (`rules/attention.toml`) on a problem of those dims whose views agree.
pub(crate) fn check_mask_dims(
    mask: MaskDims,
    (batch, heads, kv_heads, seq_q, seq_k): (usize, usize, usize, usize, usize),
) -> Result<(), Error> {
    let view = |heads, seq| HeadsShape::packed(batch, heads, seq, 1);
    let (q, kv) = (view(heads, seq_q), view(kv_heads, seq_k));
    rules::shapes(&facts(
        [&q, &kv, &kv, &q],
        Some(mask),
        LayoutDims::default(),
        DType::F16,
        false,
        Backend::Auto,
    ))
}
