//! Block-sparse attention on candle tensors: sparsek's
//! [`attention_with_layout`](sparsek::attention_with_layout) with candle's Q, K, V read in
//! place (their strides passed through) and O allocated by candle.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Shape, Storage, Tensor};
use sparsek::{bf16, f16, AttentionOptions, BlockPatterns, Heads, HeadsMut};

use crate::element::CandleElement;
use crate::error::{Error, Result};
use crate::linear::unsupported_device;
use crate::storage::{host_output, not_contiguous, Failure};

const OP: &str = "sparsek-candle attention";

/// Where a 4-D Q, K, V or O tensor keeps its heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QkvLayout {
    /// `[batch, heads, seq, head_dim]` (candle's and PyTorch's SDPA order).
    #[default]
    Bhsd,
    /// `[batch, seq, heads, head_dim]` (a QKV projection's output reshaped, FlashAttention's
    /// order).
    Bshd,
}

/// A block mask for [`attention()`]: sparsek's [`BlockPatterns`], on the device of the
/// tensors it masks (uploaded once, here, with candle's stream for a CUDA device).
pub struct AttentionMask {
    patterns: BlockPatterns,
    #[cfg(feature = "cuda")]
    device: Option<(sparsek::DeviceBlockPatterns, candle_core::CudaDevice)>,
}

impl std::fmt::Debug for AttentionMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttentionMask")
            .field("q_blocks", &self.patterns.q_blocks())
            .field("k_blocks", &self.patterns.k_blocks())
            .field("patterns", &self.patterns.patterns())
            .finish()
    }
}

impl AttentionMask {
    /// `patterns` for tensors on `device`.
    pub fn new(patterns: BlockPatterns, device: &Device) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Self {
                patterns,
                #[cfg(feature = "cuda")]
                device: None,
            }),
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => {
                let on_device =
                    sparsek::DeviceBlockPatterns::upload(&patterns, &dev.cuda_stream())?;
                Ok(Self {
                    patterns,
                    device: Some((on_device, dev.clone())),
                })
            }
            other => Err(unsupported_device(OP, other)),
        }
    }

    /// The host patterns.
    pub fn patterns(&self) -> &BlockPatterns {
        &self.patterns
    }
}

/// How the sequences lie in Q, K and V (sparsek's [`SequenceLayout`](sparsek::SequenceLayout)
/// with candle `I32` tensors, on the operands' device, for its arrays). The padded batch
/// ([`SeqLayout::padded`]) needs none.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqLayout<'a> {
    batch: usize,
    cu_seqlens_q: Option<(&'a Tensor, usize)>,
    cu_seqlens_k: Option<(&'a Tensor, usize)>,
    seqlens_k: Option<(&'a Tensor, usize)>,
    page_table: Option<(&'a Tensor, usize, usize)>,
}

impl<'a> SeqLayout<'a> {
    /// Every sequence has Q's queries and K's keys.
    pub fn padded() -> Self {
        Self::default()
    }
    /// `batch` sequences (Q's batch unless Q is packed); give it its arrays.
    pub fn new(batch: usize) -> Self {
        Self {
            batch,
            ..Self::default()
        }
    }
    /// Packed queries (Q's batch 1, seq the total): `batch + 1` offsets, the longest
    /// `max_seqlen_q` ([`sparsek::SequenceLayout::cu_seqlens_q`]).
    pub fn cu_seqlens_q(mut self, offsets: &'a Tensor, max_seqlen_q: usize) -> Self {
        self.cu_seqlens_q = Some((offsets, max_seqlen_q));
        self
    }
    /// Packed keys ([`sparsek::SequenceLayout::cu_seqlens_k`]).
    pub fn cu_seqlens_k(mut self, offsets: &'a Tensor, max_seqlen_k: usize) -> Self {
        self.cu_seqlens_k = Some((offsets, max_seqlen_k));
        self
    }
    /// Sequence `b` keeps its first `seqlens_k[b]` keys: a KV cache filled to different
    /// lengths ([`sparsek::SequenceLayout::seqlens_k`]).
    pub fn seqlens_k(mut self, lengths: &'a Tensor, max_seqlen_k: usize) -> Self {
        self.seqlens_k = Some((lengths, max_seqlen_k));
        self
    }
    /// K and V are a pool of pages (their batch the pages, their seq `page_size`), read
    /// through `table` (`[batch, max_pages]`): the paged KV cache
    /// ([`sparsek::PageTable`]).
    pub fn page_table(mut self, table: &'a Tensor, max_pages: usize, page_size: usize) -> Self {
        self.page_table = Some((table, max_pages, page_size));
        self
    }

    fn arrays(&self) -> impl Iterator<Item = (&'static str, &'a Tensor)> {
        [
            self.cu_seqlens_q.map(|(t, _)| ("cu_seqlens_q", t)),
            self.cu_seqlens_k.map(|(t, _)| ("cu_seqlens_k", t)),
            self.seqlens_k.map(|(t, _)| ("seqlens_k", t)),
            self.page_table.map(|(t, _, _)| ("page_table", t)),
        ]
        .into_iter()
        .flatten()
    }
}

/// The `[batch, heads, seq, head_dim]` dims and sparsek's `(stride_b, stride_h, stride_s)`
/// of a 4-D tensor in `layout`; `head_dim` must be contiguous.
fn heads_of(
    operand: &'static str,
    l: &Layout,
    layout: QkvLayout,
) -> Result<([usize; 4], [usize; 3])> {
    let (dims, st) = (l.dims(), l.stride());
    if dims.len() != 4 {
        return Err(Error::Shape {
            op: OP,
            operand,
            got: dims.to_vec(),
            expected: match layout {
                QkvLayout::Bhsd => "[batch, heads, seq, head_dim]".into(),
                QkvLayout::Bshd => "[batch, seq, heads, head_dim]".into(),
            },
        });
    }
    if st[3] != 1 && dims[3] > 1 {
        return Err(not_contiguous(OP, operand, "its head_dim is strided", l));
    }
    Ok(match layout {
        QkvLayout::Bhsd => ([dims[0], dims[1], dims[2], dims[3]], [st[0], st[1], st[2]]),
        QkvLayout::Bshd => ([dims[0], dims[2], dims[1], dims[3]], [st[0], st[2], st[1]]),
    })
}

/// O's strides, packed in `layout`: `(stride_b, stride_h, stride_s)`.
fn packed_strides([_, h, s, d]: [usize; 4], layout: QkvLayout) -> [usize; 3] {
    match layout {
        QkvLayout::Bhsd => [h * s * d, s * d, d],
        QkvLayout::Bshd => [s * h * d, d, h * d],
    }
}

/// Block-sparse attention `O = softmax(scale·Q·Kᵀ + M)·V` on candle tensors in `layout`
/// (`[batch, heads, seq, d]` or `[batch, seq, heads, d]`): K and V may have fewer heads than
/// Q (GQA), `mask` (if any) keeps blocks, `opts` sets the scale, causal masking and its
/// alignment ([`sparsek::CausalAlignment::BottomRight`] for a KV cache), and `seq` the
/// serving layout (varlen, per-sequence key counts, paged K/V). Q, K, V are read in place
/// with their strides (a transpose or a narrow along seq is fine; on a CUDA device a view
/// must start at its buffer's start); O is a new tensor of Q's shape, packed in `layout`.
/// f16/bf16 on CUDA (head_dim 64 or 128); f16/bf16/f32 on the CPU (sparsek's reference).
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&AttentionMask>,
    layout: QkvLayout,
    seq: &SeqLayout<'_>,
    opts: &AttentionOptions,
) -> Result<Tensor> {
    for (operand, t) in [("K", k), ("V", v)] {
        if t.dtype() != q.dtype() {
            return Err(Error::DType {
                op: OP,
                operand,
                got: t.dtype(),
                expected: format!("{:?} (Q's dtype)", q.dtype()),
            });
        }
        if !t.device().same_device(q.device()) {
            return Err(Error::Device {
                op: OP,
                what: format!("{operand} is on another device than Q"),
            });
        }
    }
    for (operand, t) in seq.arrays() {
        if t.dtype() != DType::I32 {
            return Err(Error::DType {
                op: OP,
                operand,
                got: t.dtype(),
                expected: "I32".into(),
            });
        }
        if !t.device().same_device(q.device()) {
            return Err(Error::Device {
                op: OP,
                what: format!("{operand} is on another device than Q (put it on Q's device)"),
            });
        }
        if !t.layout().is_contiguous() || (q.device().is_cuda() && t.layout().start_offset() != 0) {
            return Err(not_contiguous(
                OP,
                operand,
                "an index array must be packed and start its buffer",
                t.layout(),
            ));
        }
    }
    // The index arrays' storage, held for the launch (read locks).
    let arrays: Vec<_> = seq.arrays().map(|(_, t)| t.storage_and_layout()).collect();
    let op = AttentionOp {
        mask,
        layout,
        seq: *seq,
        arrays: arrays.iter().map(|(s, l)| (&**s, *l)).collect(),
        opts: *opts,
        failure: Failure::default(),
    };
    q.apply_op3_no_bwd(k, v, &op)
        .map_err(|e| op.failure.typed(e))
}

struct AttentionOp<'a> {
    mask: Option<&'a AttentionMask>,
    layout: QkvLayout,
    seq: SeqLayout<'a>,
    /// The storage and layout of `seq`'s arrays, in [`SeqLayout::arrays`]' order.
    arrays: Vec<(&'a Storage, &'a Layout)>,
    opts: AttentionOptions,
    failure: Failure,
}

impl AttentionOp<'_> {
    /// sparsek's layout over `array(i)`, the i-th of [`SeqLayout::arrays`].
    fn sparsek_layout<'b>(
        &self,
        array: impl Fn(usize) -> Result<sparsek::IndexArray<'b>>,
    ) -> Result<sparsek::SequenceLayout<'b>> {
        let s = &self.seq;
        let mut out = if s.arrays().next().is_none() {
            sparsek::SequenceLayout::padded()
        } else {
            sparsek::SequenceLayout::new(s.batch)
        };
        let mut i = 0;
        let mut next = || {
            let a = array(i);
            i += 1;
            a
        };
        if let Some((_, max)) = s.cu_seqlens_q {
            out = out.cu_seqlens_q(next()?, max);
        }
        if let Some((_, max)) = s.cu_seqlens_k {
            out = out.cu_seqlens_k(next()?, max);
        }
        if let Some((_, max)) = s.seqlens_k {
            out = out.seqlens_k(next()?, max);
        }
        if let Some((_, max_pages, page_size)) = s.page_table {
            out = out.page_table(sparsek::PageTable::new(next()?, max_pages, page_size));
        }
        Ok(out)
    }

    fn cpu<T: CandleElement>(
        &self,
        (qs, ql): (&CpuStorage, &Layout),
        (ks, kl): (&CpuStorage, &Layout),
        (vs, vl): (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        fn view<'s, T: CandleElement>(
            operand: &'static str,
            s: &'s CpuStorage,
            l: &Layout,
            layout: QkvLayout,
        ) -> Result<Heads<'s, T>> {
            let all = T::cpu_storage_as_slice(s)?;
            let ([b, h, sq, d], [sb, sh, ss]) = heads_of(operand, l, layout)?;
            let data = all.get(l.start_offset()..).unwrap_or(&[]);
            Ok(Heads::host(data, b, h, sq, d).with_strides(sb, sh, ss))
        }
        let qv = view::<T>("Q", qs, ql, self.layout)?;
        let (kv, vv) = (
            view::<T>("K", ks, kl, self.layout)?,
            view::<T>("V", vs, vl, self.layout)?,
        );
        let dims = heads_of("Q", ql, self.layout)?.0;
        let mut o = host_output::<T>(elements(dims)?);
        let [sb, sh, ss] = packed_strides(dims, self.layout);
        let out =
            HeadsMut::host(&mut o, dims[0], dims[1], dims[2], dims[3]).with_strides(sb, sh, ss);
        let layout = self.sparsek_layout(|i| match self.arrays[i] {
            (Storage::Cpu(s), l) => {
                let all = s.as_slice::<i32>()?;
                let part = all.get(l.start_offset()..l.start_offset() + l.shape().elem_count());
                Ok(sparsek::IndexArray::Host(part.ok_or_else(|| {
                    Error::Shape {
                        op: OP,
                        operand: "index array",
                        got: l.dims().to_vec(),
                        expected: "a layout within its storage".into(),
                    }
                })?))
            }
            _ => Err(Error::Device {
                op: OP,
                what: "an index array is not on the CPU".into(),
            }),
        })?;
        sparsek::attention_with_layout(
            qv,
            kv,
            vv,
            out,
            None,
            self.mask.map(|m| sparsek::MaskOperand::Host(&m.patterns)),
            &layout,
            &self.opts,
        )?;
        Ok((T::to_cpu_storage_owned(o), Shape::from(ql.dims())))
    }

    #[cfg(feature = "cuda")]
    fn cuda<T: CandleElement>(
        &self,
        (qs, ql): (&candle_core::CudaStorage, &Layout),
        (ks, kl): (&candle_core::CudaStorage, &Layout),
        (vs, vl): (&candle_core::CudaStorage, &Layout),
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use crate::storage::device;
        fn view<'s, T: CandleElement>(
            operand: &'static str,
            s: &'s candle_core::CudaStorage,
            l: &Layout,
            layout: QkvLayout,
        ) -> Result<Heads<'s, T>> {
            let data = device::buffer::<T>(OP, operand, s, l)?;
            let ([b, h, sq, d], [sb, sh, ss]) = heads_of(operand, l, layout)?;
            Ok(Heads::device(data, b, h, sq, d).with_strides(sb, sh, ss))
        }
        let qv = view::<T>("Q", qs, ql, self.layout)?;
        let (kv, vv) = (
            view::<T>("K", ks, kl, self.layout)?,
            view::<T>("V", vs, vl, self.layout)?,
        );
        let mask = match (self.mask, &self.mask.and_then(|m| m.device.as_ref())) {
            (None, _) => None,
            (Some(_), Some((patterns, dev))) => {
                device::same_device(OP, dev, &qs.device)?;
                Some(sparsek::MaskOperand::Device(patterns))
            }
            (Some(_), None) => {
                return Err(Error::Device {
                    op: OP,
                    what: "the mask is on the CPU and Q on a CUDA device (AttentionMask::new with Q's device)".into(),
                })
            }
        };
        let dims = heads_of("Q", ql, self.layout)?.0;
        let mut o = device::output::<T>(&qs.device, elements(dims)?)?;
        let [sb, sh, ss] = packed_strides(dims, self.layout);
        let layout = self.sparsek_layout(|i| match self.arrays[i] {
            (Storage::Cuda(s), _) => Ok(sparsek::IndexArray::Device(s.as_cuda_slice::<i32>()?)),
            _ => Err(Error::Device {
                op: OP,
                what: "an index array is not on the CUDA device".into(),
            }),
        })?;
        sparsek::attention_with_layout(
            qv,
            kv,
            vv,
            HeadsMut::device(&mut o, dims[0], dims[1], dims[2], dims[3]).with_strides(sb, sh, ss),
            None,
            mask,
            &layout,
            &self.opts,
        )?;
        Ok((
            candle_core::CudaStorage::wrap_cuda_slice(o, qs.device.clone()),
            Shape::from(ql.dims()),
        ))
    }
}

/// O's elements, checked.
fn elements(dims: [usize; 4]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |a, &x| a.checked_mul(x))
        .ok_or_else(|| Error::InvalidArgument {
            op: OP,
            what: "O's size overflows usize".into(),
        })
}

fn unsupported_dtype(got: DType) -> Error {
    Error::DType {
        op: OP,
        operand: "Q",
        got,
        expected: "f16, bf16 or f32 (f16 or bf16 on a CUDA device)".into(),
    }
}

impl CustomOp3 for AttentionOp<'_> {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let ops = ((s1, l1), (s2, l2), (s3, l3));
        self.failure.keep(match s1.dtype() {
            DType::F16 => self.cpu::<f16>(ops.0, ops.1, ops.2),
            DType::BF16 => self.cpu::<bf16>(ops.0, ops.1, ops.2),
            DType::F32 => self.cpu::<f32>(ops.0, ops.1, ops.2),
            got => Err(unsupported_dtype(got)),
        })
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let ops = ((s1, l1), (s2, l2), (s3, l3));
        self.failure.keep(match s1.dtype() {
            DType::F16 => self.cuda::<f16>(ops.0, ops.1, ops.2),
            DType::BF16 => self.cuda::<bf16>(ops.0, ops.1, ops.2),
            DType::F32 => self.cuda::<f32>(ops.0, ops.1, ops.2),
            got => Err(unsupported_dtype(got)),
        })
    }
}
