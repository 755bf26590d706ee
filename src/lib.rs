//! # sparsek
//!
//! Block-sparse × dense matrix multiplication, `C = α·A·B + β·C`, with `A` in BSR form
//! ([`BsrMatrix`]), `B` and `C` dense ([`Dense`], [`DenseMut`]), f16/bf16 inputs and f32
//! accumulation.
//!
//! Backends, chosen with [`SpmmOptions::backend`]:
//! - [`Backend::Cpu`]: the reference (and what runs without a GPU);
//! - [`Backend::Wmma`]: a tensor-core kernel for sm_80+ (`cuda` feature);
//! - [`Backend::Hopper`]: the Hopper path, TMA + WGMMA (`cuda` feature, sm_90a).
//!
//! ```
//! use half::f16;
//! use sparsek::{spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};
//!
//! // A: 128 x 256, 64x64 blocks, a causal block pattern.
//! let mask = BlockMask::from_fn(2, 4, |r, c| c <= r + 2)?;
//! let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(64, 64), |i, j| {
//!     f16::from_f32(((i * 7 + j) % 5) as f32 - 2.0)
//! })?;
//! let b = vec![f16::from_f32(0.5); 256 * 32];
//! let mut c = vec![0f32; 128 * 32];
//! spmm(
//!     &a,
//!     Dense::host(&b, 256, 32, Layout::RowMajor),
//!     DenseMut::host(&mut c, 128, 32, Layout::RowMajor),
//!     &SpmmOptions::new().alpha(2.0),
//! )?;
//! # Ok::<(), sparsek::Error>(())
//! ```
//!
//! Block-sparse attention: [`attention()`] / [`attention_into`] (`O = softmax(scale·Q·Kᵀ +
//! M)·V` and its log-sum-exp, the mask `M` a per-head block pattern ([`BlockPatterns`]),
//! causal (top-left or bottom-right: [`CausalAlignment`]), or both; grouped-query heads,
//! K and V with fewer heads than Q), with top-k key-block gating to build the pattern
//! ([`attention::gating`]); the CPU reference on host operands, the Hopper kernel on device
//! ones.
//!
//! FP8 is a dtype of the same products: [`spmm()`] / [`spmm_fused`] multiply an E4M3 or E5M2
//! A ([`F8E4M3`], [`F8E5M2`]) with its scales (per tensor or per block: a [`QuantizedBsr`],
//! [`BsrOperand::Scaled`], a `DeviceBsr`) by a B of the same FP8 type with its scales (per
//! tensor or per column, [`Dense::with_scales`]: W8A8) or an f16/bf16 B (W8A16), into f16,
//! bf16 or f32, the bias of C's type ([`TakesBias`]); [`SparseLinear`] and [`SparseMlp`]
//! take FP8 weights the same way. [`quantize`] holds the scales, the quantized operands and
//! the host quantizers ([`BsrMatrix::quantize_fp8`], [`QuantizedDense::quantize`]).
//!
//! Other entry points: [`BsrMatrix::from_csr`] and [`from_coo`](BsrMatrix::from_coo) for
//! matrices from elsewhere, [`SparseLinear`] for a pruned linear layer, and with the `cuda`
//! feature `DeviceBsr` and `gpu` (device operands; memory and streams are
//! [`cudarc`](https://docs.rs/cudarc)'s, re-exported as `sparsek::cudarc` so the versions
//! match). The random pattern builders take the `rand` crate sparsek re-exports as
//! [`sparsek::rand`](rand), whatever `rand` your crate uses.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, bottom up: a module uses modules of its own layer or of the layers below it,
// never of one above (rustfmt sorts each group by name).
//
// The ground: element types, errors, the BSR format, dense views and their scales,
// epilogues, options, and the checks the operations share.
mod check;
pub mod dense;
pub mod element;
pub mod epilogue;
pub mod error;
pub mod format;
pub mod options;
mod scale;

// The device layer (`cuda` feature): the cxx seam to the C++ registry, its checked calls,
// the device matrix. It names no operation.
#[cfg(feature = "cuda")]
mod device;

// The operations: each its entry point, its checks and its device path.
pub mod attention;
pub mod quantize;
mod sddmm;
pub mod spmm;

// Layers composed of operations.
pub mod linear;
pub mod mlp;
pub mod tp;

// The public faces, at the top: `gpu` and the re-exports below name items of the layers
// above; `quant` is `quantize` under its former name.
#[cfg(feature = "cuda")]
pub mod gpu {
    //! The GPU backends (`cuda` feature): device operands ([`DeviceBsr`] with its
    //! [`DeviceBlockScales`], [`DeviceBlockPatterns`]), which kernel would run a product or
    //! why none can ([`can_implement`], any element type; [`can_implement_sddmm`]),
    //! top-k gating on the device ([`block_topk`], [`block_topk_scores`]), and
    //! [`open_device`]. Device memory and streams are cudarc's (re-exported as
    //! [`sparsek::cudarc`](crate::cudarc)): bring your `CudaContext`/`CudaStream`, upload with
    //! [`DeviceBsr::upload`] (or take buffers already on the GPU with
    //! [`DeviceBsr::from_device_parts`]), wrap B and C with `Dense::device`/`DenseMut::device`.
    //!
    //! This module only names them: they live in the device layer (`src/device/`) and in each
    //! operation's device path (`spmm/gpu.rs`, `sddmm/gpu.rs`, `attention/gpu.rs`).
    //!
    //! ```no_run
    //! use sparsek::gpu;
    //!
    //! match gpu::open_device() {
    //!     Ok(ctx) => println!("GPU: {}", ctx.name()?),
    //!     Err(why) => println!("no GPU ({why}): use host operands (Backend::Cpu)"),
    //! }
    //! # Ok::<(), sparsek::cudarc::driver::DriverError>(())
    //! ```

    pub use crate::attention::gpu::{block_topk, block_topk_scores, DeviceBlockPatterns};
    pub use crate::device::{open_device, DeviceBlockScales, DeviceBsr, CUTLASS_VERSION};
    pub use crate::sddmm::gpu::can_implement_sddmm;
    pub use crate::spmm::gpu::can_implement;
    #[allow(deprecated)]
    pub use crate::spmm::gpu::can_implement_fp8;
}

/// The FP8 scales, quantized operands and quantizers under their former name: the module is
/// now [`quantize`], the name the C++ API uses (`sparsek::quantize_fp8`, cpp/quantize).
/// Each item is a deprecated alias (a deprecated module alone warns at no use of it).
#[deprecated(since = "0.1.1", note = "renamed `sparsek::quantize`")]
pub mod quant {
    macro_rules! renamed {
        ($($name:ident $(<$($param:tt),+>)?),+) => {$(
            #[doc = concat!("[`crate::quantize::", stringify!($name), "`] under the former path.")]
            #[deprecated(
                since = "0.1.1",
                note = "renamed `sparsek::quantize`; `sparsek::quant` goes in the next release"
            )]
            pub type $name$(<$($param),+>)? = crate::quantize::$name$(<$($param),+>)?;
        )+};
    }
    renamed!(
        BlockGranularity,
        BlockScales,
        ColumnGranularity,
        ColumnScales<'a>,
        QuantizedBsr<Q>,
        QuantizedDense<Q>,
        ScaleKind
    );
}

pub use attention::{
    attention, attention_into, attention_with_layout, AttentionOptions, BlockPatterns,
    CausalAlignment, Heads, HeadsMut, HeadsShape, IndexArray, LseMut, MaskOperand, PageTable,
    SequenceLayout, TopkOptions,
};
pub use dense::{Dense, DenseMut, DenseShape, Layout};
pub use element::{DType, Element, Fp8, TakesB, TakesBias, F8E4M3, F8E5M2};
pub use epilogue::{Activation, Epilogue, Vector};
pub use error::{BsrError, Error};
pub use format::{
    balanced_ranges, equal_ranges, validate_parts, BlockMask, BlockRow, BlockShape, BsrMatrix,
    ShardAxis, Shards, TransposeIndex, MAX_SHARDS,
};
#[cfg(feature = "cuda")]
pub use gpu::{DeviceBlockPatterns, DeviceBlockScales, DeviceBsr};
pub use half::{bf16, f16};
pub use linear::SparseLinear;
pub use mlp::{interleave_bias, MlpBias, SparseMlp};
pub use options::{Backend, SpmmOptions};
pub use quantize::{
    BlockGranularity, BlockScales, ColumnGranularity, ColumnScales, QuantizedBsr, QuantizedDense,
    ScaleKind,
};
pub use sddmm::{sddmm, BsrOperandMut};
pub use spmm::{dense_spmm, spmm, spmm_fused, BsrOperand, HostWeight, SparseWeight};
#[allow(deprecated)]
pub use spmm::{spmm_fp8, Fp8Operand};

/// Whether this build has the GPU backends (the `cuda` feature).
pub const HAS_CUDA: bool = cfg!(feature = "cuda");

/// The `rand` sparsek's random pattern builders take (`BlockMask::random`, ...): use it
/// for their generator, so its version always matches.
pub use rand;

/// The `cudarc` sparsek's device types are built on (`CudaContext`, `CudaStream`,
/// `CudaSlice`): use it, so its version and features always match.
#[cfg(feature = "cuda")]
pub use cudarc;

// The README's Rust examples, compiled as doctests (build.rs writes the copy; the blocks
// that need the `cuda` feature are marked `ignore` when it is off).
#[cfg(doctest)]
#[doc = include_str!(concat!(env!("OUT_DIR"), "/README.doctest.md"))]
pub struct ReadmeDoctests;
