//! The raw seam to C++ (the `cxx` bridge to cpp/bridge.cc) and every `unsafe` block of
//! sparsek's library.
//!
//! One problem description crosses the seam: [`SpmmProblem`], whose enums *are*
//! `sparsek::DType`, `Layout`, `Backend` and `Status` of include/sparsek/sparsek.hpp (the
//! one definition): cxx emits a `static_assert` for every value declared here, so a value
//! that disagrees with the C++ header fails the build. Checking and converting statuses
//! into `Error`s is `launch.rs`'s job; functions here only extract device pointers on the
//! launch stream and call C++.

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
    }

    /// One problem, validated by the Rust entry point (`crate::spmm`); C++ turns it into
    /// its checked `detail::Problem` without re-validating. Pointers are device addresses.
    #[namespace = "sparsek::ffi"]
    struct SpmmProblem {
        m: i64,
        k: i64,
        n: i64,
        bm: i32,
        bk: i32,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
        values: u64,
        input: DType,
        output: DType,
        b: u64,
        b_ld: i64,
        b_layout: Layout,
        c: u64,
        c_ld: i64,
        c_layout: Layout,
        alpha: f32,
        beta: f32,
        backend: Backend,
        bias: u64,
        activation: Activation,
        stream: u64,
        /// op(A) = Aᵀ: B is `m x n`, C `k x n`, and A is read through its transpose index
        /// (`t_col_ptr`, `t_row_idx`, `t_block_id`, device addresses; zero otherwise).
        transpose_a: bool,
        t_col_ptr: u64,
        t_row_idx: u64,
        t_block_id: u64,
    }

    /// One SDDMM `S = α·(A·B) ⊙ mask + β·S`, validated by the Rust entry point
    /// (`crate::sddmm`): A `m x k`, B `k x n`, S `m x n` in `bm x bn` blocks (its values
    /// written). Pointers are device addresses.
    #[namespace = "sparsek::ffi"]
    struct SddmmProblem {
        m: i64,
        n: i64,
        k: i64,
        bm: i32,
        bn: i32,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
        values: u64,
        input: DType,
        output: DType,
        a: u64,
        a_ld: i64,
        a_layout: Layout,
        b: u64,
        b_ld: i64,
        b_layout: Layout,
        alpha: f32,
        beta: f32,
        backend: Backend,
        stream: u64,
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

    /// One attention forward, validated by the Rust entry point (`crate::attention`): Q, K,
    /// V, O of one dtype, the LSE (`batch*heads*seq_q` floats, or 0), the optional stacked
    /// block mask. Pointers are device addresses.
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
        scale: f32,
        backend: Backend,
        stream: u64,
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
        block_q: i32,
        block_k: i32,
        q_blocks: i64,
        k_blocks: i64,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
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
        include!("sparsek/cpp/bridge.h");

        type DType;
        type Layout;
        type Backend;
        type Activation;
        type Status;

        /// Selects a kernel variant and enqueues it on `problem.stream`. Unsafe: every
        /// pointer must address a live device allocation large enough for its view, and
        /// the BSR arrays must be valid.
        #[namespace = "sparsek::ffi"]
        unsafe fn spmm(problem: &SpmmProblem) -> FfiStatus;

        /// The variant `spmm` would run; reads no device memory, launches nothing.
        #[namespace = "sparsek::ffi"]
        fn select(problem: &SpmmProblem) -> FfiStatus;

        /// Selects an SDDMM kernel variant and enqueues it on `problem.stream`. Unsafe as
        /// `spmm`: every pointer must address a live device allocation large enough for
        /// its view, and S's index arrays must be valid.
        #[namespace = "sparsek::ffi"]
        unsafe fn sddmm(problem: &SddmmProblem) -> FfiStatus;

        /// The variant `sddmm` would run; reads no device memory, launches nothing.
        #[namespace = "sparsek::ffi"]
        fn select_sddmm(problem: &SddmmProblem) -> FfiStatus;

        /// Selects an attention kernel variant and enqueues it on `problem.stream`. Unsafe:
        /// every pointer must address a live device allocation large enough for its view,
        /// and the mask's arrays must be valid.
        #[namespace = "sparsek::ffi"]
        unsafe fn attention(problem: &AttentionProblem) -> FfiStatus;

        /// The variant `attention` would run; reads no device memory, launches nothing.
        #[namespace = "sparsek::ffi"]
        fn select_attention(problem: &AttentionProblem) -> FfiStatus;

        /// Enqueues the top-k gating launch on `problem.stream`. Unsafe: every pointer must
        /// address a live device allocation large enough for its view.
        #[namespace = "sparsek::ffi"]
        unsafe fn block_topk(problem: &GatingProblem) -> FfiStatus;
    }
}

pub(crate) use ffi::{
    Activation, AttentionProblem, Backend, DType, FfiStatus, GatingProblem, HeadsDesc, Layout,
    SddmmProblem, SpmmProblem, Status,
};

/// A's transpose index on the device (`op(A) = Aᵀ`), read only.
pub(crate) struct TransposeBuffers<'a> {
    /// Block-column offsets (`k / bk + 1` entries).
    pub col_ptr: &'a CudaSlice<i32>,
    /// Block-row of each listed block (`nnzb` entries, at least 1 allocated).
    pub row_idx: &'a CudaSlice<i32>,
    /// Stored position of each listed block (`nnzb` entries, at least 1 allocated).
    pub block_id: &'a CudaSlice<i32>,
}

/// The device buffers of one problem, all used on `stream`.
pub(crate) struct SpmmBuffers<'a, T, O> {
    /// A's block-row offsets (`m / bm + 1` entries).
    pub row_ptr: &'a CudaSlice<i32>,
    /// A's block-columns (`nnzb` entries, at least 1 allocated).
    pub col_idx: &'a CudaSlice<i32>,
    /// A's block values (`nnzb * bm * bk` elements, at least 1 allocated).
    pub values: &'a CudaSlice<T>,
    /// B, read only.
    pub b: &'a CudaSlice<T>,
    /// C, written (and read when `β != 0`).
    pub c: &'a mut CudaSlice<O>,
    /// The bias, one value per row of C, if any (passed as a null pointer otherwise).
    pub bias: Option<&'a CudaSlice<T>>,
    /// A's transpose index when `problem.transpose_a`.
    pub transpose: Option<TransposeBuffers<'a>>,
}

/// Device addresses of A's three arrays, B and C, in that order, and the stream.
fn set_pointers(
    problem: &mut SpmmProblem,
    [row_ptr, col_idx, values, b, c]: [u64; 5],
    stream: &CudaStream,
) {
    problem.row_ptr = row_ptr;
    problem.col_idx = col_idx;
    problem.values = values;
    problem.b = b;
    problem.c = c;
    problem.stream = stream.cu_stream() as u64;
}

/// Fills the pointers of `problem` from `bufs` and enqueues the kernel on `stream`.
///
/// The caller (`spmm::gpu::spmm`) has validated the scalar fields of `problem` against the
/// buffers: B and C hold their views, and `row_ptr`/`col_idx`/`values` come from a
/// `DeviceBsr`, which holds only validated BSR arrays.
pub(crate) fn spmm<T, O>(
    mut problem: SpmmProblem,
    bufs: SpmmBuffers<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    // The guards record cudarc's read/write events after the launch is enqueued, so other
    // streams that use these buffers wait for it.
    let (row_ptr, _g0) = bufs.row_ptr.device_ptr(stream);
    let (col_idx, _g1) = bufs.col_idx.device_ptr(stream);
    let (values, _g2) = bufs.values.device_ptr(stream);
    let (b, _g3) = bufs.b.device_ptr(stream);
    let (c, _g4) = bufs.c.device_ptr_mut(stream);
    let (bias, _g5) = match bufs.bias {
        Some(bias) => {
            let (ptr, guard) = bias.device_ptr(stream);
            (ptr, Some(guard))
        }
        None => (0, None),
    };
    let (t, _g6) = transpose_pointers(bufs.transpose.as_ref(), stream);
    set_pointers(&mut problem, [row_ptr, col_idx, values, b, c], stream);
    [problem.t_col_ptr, problem.t_row_idx, problem.t_block_id] = t;
    problem.bias = bias;
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (C
    // mutably), sized for its view as crate::spmm checked (B, C, the bias's m values) and
    // as DeviceBsr's validating constructors guarantee (row_ptr, col_idx,
    // values, and the transpose index DeviceBsr built from those validated arrays); every
    // buffer belongs to the stream's context (result::check_contexts), which spmm::gpu::spmm
    // bound to this thread.
    unsafe { ffi::spmm(&problem) }
}

/// The transpose index's device addresses (zeros without one) and the guards that record
/// their reads on `stream`.
type ReadGuard<'a> = cudarc::driver::SyncOnDrop<'a>;

fn transpose_pointers<'a>(
    t: Option<&'a TransposeBuffers<'a>>,
    stream: &'a CudaStream,
) -> ([u64; 3], Vec<ReadGuard<'a>>) {
    let Some(t) = t else {
        return ([0; 3], Vec::new());
    };
    let (col_ptr, g0) = t.col_ptr.device_ptr(stream);
    let (row_idx, g1) = t.row_idx.device_ptr(stream);
    let (block_id, g2) = t.block_id.device_ptr(stream);
    ([col_ptr, row_idx, block_id], vec![g0, g1, g2])
}

/// Whether the CUDA driver library can be loaded (cudarc panics without it).
pub(crate) fn driver_present() -> bool {
    // SAFETY: only attempts to dlopen libcuda's candidate names; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// The same buffers, read-only: `select` looks at their addresses (alignment), never at
/// their contents.
pub(crate) struct SpmmBufferRefs<'a, T, O> {
    /// A's block-row offsets.
    pub row_ptr: &'a CudaSlice<i32>,
    /// A's block-columns.
    pub col_idx: &'a CudaSlice<i32>,
    /// A's block values.
    pub values: &'a CudaSlice<T>,
    /// B.
    pub b: &'a CudaSlice<T>,
    /// C.
    pub c: &'a CudaSlice<O>,
    /// A's transpose index when `problem.transpose_a`.
    pub transpose: Option<TransposeBuffers<'a>>,
}

/// The variant `spmm` would run for `problem` with these buffers, or why none can.
pub(crate) fn select<T, O>(
    mut problem: SpmmProblem,
    bufs: SpmmBufferRefs<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    let (row_ptr, _g0) = bufs.row_ptr.device_ptr(stream);
    let (col_idx, _g1) = bufs.col_idx.device_ptr(stream);
    let (values, _g2) = bufs.values.device_ptr(stream);
    let (b, _g3) = bufs.b.device_ptr(stream);
    let (c, _g4) = bufs.c.device_ptr(stream);
    let (t, _g5) = transpose_pointers(bufs.transpose.as_ref(), stream);
    set_pointers(&mut problem, [row_ptr, col_idx, values, b, c], stream);
    [problem.t_col_ptr, problem.t_row_idx, problem.t_block_id] = t;
    ffi::select(&problem)
}

/// The device buffers of one SDDMM, all used on `stream`.
pub(crate) struct SddmmBuffers<'a, T, O> {
    /// A, read only.
    pub a: &'a CudaSlice<T>,
    /// B, read only.
    pub b: &'a CudaSlice<T>,
    /// S's block-row offsets (`m / bm + 1` entries).
    pub row_ptr: &'a CudaSlice<i32>,
    /// S's block-columns (`nnzb` entries, at least 1 allocated).
    pub col_idx: &'a CudaSlice<i32>,
    /// S's values (`nnzb * bm * bn`, at least 1 allocated): written (and read when `β != 0`)
    /// by a launch; only their address is looked at by a selection.
    pub values: SddmmValues<'a, O>,
}

/// S's values for [`sddmm`]: to write (a launch) or only to look at (a selection).
pub(crate) enum SddmmValues<'a, O> {
    /// Launch: the kernel writes them.
    Write(&'a mut CudaSlice<O>),
    /// Select only: their address (alignment) is checked, nothing is read.
    Look(&'a CudaSlice<O>),
}

/// Fills the pointers of `problem` from `bufs` and enqueues the SDDMM on `stream`
/// (`SddmmValues::Write`), or only selects its variant (`SddmmValues::Look`).
///
/// The caller (`sddmm::gpu::sddmm`) has validated the scalar fields of `problem` against the
/// buffers: A and B hold their views, and S's arrays come from a `DeviceBsr`, which holds
/// only validated BSR arrays.
pub(crate) fn sddmm<T, O>(
    mut problem: SddmmProblem,
    bufs: SddmmBuffers<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    let (a, _g0) = bufs.a.device_ptr(stream);
    let (b, _g1) = bufs.b.device_ptr(stream);
    let (row_ptr, _g2) = bufs.row_ptr.device_ptr(stream);
    let (col_idx, _g3) = bufs.col_idx.device_ptr(stream);
    let (run, (values, _g4)) = match bufs.values {
        SddmmValues::Write(v) => (true, v.device_ptr_mut(stream)),
        SddmmValues::Look(v) => (false, v.device_ptr(stream)),
    };
    problem.a = a;
    problem.b = b;
    problem.row_ptr = row_ptr;
    problem.col_idx = col_idx;
    problem.values = values;
    problem.stream = stream.cu_stream() as u64;
    if !run {
        return ffi::select_sddmm(&problem);
    }
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (S's values
    // mutably), sized for its view as crate::sddmm checked (A, B) and as DeviceBsr's
    // validating constructors guarantee (row_ptr, col_idx, values); every buffer belongs
    // to the stream's context (result::check_contexts), which sddmm::gpu::sddmm bound to this
    // thread.
    unsafe { ffi::sddmm(&problem) }
}

/// The device buffers of one attention forward, all used on `stream`.
pub(crate) struct AttentionBuffers<'a, T> {
    /// Q, read only (its view, `problem.q`, was checked to fit).
    pub q: &'a CudaSlice<T>,
    /// K, read only.
    pub k: &'a CudaSlice<T>,
    /// V, read only.
    pub v: &'a CudaSlice<T>,
    /// O, written.
    pub o: &'a mut CudaSlice<T>,
    /// The LSE, written when present.
    pub lse: Option<&'a mut CudaSlice<f32>>,
    /// The mask's `row_ptr` and `col_idx` (from a `DeviceBlockPatterns`), when masked.
    pub mask: Option<(&'a CudaSlice<i32>, &'a CudaSlice<i32>)>,
}

/// Fills the pointers of `problem` from `bufs` and enqueues the attention on `stream` (or
/// only selects its variant when `run` is false).
///
/// The caller (`gpu::attention`) has validated the scalar fields of `problem` against the
/// buffers: every view fits its buffer, and the mask arrays come from a
/// `DeviceBlockPatterns`, which holds only validated patterns.
pub(crate) fn attention<T>(
    mut problem: AttentionProblem,
    bufs: AttentionBuffers<'_, T>,
    stream: &CudaStream,
    run: bool,
) -> FfiStatus {
    let (q, _g0) = bufs.q.device_ptr(stream);
    let (k, _g1) = bufs.k.device_ptr(stream);
    let (v, _g2) = bufs.v.device_ptr(stream);
    let (o, _g3) = bufs.o.device_ptr_mut(stream);
    let (lse, _g4) = match bufs.lse {
        Some(l) => {
            let (ptr, guard) = l.device_ptr_mut(stream);
            (ptr, Some(guard))
        }
        None => (0, None),
    };
    let mut guards = Vec::new();
    if let Some((row_ptr, col_idx)) = bufs.mask {
        let (r, g) = row_ptr.device_ptr(stream);
        let (c, h) = col_idx.device_ptr(stream);
        problem.row_ptr = r;
        problem.col_idx = c;
        guards.push(g);
        guards.push(h);
    }
    problem.q.data = q;
    problem.k.data = k;
    problem.v.data = v;
    problem.o.data = o;
    problem.lse = lse;
    problem.stream = stream.cu_stream() as u64;
    if !run {
        return ffi::select_attention(&problem);
    }
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (O and the
    // LSE mutably), sized for its view as gpu::attention checked; the mask arrays come from
    // a DeviceBlockPatterns (validated on upload, or written by the gating kernel with the
    // sizes it promises); every buffer belongs to the stream's context
    // (result::check_contexts), bound to this thread.
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
        let (qp, g) = q.device_ptr(stream);
        let (kp, h) = k.device_ptr(stream);
        problem.q.data = qp;
        problem.k.data = kp;
        guards.push(g);
        guards.push(h);
    }
    if let Some(s) = bufs.scores {
        let (sp, g) = s.device_ptr(stream);
        problem.scores = sp;
        guards.push(g);
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
