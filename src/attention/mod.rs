//! Block-sparse attention (forward) and top-k key-block gating.
//!
//! `O = softmax(scale·Q·Kᵀ + M)·V` per (batch, head), with the rows' log-sum-exp
//! `LSE[i] = ln Σ_j exp(scale·q_i·k_j + M_ij)`. Q, K, V and O are `[batch, heads, seq,
//! head_dim]` views ([`Heads`], [`HeadsMut`]) with any batch, head and row strides
//! (`head_dim` contiguous): packed, or `[batch, seq, heads, head_dim]` as a fused QKV
//! projection stores them.
//!
//! Grouped-query attention (GQA; MQA with one KV head): K and V may have fewer heads than Q,
//! `heads_kv` dividing Q's `heads` ([`Error::HeadGroups`] otherwise); query head `h` reads
//! KV head `h / (heads / heads_kv)`, consecutive query heads sharing one KV head (PyTorch's
//! `enable_gqa`, `repeat_interleave` of K and V). O and the LSE have Q's heads.
//!
//! The mask `M` is 0 on kept (query, key) pairs, `-inf` elsewhere:
//! - a block mask, [`BlockPatterns`]: query block `i` (rows `i·block_q ..`) keeps key block
//!   `j` when `j` is listed in row `i` of its pattern (one pattern for every head, one per
//!   (batch, query head), or one per (batch, KV head) that the group's query heads share);
//! - [`causal`](AttentionOptions::causal): query `i` keeps key `j` only when `j <= i +
//!   offset`, the offset 0 ([`CausalAlignment::TopLeft`], the default, as PyTorch's
//!   `is_causal`) or `seq_k - seq_q` ([`CausalAlignment::BottomRight`]: the last query sees
//!   the last key, as a KV cache needs);
//! - or both. A query row that keeps no key gets `O = 0` and `LSE = -inf`.
//!
//! Sequences need not be multiples of the blocks (the last blocks are partial). Host operands
//! run the CPU reference (f32 accumulation, [`Backend::Cpu`]); device operands the Hopper
//! kernel (`gpu` module: 128×128 mask blocks, head_dim 64 or 128, f16/bf16).
//!
//! Top-k gating ([`gating`]) builds a [`BlockPatterns`] from block scores, on the CPU here
//! and on the device with `gpu::block_topk` (the same bits).
//!
//! ```
//! use sparsek::{attention, bf16, AttentionOptions, BlockMask, BlockPatterns, Heads};
//!
//! let (batch, heads, seq, d) = (1, 2, 200, 64);
//! let x: Vec<bf16> = (0..batch * heads * seq * d).map(|i| bf16::from_f32((i % 7) as f32 * 0.1)).collect();
//! let q = Heads::host(&x, batch, heads, seq, d);
//! // Two query blocks of 128 (the second partial): block 1 skips key block 0.
//! let mask = BlockPatterns::from_block_masks(128, 128, &[BlockMask::from_fn(2, 2, |r, c| r == 0 || c == 1)?])?;
//! let (o, lse) = attention(q, Heads::host(&x, batch, heads, seq, d), Heads::host(&x, batch, heads, seq, d),
//!                          Some(&mask), &AttentionOptions::new().causal(true))?;
//! assert_eq!(o.len(), x.len());
//! // Causal and the mask leave rows 128..199 keys 128..=i only: every row keeps something.
//! assert!(lse.iter().all(|l| l.is_finite()));
//! # Ok::<(), sparsek::Error>(())
//! ```

mod check;
mod cpu;
pub mod gating;
pub(crate) mod gating_rules;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
mod heads;
mod layout;
mod options;
mod patterns;
pub(crate) mod rules;

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::check::refuse_fp8;
use crate::dense::{Storage, StorageMut};
use crate::element::Element;
use crate::error::Error;
use crate::options::Backend;
use check::check_operands;

pub use gating::{block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb, TopkOptions};
pub use heads::{Heads, HeadsMut, HeadsShape};
pub use layout::{IndexArray, PageTable, SequenceLayout};
pub use options::{AttentionOptions, CausalAlignment};
pub use patterns::BlockPatterns;

/// The mask operand: host patterns (CPU) or device patterns (GPU).
pub enum MaskOperand<'a> {
    /// Patterns in host memory.
    Host(&'a BlockPatterns),
    /// Patterns in device memory.
    #[cfg(feature = "cuda")]
    Device(&'a gpu::DeviceBlockPatterns),
}

impl<'a> From<&'a BlockPatterns> for MaskOperand<'a> {
    fn from(p: &'a BlockPatterns) -> Self {
        MaskOperand::Host(p)
    }
}

#[cfg(feature = "cuda")]
impl<'a> From<&'a gpu::DeviceBlockPatterns> for MaskOperand<'a> {
    fn from(p: &'a gpu::DeviceBlockPatterns) -> Self {
        MaskOperand::Device(p)
    }
}

/// The LSE output (`batch·heads·seq_q` floats, `[batch, heads, seq_q]` packed).
pub enum LseMut<'a> {
    /// Host floats.
    Host(&'a mut [f32]),
    /// Device floats.
    #[cfg(feature = "cuda")]
    Device(&'a mut CudaSlice<f32>),
}

impl LseMut<'_> {
    fn len(&self) -> usize {
        match self {
            LseMut::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            LseMut::Device(s) => s.len(),
        }
    }
}
/// Attention into `o` (and `lse` when given) on any backend: host operands run the CPU
/// reference, device operands (and a device mask) the GPU kernel on O's stream. Every check
/// runs first; on an error nothing is written. FP8 elements ([`F8E4M3`](crate::F8E4M3),
/// [`F8E5M2`](crate::F8E5M2)) are [`Error::UnsupportedTypes`] on every backend: their values
/// mean `stored * scale`, and attention takes no scales. The padded batch: for packed
/// (variable-length) sequences, per-sequence key counts and paged K/V,
/// [`attention_with_layout`].
pub fn attention_into<T: Element>(
    q: Heads<'_, T>,
    k: Heads<'_, T>,
    v: Heads<'_, T>,
    o: HeadsMut<'_, T>,
    lse: Option<LseMut<'_>>,
    mask: Option<MaskOperand<'_>>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    attention_with_layout(q, k, v, o, lse, mask, &SequenceLayout::padded(), opts)
}

/// [`attention_into`] over a serving layout ([`SequenceLayout`]: sequences packed along seq
/// by cumulative lengths, each sequence's key count, K and V read through a [`PageTable`]).
/// The layout's arrays are where the operands are (host slices with host operands, device
/// buffers with device operands: [`Error::MixedLocations`] otherwise); its rules are checked
/// with the views' (packed Q, K of batch 1 whose seq is the total, a page table needs the key
/// counts, K and V's batch is then the pool's pages and their seq the page size, a mask's
/// blocks count from `max_seqlen_q` / `max_seqlen_k`, ...). Host values are always checked
/// (offsets that disagree with the packed total: [`Error::InvalidArgument`]); device values
/// with [`AttentionOptions::check_indices`]. With packed queries the LSE is `[heads,
/// total_q]`.
#[allow(clippy::too_many_arguments)]
pub fn attention_with_layout<T: Element>(
    q: Heads<'_, T>,
    k: Heads<'_, T>,
    v: Heads<'_, T>,
    o: HeadsMut<'_, T>,
    lse: Option<LseMut<'_>>,
    mask: Option<MaskOperand<'_>>,
    layout: &SequenceLayout<'_>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    let mask_dims = mask.as_ref().map(|m| match m {
        MaskOperand::Host(p) => p.dims(),
        #[cfg(feature = "cuda")]
        MaskOperand::Device(p) => p.dims(),
    });
    // FP8 values mean `stored * scale`, and attention takes no scales: refused on every
    // backend with the products' error (the table's types; the device takes f16/bf16 alone).
    check_operands(
        [&q.shape, &k.shape, &v.shape, &o.shape],
        [q.data.len(), k.data.len(), v.data.len(), o.data.len()],
        lse.as_ref().map(LseMut::len),
        mask_dims,
        layout,
        opts,
        T::DTYPE,
        !matches!(q.data, Storage::Host(_)),
    )?;
    let backend = opts.get_backend();
    match (&q.data, &k.data, &v.data, o.data) {
        (Storage::Host(qd), Storage::Host(kd), Storage::Host(vd), StorageMut::Host(od)) => {
            if !matches!(backend, Backend::Auto | Backend::Cpu) {
                return Err(Error::BackendUnavailable {
                    backend,
                    reason: "operands are on the host".into(),
                });
            }
            let lse = match lse {
                None => None,
                Some(LseMut::Host(l)) => Some(l),
                #[cfg(feature = "cuda")]
                Some(LseMut::Device(_)) => {
                    return Err(Error::MixedLocations("host Q, K, V, O with a device LSE"))
                }
            };
            let mask = match mask {
                None => None,
                Some(MaskOperand::Host(p)) => Some(p),
                #[cfg(feature = "cuda")]
                Some(MaskOperand::Device(_)) => {
                    return Err(Error::MixedLocations("host Q, K, V, O with a device mask"))
                }
            };
            if !layout.on_host() {
                return Err(Error::MixedLocations(
                    "host Q, K, V, O with a device layout array",
                ));
            }
            let keys = layout.host_keys(k.shape.batch)?;
            let packed = layout.host_packed(q.shape.seq, k.shape.seq)?;
            cpu::attention(
                cpu::Operands {
                    q: (qd, &q.shape),
                    k: (kd, &k.shape),
                    v: (vd, &v.shape),
                    o: (od, &o.shape),
                },
                lse,
                mask,
                keys,
                packed,
                opts,
            )
        }
        #[cfg(feature = "cuda")]
        (Storage::Device(_), Storage::Device(_), Storage::Device(_), StorageMut::Device(od)) => {
            let lse = match lse {
                None => None,
                Some(LseMut::Device(l)) => Some(l),
                Some(LseMut::Host(_)) => {
                    return Err(Error::MixedLocations("device Q, K, V, O with a host LSE"))
                }
            };
            let mask = match mask {
                None => None,
                Some(MaskOperand::Device(p)) => Some(p),
                Some(MaskOperand::Host(_)) => return Err(Error::MixedLocations(
                    "device Q, K, V, O with a host mask (upload it: DeviceBlockPatterns::upload)",
                )),
            };
            if !layout.on_device() {
                return Err(Error::MixedLocations(
                    "device Q, K, V, O with a host layout array (upload it)",
                ));
            }
            gpu::run_attention(
                gpu::AttentionOperands {
                    q: &q,
                    k: &k,
                    v: &v,
                    o: (od, o.shape),
                    lse,
                    mask,
                    layout,
                },
                opts,
            )
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "Q, K, V and O must all be on the host or all on the device",
        )),
    }
}

/// Attention of host operands, allocating the outputs: `(O, LSE)`, O packed `[batch, heads,
/// seq_q, head_dim]`, LSE `[batch, heads, seq_q]`. The CPU reference.
pub fn attention<T: Element>(
    q: Heads<'_, T>,
    k: Heads<'_, T>,
    v: Heads<'_, T>,
    mask: Option<&BlockPatterns>,
    opts: &AttentionOptions,
) -> Result<(Vec<T>, Vec<f32>), Error> {
    let s = q.shape;
    // The inputs' buffers and type first: nothing is allocated for a call refused anyway.
    for (operand, h) in [("Q", &q), ("K", &k), ("V", &v)] {
        check::check_buffer(operand, &h.shape, h.data.len())?;
    }
    refuse_fp8::<T, T>(opts.get_backend())?;
    let o_len = HeadsShape::packed(s.batch, s.heads, s.seq, s.head_dim)
        .required_len()
        .ok_or(Error::InvalidArgument("O's size overflows usize".into()))?;
    let lse_len = s
        .batch
        .checked_mul(s.heads)
        .and_then(|x| x.checked_mul(s.seq))
        .ok_or(Error::InvalidArgument(
            "batch * heads * seq_q overflows".into(),
        ))?;
    let mut o = crate::format::try_vec("O", o_len)?;
    o.resize(o_len, T::default());
    let mut lse = crate::format::try_vec("LSE", lse_len)?;
    lse.resize(lse_len, 0.0f32);
    attention_into(
        q,
        k,
        v,
        HeadsMut::host(&mut o, s.batch, s.heads, s.seq, s.head_dim),
        Some(LseMut::Host(&mut lse)),
        mask.map(MaskOperand::Host),
        opts,
    )?;
    Ok((o, lse))
}
