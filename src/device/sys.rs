//! The raw seam to C++ (the `cxx` bridge; each operation's half in
//! `cpp/<operation>/bridge.h` and `bridge.cc`) and every `unsafe` block of sparsek's library.
//!
//! One problem description crosses the seam: [`SpmmProblem`], whose enums *are*
//! `sparsek::DType`, `Layout`, `Backend` and `Status` of include/sparsek/sparsek.hpp (and
//! attention's `CausalAlignment` of include/sparsek/attention.hpp; the one definition): cxx
//! emits a `static_assert` for every value declared here, so a value that disagrees with the
//! C++ header fails the build. Problems are composed of the same
//! descriptors (`DenseDesc`, `BsrDesc`, `HeadsDesc`) and carry a `Mode` (select or
//! launch): one entry per operation. Checking and converting statuses into `Error`s is
//! `result.rs`'s job; functions here only extract device pointers on the launch stream and
//! call C++.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

#[cxx::bridge(namespace = "sparsek")]
#[allow(clippy::upper_case_acronyms)]
mod ffi {
    /// Element types (`sparsek::DType`).
    #[repr(i32)]
    enum DType {
        F16 = 0,
        BF16 = 1,
        F32 = 2,
        E4M3 = 3,
        E5M2 = 4,
    }

    /// How an FP8 operand's values scale (`sparsek::ScaleKind`): value = stored * scale.
    #[repr(i32)]
    enum ScaleKind {
        None = 0,
        PerTensor = 1,
        PerBlock = 2,
        PerColumn = 3,
    }

    /// Storage orders (`sparsek::Layout`).
    #[repr(i32)]
    enum Layout {
        RowMajor = 0,
        ColMajor = 1,
    }

    /// Kernel families (`sparsek::Backend`).
    #[repr(i32)]
    enum Backend {
        Auto = 0,
        Wmma = 1,
        Hopper = 2,
        Decode = 3,
    }

    /// Where attention's causal diagonal sits (`sparsek::CausalAlignment`).
    #[repr(i32)]
    enum CausalAlignment {
        TopLeft = 0,
        BottomRight = 1,
    }

    /// Activations of the fused epilogue (`sparsek::Activation`).
    #[repr(i32)]
    enum Activation {
        None = 0,
        Relu = 1,
        GeluTanh = 2,
        Silu = 3,
    }

    /// Outcomes (`sparsek::Status`).
    #[repr(i32)]
    enum Status {
        Success = 0,
        InvalidArgument = 1,
        NotSupported = 2,
        CudaError = 3,
        PendingCudaError = 4,
    }

    /// Select: pick the kernel row and report it, read no device memory, launch nothing;
    /// Launch: pick it and enqueue it on the problem's stream. One field of every problem,
    /// so each operation has one entry across the seam.
    #[namespace = "sparsek::ffi"]
    #[repr(i32)]
    enum Mode {
        Select = 0,
        Launch = 1,
    }

    /// A dense matrix view on the device: `rows x cols`, leading dimension `ld` (elements).
    #[namespace = "sparsek::ffi"]
    struct DenseDesc {
        data: u64,
        rows: i64,
        cols: i64,
        ld: i64,
        layout: Layout,
        dtype: DType,
        /// FP8 values' scales (f32 device values, 0 with `ScaleKind::None`).
        scales: u64,
        scale_kind: ScaleKind,
    }

    /// A BSR matrix on the device: `m x k` in `bm x bk` blocks, its three arrays. `scales`
    /// (FP8 values' f32 scales by `scale_kind`; 0 with `ScaleKind::None`) and `batch` /
    /// `batch_stride` (1 / 0: one matrix; the room the batched products take, refused today).
    #[namespace = "sparsek::ffi"]
    struct BsrDesc {
        m: i64,
        k: i64,
        bm: i32,
        bk: i32,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
        values: u64,
        dtype: DType,
        scales: u64,
        scale_kind: ScaleKind,
        batch: i64,
        batch_stride: i64,
        /// `DeviceBsr::is_settled` (C++ `BsrView::settled`): no kernel still running writes
        /// the arrays.
        settled: bool,
    }

    /// One product, validated by the Rust entry point (`crate::spmm`); C++ turns it into
    /// its checked `detail::Problem` without re-validating. Pointers are device addresses.
    #[namespace = "sparsek::ffi"]
    struct SpmmProblem {
        a: BsrDesc,
        b: DenseDesc,
        c: DenseDesc,
        alpha: f32,
        beta: f32,
        backend: Backend,
        bias: u64,
        activation: Activation,
        /// op(A) = Aᵀ: B is `m x n`, C `k x n`, and A is read through its transpose index
        /// (`t_col_ptr`, `t_row_idx`, `t_block_id`, device addresses; zero otherwise).
        transpose_a: bool,
        t_col_ptr: u64,
        t_row_idx: u64,
        t_block_id: u64,
        /// The gated (GLU) epilogue (`Epilogue::gated`): A's block-rows are (gate, up) pairs,
        /// C has `m/2` rows.
        gated: bool,
        stream: u64,
        mode: Mode,
    }

    /// One SDDMM `S = α·(A·B) ⊙ mask + β·S`, validated by the Rust entry point
    /// (`crate::sddmm`): A `m x k`, B `k x n`, S `m x n` in `bm x bn` blocks (its values
    /// written). Pointers are device addresses.
    #[namespace = "sparsek::ffi"]
    struct SddmmProblem {
        a: DenseDesc,
        b: DenseDesc,
        s: BsrDesc,
        alpha: f32,
        beta: f32,
        backend: Backend,
        stream: u64,
        mode: Mode,
    }

    /// One `[batch, heads, seq, head_dim]` tensor of an attention problem: its device
    /// address and strides in elements (head_dim contiguous).
    #[namespace = "sparsek::ffi"]
    struct HeadsDesc {
        data: u64,
        batch: i64,
        heads: i64,
        seq: i64,
        head_dim: i64,
        stride_b: i64,
        stride_h: i64,
        stride_s: i64,
    }

    /// The serving layout of an attention forward (`sparsek::SequenceLayout`): device
    /// addresses of its `i32` arrays (0: off) and its counts.
    #[namespace = "sparsek::ffi"]
    struct LayoutDesc {
        cu_seqlens_q: u64,
        cu_seqlens_k: u64,
        seqlens_k: u64,
        page_table: u64,
        max_pages: i64,
        batch: i64,
        max_seqlen_q: i64,
        max_seqlen_k: i64,
    }

    /// One attention forward, validated by the Rust entry point (`crate::attention`): Q, K,
    /// V, O of one dtype, the LSE (`batch*heads*seq_q` floats, or 0), the optional stacked
    /// block mask, the serving layout (and whether its arrays are checked on the device
    /// before the launch). Pointers are device addresses.
    #[namespace = "sparsek::ffi"]
    struct AttentionProblem {
        q: HeadsDesc,
        k: HeadsDesc,
        v: HeadsDesc,
        o: HeadsDesc,
        dtype: DType,
        lse: u64,
        has_mask: bool,
        block_q: i32,
        block_k: i32,
        q_blocks: i64,
        k_blocks: i64,
        patterns: i64,
        nnzb: i64,
        /// The (batch, heads) a per-head mask was made for (0, 0 when not recorded).
        mask_batch: i64,
        mask_heads: i64,
        row_ptr: u64,
        col_idx: u64,
        causal: bool,
        causal_alignment: CausalAlignment,
        layout: LayoutDesc,
        check_indices: bool,
        scale: f32,
        backend: Backend,
        stream: u64,
        mode: Mode,
    }

    /// One top-k gating launch, validated by the Rust entry point (`gpu::block_topk*`):
    /// scores pooled from Q and K (`pooled`) or given (`scores`, device floats); the output
    /// arrays `row_ptr` (`batch*heads*q_blocks + 1`) and `col_idx` (`nnzb`).
    #[namespace = "sparsek::ffi"]
    struct GatingProblem {
        pooled: bool,
        q: HeadsDesc,
        k: HeadsDesc,
        dtype: DType,
        scores: u64,
        batch: i64,
        heads: i64,
        seq_q: i64,
        seq_k: i64,
        top_k: i32,
        causal: bool,
        causal_alignment: CausalAlignment,
        block_q: i32,
        block_k: i32,
        q_blocks: i64,
        k_blocks: i64,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
        stream: u64,
    }

    /// One FP8 quantization of a BSR matrix's values, validated by the Rust entry point
    /// (`DeviceBsr::quantize_fp8_from`): `nnzb * block_len` values of `dtype` at `values`
    /// into as many of `out_dtype` at `out` and the scales (`nnzb` or 1 f32) at `scales`.
    #[namespace = "sparsek::ffi"]
    struct QuantizeProblem {
        values: u64,
        dtype: DType,
        nnzb: i64,
        block_len: i64,
        out: u64,
        out_dtype: DType,
        scales: u64,
        granularity: ScaleKind,
        stream: u64,
    }

    /// The outcome, and the family and variant that ran (or would run).
    #[namespace = "sparsek::ffi"]
    struct FfiStatus {
        status: Status,
        message: String,
        backend: Backend,
        variant: String,
    }

    unsafe extern "C++" {
        include!("sparsek/sparsek.hpp");
        include!("sparsek/attention.hpp");
        include!("sparsek/cpp/spmm/bridge.h");
        include!("sparsek/cpp/sddmm/bridge.h");
        include!("sparsek/cpp/attention/bridge.h");
        include!("sparsek/cpp/quantize/bridge.h");

        type DType;
        type Layout;
        type Backend;
        type Activation;
        type CausalAlignment;
        type Status;
        type ScaleKind;

        /// Selects a kernel variant and, with `Mode::Launch`, enqueues it on
        /// `problem.stream`. Unsafe: to launch, every pointer must address a live device
        /// allocation large enough for its view, and the BSR arrays must be valid.
        #[namespace = "sparsek::ffi"]
        unsafe fn spmm(problem: &SpmmProblem) -> FfiStatus;

        /// As `spmm`, for an SDDMM (S's index arrays valid).
        #[namespace = "sparsek::ffi"]
        unsafe fn sddmm(problem: &SddmmProblem) -> FfiStatus;

        /// As `spmm`, for attention (the mask's arrays valid).
        #[namespace = "sparsek::ffi"]
        unsafe fn attention(problem: &AttentionProblem) -> FfiStatus;

        /// Enqueues the top-k gating launch on `problem.stream`. Unsafe: every pointer must
        /// address a live device allocation large enough for its view.
        #[namespace = "sparsek::ffi"]
        unsafe fn block_topk(problem: &GatingProblem) -> FfiStatus;

        /// Enqueues the quantization on `problem.stream`. Unsafe: every pointer must address
        /// a live device allocation large enough for its view.
        #[namespace = "sparsek::ffi"]
        unsafe fn quantize_fp8(problem: &QuantizeProblem) -> FfiStatus;
    }
}

/// The seam's value of an element type (`sparsek::DType`).
pub(crate) fn dtype(t: crate::element::DType) -> DType {
    use crate::element::DType as T;
    match t {
        T::F16 => DType::F16,
        T::Bf16 => DType::BF16,
        T::F32 => DType::F32,
        T::E4M3 => DType::E4M3,
        T::E5M2 => DType::E5M2,
    }
}

pub(crate) use ffi::{
    Activation, AttentionProblem, Backend, BsrDesc, CausalAlignment, DType, DenseDesc, FfiStatus,
    GatingProblem, HeadsDesc, Layout, LayoutDesc, Mode, QuantizeProblem, ScaleKind, SddmmProblem,
    SpmmProblem, Status,
};

/// An output buffer of one call, and so its mode: written by a launch (`&mut`), or only
/// looked at (its address) by a selection. The one select-or-launch idiom of every
/// operation.
pub(crate) enum Output<'a, T> {
    /// Launch: the kernel writes it.
    Launch(&'a mut CudaSlice<T>),
    /// Select: nothing is read or written.
    Select(&'a CudaSlice<T>),
}

type Guard<'a> = cudarc::driver::SyncOnDrop<'a>;

impl<'a, T> Output<'a, T> {
    /// The mode, the device address on `stream` and the event guard (recorded once the
    /// call has enqueued its work, so other streams using the buffer wait for it).
    fn pointer(self, stream: &'a CudaStream) -> (Mode, u64, Guard<'a>) {
        match self {
            Output::Launch(buf) => {
                let (ptr, guard) = buf.device_ptr_mut(stream);
                (Mode::Launch, ptr, guard)
            }
            Output::Select(buf) => {
                let (ptr, guard) = buf.device_ptr(stream);
                (Mode::Select, ptr, guard)
            }
        }
    }
}

/// Read-only device addresses on `stream`, with their guards.
fn read<'a, T>(buf: &'a CudaSlice<T>, stream: &'a CudaStream, guards: &mut Vec<Guard<'a>>) -> u64 {
    let (ptr, guard) = buf.device_ptr(stream);
    guards.push(guard);
    ptr
}

/// A's transpose index on the device (`op(A) = Aᵀ`), read only.
pub(crate) struct TransposeBuffers<'a> {
    /// Block-column offsets (`k / bk + 1` entries).
    pub col_ptr: &'a CudaSlice<i32>,
    /// Block-row of each listed block (`nnzb` entries, at least 1 allocated).
    pub row_idx: &'a CudaSlice<i32>,
    /// Stored position of each listed block (`nnzb` entries, at least 1 allocated).
    pub block_id: &'a CudaSlice<i32>,
}

/// The device buffers of one product, all used on `stream`: A's values of type `TA`, B of
/// `TB` (both `T` but for the FP8 W8A16 kind), C of `O`, the bias of `V` (A's type, or C's
/// with an FP8 A).
pub(crate) struct SpmmBuffers<'a, TA, TB, O, V> {
    /// A's block-row offsets (`m / bm + 1` entries).
    pub row_ptr: &'a CudaSlice<i32>,
    /// A's block-columns (`nnzb` entries, at least 1 allocated).
    pub col_idx: &'a CudaSlice<i32>,
    /// A's block values (`nnzb * bm * bk` elements, at least 1 allocated).
    pub values: &'a CudaSlice<TA>,
    /// A's scales when `problem.a.scale_kind` is not `None` (1 or `nnzb` values, at least
    /// 1 allocated); a null pointer otherwise.
    pub a_scales: Option<&'a CudaSlice<f32>>,
    /// B, read only.
    pub b: &'a CudaSlice<TB>,
    /// B's scales when `problem.b.scale_kind` is not `None` (1 or `n` values, at least 1
    /// allocated); a null pointer otherwise.
    pub b_scales: Option<&'a CudaSlice<f32>>,
    /// C, written (and read when `β != 0`) by a launch.
    pub c: Output<'a, O>,
    /// The bias, one value per row of C, if any (passed as a null pointer otherwise).
    pub bias: Option<&'a CudaSlice<V>>,
    /// A's transpose index when `problem.transpose_a`.
    pub transpose: Option<TransposeBuffers<'a>>,
}

/// Fills the pointers and mode of `problem` from `bufs` and selects, or enqueues on
/// `stream`, its kernel.
///
/// The caller (`spmm::gpu`) has validated the scalar fields of `problem` against the
/// buffers: B and C hold their views, and `row_ptr`/`col_idx`/`values` come from a
/// `DeviceBsr`, which holds only validated BSR arrays.
pub(crate) fn spmm<TA, TB, O, V>(
    mut problem: SpmmProblem,
    bufs: SpmmBuffers<'_, TA, TB, O, V>,
    stream: &CudaStream,
) -> FfiStatus {
    let mut guards = Vec::new();
    problem.a.row_ptr = read(bufs.row_ptr, stream, &mut guards);
    problem.a.col_idx = read(bufs.col_idx, stream, &mut guards);
    problem.a.values = read(bufs.values, stream, &mut guards);
    problem.b.data = read(bufs.b, stream, &mut guards);
    // Null exactly with ScaleKind::None (the C++ validation's rule): the caller passes the
    // buffer with the kind.
    if let Some(s) = bufs.a_scales {
        problem.a.scales = read(s, stream, &mut guards);
    }
    if let Some(s) = bufs.b_scales {
        problem.b.scales = read(s, stream, &mut guards);
    }
    if let Some(bias) = bufs.bias {
        problem.bias = read(bias, stream, &mut guards);
    }
    if let Some(t) = &bufs.transpose {
        problem.t_col_ptr = read(t.col_ptr, stream, &mut guards);
        problem.t_row_idx = read(t.row_idx, stream, &mut guards);
        problem.t_block_id = read(t.block_id, stream, &mut guards);
    }
    let (mode, c, _c) = bufs.c.pointer(stream);
    problem.c.data = c;
    problem.mode = mode;
    problem.stream = stream.cu_stream() as u64;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (C mutably
    // when it launches; a selection reads and writes nothing), sized for its view as
    // crate::spmm checked (B, C, the bias's m values, B's scales: 1 or n)
    // and as DeviceBsr's validating constructors guarantee (row_ptr, col_idx, values, its
    // scales: 1 or nnzb, and the transpose index DeviceBsr built from those validated
    // arrays); the dtypes and scale kinds in `problem` are those of these buffers (set
    // from their Rust types by spmm::gpu); every buffer belongs to the stream's context
    // (result::check_contexts), which spmm::gpu bound to this thread.
    unsafe { ffi::spmm(&problem) }
}

#[cfg(not(feature = "cuda-linked"))]
pub(crate) fn driver_present() -> bool {
    // SAFETY: only attempts to dlopen libcuda's candidate names; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// With `cuda-linked`, libcuda is a link-time dependency: a process running this has it.
#[cfg(feature = "cuda-linked")]
pub(crate) fn driver_present() -> bool {
    true
}

/// The device buffers of one SDDMM, all used on `stream`.
pub(crate) struct SddmmBuffers<'a, T, O> {
    /// A, read only.
    pub a: &'a CudaSlice<T>,
    /// B, read only.
    pub b: &'a CudaSlice<T>,
    /// S's block-row offsets.
    pub row_ptr: &'a CudaSlice<i32>,
    /// S's block-columns.
    pub col_idx: &'a CudaSlice<i32>,
    /// S's values, written by a launch.
    pub values: Output<'a, O>,
}

/// Fills the pointers and mode of `problem` from `bufs` and selects, or enqueues on
/// `stream`, its kernel. The caller (`sddmm::gpu`) validated the scalar fields against the
/// buffers.
pub(crate) fn sddmm<T, O>(
    mut problem: SddmmProblem,
    bufs: SddmmBuffers<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    let mut guards = Vec::new();
    problem.a.data = read(bufs.a, stream, &mut guards);
    problem.b.data = read(bufs.b, stream, &mut guards);
    problem.s.row_ptr = read(bufs.row_ptr, stream, &mut guards);
    problem.s.col_idx = read(bufs.col_idx, stream, &mut guards);
    let (mode, values, _s) = bufs.values.pointer(stream);
    problem.s.values = values;
    problem.mode = mode;
    problem.stream = stream.cu_stream() as u64;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (S's values
    // mutably when it launches), sized for its view as crate::sddmm checked (A, B) and as
    // DeviceBsr's validating constructors guarantee (row_ptr, col_idx, values); every
    // buffer belongs to the stream's context (result::check_contexts), which sddmm::gpu
    // bound to this thread.
    unsafe { ffi::sddmm(&problem) }
}

/// The device buffers of one attention forward, all used on `stream`.
pub(crate) struct AttentionBuffers<'a, T> {
    /// Q, K, V, read only.
    pub q: &'a CudaSlice<T>,
    pub k: &'a CudaSlice<T>,
    pub v: &'a CudaSlice<T>,
    /// O, written by a launch.
    pub o: Output<'a, T>,
    /// The LSE, written by a launch, if asked for.
    pub lse: Option<&'a mut CudaSlice<f32>>,
    /// The mask's `row_ptr` and `col_idx` (a `DeviceBlockPatterns`).
    pub mask: Option<(&'a CudaSlice<i32>, &'a CudaSlice<i32>)>,
    /// The layout's key counts, page table and packed sequences' offsets, read only.
    pub seqlens_k: Option<&'a CudaSlice<i32>>,
    pub page_table: Option<&'a CudaSlice<i32>>,
    pub cu_seqlens_q: Option<&'a CudaSlice<i32>>,
    pub cu_seqlens_k: Option<&'a CudaSlice<i32>>,
}

/// Fills the pointers and mode of `problem` from `bufs` and selects, or enqueues on
/// `stream`, its kernel. The caller (`attention::gpu`) validated the scalar fields against
/// the buffers.
pub(crate) fn attention<T>(
    mut problem: AttentionProblem,
    bufs: AttentionBuffers<'_, T>,
    stream: &CudaStream,
) -> FfiStatus {
    let mut guards = Vec::new();
    problem.q.data = read(bufs.q, stream, &mut guards);
    problem.k.data = read(bufs.k, stream, &mut guards);
    problem.v.data = read(bufs.v, stream, &mut guards);
    if let Some((row_ptr, col_idx)) = bufs.mask {
        problem.row_ptr = read(row_ptr, stream, &mut guards);
        problem.col_idx = read(col_idx, stream, &mut guards);
    }
    if let Some(s) = bufs.seqlens_k {
        problem.layout.seqlens_k = read(s, stream, &mut guards);
    }
    if let Some(t) = bufs.page_table {
        problem.layout.page_table = read(t, stream, &mut guards);
    }
    if let Some(c) = bufs.cu_seqlens_q {
        problem.layout.cu_seqlens_q = read(c, stream, &mut guards);
    }
    if let Some(c) = bufs.cu_seqlens_k {
        problem.layout.cu_seqlens_k = read(c, stream, &mut guards);
    }
    let (mode, o, _o) = bufs.o.pointer(stream);
    let _lse = bufs.lse.map(|l| {
        let (ptr, guard) = l.device_ptr_mut(stream);
        problem.lse = ptr;
        guard
    });
    problem.o.data = o;
    problem.mode = mode;
    problem.stream = stream.cu_stream() as u64;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (O and the
    // LSE mutably), sized for its view as attention::check checked; the mask arrays come
    // from a DeviceBlockPatterns (validated on upload, or written by the gating kernel with
    // the sizes it promises); the layout's arrays hold their entries (SequenceLayout's
    // check_lengths) and any values are safe (the kernels clamp them into the views); every
    // buffer belongs to the stream's context (result::check_contexts), bound to this thread.
    unsafe { ffi::attention(&problem) }
}

/// The device buffers of one gating launch.
pub(crate) struct GatingBuffers<'a, T> {
    /// Q and K when pooling (their views checked), else None.
    pub qk: Option<(&'a CudaSlice<T>, &'a CudaSlice<T>)>,
    /// The given scores when not pooling.
    pub scores: Option<&'a CudaSlice<f32>>,
    /// The output row offsets (`batch*heads*q_blocks + 1`).
    pub row_ptr: &'a mut CudaSlice<i32>,
    /// The output block columns (`nnzb`, at least 1 allocated).
    pub col_idx: &'a mut CudaSlice<i32>,
}

/// Fills the pointers of `problem` and enqueues the gating launch on `stream`.
///
/// The caller (`gpu::block_topk*`) has validated the dims against the buffers.
pub(crate) fn block_topk<T>(
    mut problem: GatingProblem,
    bufs: GatingBuffers<'_, T>,
    stream: &CudaStream,
) -> FfiStatus {
    let mut guards = Vec::new();
    if let Some((q, k)) = bufs.qk {
        problem.q.data = read(q, stream, &mut guards);
        problem.k.data = read(k, stream, &mut guards);
    }
    if let Some(scores) = bufs.scores {
        problem.scores = read(scores, stream, &mut guards);
    }
    let (row_ptr, _g0) = bufs.row_ptr.device_ptr_mut(stream);
    let (col_idx, _g1) = bufs.col_idx.device_ptr_mut(stream);
    problem.row_ptr = row_ptr;
    problem.col_idx = col_idx;
    problem.stream = stream.cu_stream() as u64;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (the output
    // arrays mutably) and sized as gpu::block_topk checked; every buffer belongs to the
    // stream's context (result::check_contexts; the outputs are allocated on it), bound to
    // this thread.
    unsafe { ffi::block_topk(&problem) }
}

/// Fills the pointers of `problem` and enqueues the quantization on `stream`: `values`
/// read, `out` and `scales` written.
///
/// The caller (`DeviceBsr::quantize_fp8_from`) has validated the counts against the buffers
/// and bound the stream's context to this thread.
pub(crate) fn quantize_fp8<T, Q>(
    mut problem: QuantizeProblem,
    values: &CudaSlice<T>,
    out: &mut CudaSlice<Q>,
    scales: &mut CudaSlice<f32>,
    stream: &CudaStream,
) -> FfiStatus {
    let (v, _g0) = values.device_ptr(stream);
    let (o, _g1) = out.device_ptr_mut(stream);
    let (s, _g2) = scales.device_ptr_mut(stream);
    problem.values = v;
    problem.out = o;
    problem.scales = s;
    problem.stream = stream.cu_stream() as u64;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (the outputs
    // mutably, so distinct from the input and each other) and sized as the caller checked
    // (`nnzb * block_len` values each, `nnzb` or 1 scales); every buffer belongs to the
    // stream's context (result::check_contexts), which the caller
    // (`DeviceBsr::quantize_fp8_from`) bound to this thread.
    unsafe { ffi::quantize_fp8(&problem) }
}
