//! sparsek's pruned layers and block-sparse attention as candle ops.
//!
//! - [`SparseLinear`] and [`SparseMlp`]: candle [`Module`](candle_core::Module)s over any
//!   `[.., in]` tensor (f16, bf16, f32; FP8 E4M3 weights with f16/bf16 activations), built
//!   from dense candle weights and a [`BlockMask`](sparsek::BlockMask), from the
//!   magnitude-pruning helpers ([`prune`]), or from sparsek's `BsrMatrix` / `DeviceBsr`.
//! - [`attention()`]: block-sparse attention on `[batch, heads, seq, d]` or `[batch, seq,
//!   heads, d]` tensors ([`QkvLayout`]) with GQA, causal alignment, varlen, a paged KV cache
//!   and decode, as sparsek's [`attention_with_layout`](sparsek::attention_with_layout)
//!   offers them.
//!
//! candle's CPU tensors run sparsek's CPU backend; CUDA tensors (`cuda` feature) run its
//! kernels on the tensor's own `CudaSlice` (no copy: candle 0.11 and sparsek share one
//! cudarc, so candle's storage *is* the buffer type sparsek takes; a second cudarc would not
//! type-check) and enqueue on candle's stream (the output is allocated by candle's device,
//! and sparsek launches on the output's stream). Nothing synchronizes the device.
//!
//! Each op validates before it launches: a tensor whose layout sparsek cannot read in place
//! is refused with [`Error::NotContiguous`] (its message names `.contiguous()`); a wrong
//! dtype, shape or device with its typed error. `try_*` functions return the typed
//! [`Error`]; the `Module` impls return it inside candle's error as a message.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod attention;
mod element;
mod error;
pub mod linear;
pub mod mlp;
pub mod prune;
mod storage;

pub use attention::{attention, AttentionMask, QkvLayout, SeqLayout};
pub use element::CandleElement;
pub use error::{Error, Result};
pub use linear::{SparseLinear, WeightFormat};
pub use mlp::SparseMlp;

/// The candle this crate is built and tested against (candle-core's exact version).
pub use candle_core;
/// sparsek, for its masks, options and formats.
pub use sparsek;

// candle's cudarc must be sparsek's: this coercion type-checks only when candle's CUDA stream
// is `sparsek::cudarc`'s type, so a candle on another cudarc is a compile error here (and in
// every op that hands candle's buffers to sparsek), never a failure at run time.
#[cfg(feature = "cuda")]
const _: fn(&candle_core::CudaDevice) -> std::sync::Arc<sparsek::cudarc::driver::CudaStream> =
    candle_core::CudaDevice::cuda_stream;

/// How many output buffers this crate's ops have asked candle for since the process
/// started (each op allocates its outputs and nothing else: no staging buffer, no copy).
/// The tests check the count an op adds.
pub fn allocations() -> u64 {
    storage::ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed)
}
