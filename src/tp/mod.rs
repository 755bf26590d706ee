//! Tensor parallelism: pruned layers split over the GPUs of one process.
//!
//! The host half, always built: how a linear layer is cut over ranks ([`TpLinearPlan`],
//! [`TpSplit`]), every check done and each rank's layer runnable on the CPU, so the cut can
//! be tested without a GPU. The gated MLP's cut is [`SparseMlp::shard`].
//!
//! Over NCCL (feature `nccl`): one communicator and stream per GPU (`TpGroup`); a gated MLP
//! with column-parallel gate and up, row-parallel down and one all-reduce (`TpSparseMlp`); a
//! linear layer column-parallel (each GPU its slice of the outputs) or row-parallel (each GPU
//! its slice of the inputs, one all-reduce) (`TpSparseLinear`, which uploads a
//! [`TpLinearPlan`]). Every cut balances the weight each GPU streams ([`SparseMlp::shard`],
//! [`BsrMatrix::shard`]), not its row count.
//!
//! Determinism: each GPU's products are deterministic (the kernels reduce in a fixed order);
//! the all-reduce's order is NCCL's. For a fixed communicator (same GPUs, same topology),
//! message size, type and algorithm, NCCL reduces in the same order every call, so the
//! result is bitwise repeatable; with two GPUs the sum of two partials is order-free
//! anyway. Set `NCCL_ALGO` / `NCCL_PROTO` to pin the algorithm across NCCL versions and
//! tuning changes; results across different GPU counts agree within f32 reduction-order
//! rounding.
//!
//! NCCL is loaded at run time (cudarc's dynamic loading). Before the first NCCL call,
//! `TpGroup::new` checks that a `libnccl.so` loads and that it has every function sparsek
//! calls (`check_nccl`): a process without one gets [`Error::Nccl`] naming what is missing,
//! never a panic of the lazy loader; and dropping a group never panics.
//!
//! [`SparseMlp::shard`]: crate::SparseMlp::shard
//! [`BsrMatrix::shard`]: crate::BsrMatrix::shard
//! [`Error::Nccl`]: crate::Error::Nccl

#[cfg(feature = "nccl")]
mod nccl;
mod plan;

#[cfg(feature = "nccl")]
pub use nccl::check_nccl;
pub use plan::{TpLinearPlan, TpSplit};

#[cfg(feature = "nccl")]
use std::ops::Range;
#[cfg(feature = "nccl")]
use std::sync::Arc;

#[cfg(feature = "nccl")]
use cudarc::driver::{CudaSlice, CudaStream};

#[cfg(feature = "nccl")]
use crate::device::result::check_contexts;
#[cfg(feature = "nccl")]
use crate::device::DeviceBsr;
#[cfg(feature = "nccl")]
use crate::element::Element;
#[cfg(feature = "nccl")]
use crate::error::Error;
#[cfg(feature = "nccl")]
use crate::format::{BsrMatrix, MAX_SHARDS};
#[cfg(feature = "nccl")]
use crate::linear::SparseLinear;
#[cfg(feature = "nccl")]
use crate::mlp::{MlpShards, SparseMlp};
#[cfg(feature = "nccl")]
use crate::options::Backend;

/// The GPUs of one tensor-parallel group, driven from one process: an NCCL communicator
/// per GPU (`ncclCommInitAll`) over the given streams, rank `i` on `streams[i]`. Dropping it
/// aborts the communicators (`ncclCommAbort`), never panicking.
#[cfg(feature = "nccl")]
pub struct TpGroup {
    comms: nccl::Comms,
}

#[cfg(feature = "nccl")]
impl TpGroup {
    /// A group over one stream per GPU (distinct devices, at most [`MAX_SHARDS`]).
    /// [`Error::Nccl`] when NCCL cannot be loaded, lacks a function sparsek calls
    /// ([`check_nccl`]) or cannot be initialized.
    pub fn new(streams: Vec<Arc<CudaStream>>) -> Result<Self, Error> {
        if streams.is_empty() || streams.len() > MAX_SHARDS {
            return Err(Error::InvalidArgument(format!(
                "a tensor-parallel group takes 1 to {MAX_SHARDS} streams, not {}",
                streams.len()
            )));
        }
        let mut ordinals: Vec<usize> = streams.iter().map(|s| s.context().ordinal()).collect();
        ordinals.sort_unstable();
        if ordinals.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(
                "a tensor-parallel group takes one stream per GPU (two streams share a device)"
                    .into(),
            ));
        }
        Ok(Self {
            comms: nccl::Comms::init_all(streams)?,
        })
    }

    /// The number of GPUs.
    pub fn size(&self) -> usize {
        self.comms.len()
    }

    /// Rank `rank`'s stream (where its work and its collectives run).
    pub fn stream(&self, rank: usize) -> Option<Arc<CudaStream>> {
        self.comms.stream(rank).cloned()
    }

    /// `bufs[r]` (rank r's, on its stream) summed over the ranks into every `bufs[r]`, in
    /// one NCCL group. All of one length; checked before anything is enqueued.
    pub fn all_reduce_sum(&self, bufs: &mut [CudaSlice<f32>]) -> Result<(), Error> {
        self.check_buffers("all_reduce_sum", bufs)?;
        self.comms.all_reduce_sum(bufs)
    }

    /// One buffer per rank, of one length, each on its rank's stream.
    fn check_buffers<T>(&self, what: &str, bufs: &[CudaSlice<T>]) -> Result<(), Error> {
        if bufs.len() != self.size() {
            return Err(Error::InvalidArgument(format!(
                "{what}: {} buffers for {} ranks",
                bufs.len(),
                self.size()
            )));
        }
        for (r, buf) in bufs.iter().enumerate() {
            if buf.len() != bufs[0].len() {
                return Err(Error::InvalidArgument(format!(
                    "{what}: rank {r}'s buffer holds {} values, rank 0's {}",
                    buf.len(),
                    bufs[0].len()
                )));
            }
            let on_rank = self
                .comms
                .stream(r)
                .is_some_and(|s| s.cu_stream() == buf.stream().cu_stream());
            if !on_rank {
                return Err(Error::InvalidArgument(format!(
                    "{what}: rank {r}'s buffer is not on its rank's stream (the collective runs there)"
                )));
            }
        }
        Ok(())
    }
}

/// A gated MLP split over a [`TpGroup`]: rank `r` holds shard `r` of
/// [`SparseMlp::shard`] (its gate and up rows, the matching down columns) on its GPU.
#[cfg(feature = "nccl")]
pub struct TpSparseMlp<T> {
    ranks: Vec<SparseMlp<DeviceBsr<T>>>,
    inter: Vec<usize>,
    work: Vec<usize>,
    imbalance: f64,
    hidden: usize,
    out: usize,
}

#[cfg(feature = "nccl")]
impl<T: Element> TpSparseMlp<T> {
    /// `mlp` cut into `group.size()` nnz-balanced shards, each uploaded to its rank's GPU.
    pub fn new(mlp: &SparseMlp<BsrMatrix<T>>, group: &TpGroup) -> Result<Self, Error> {
        Self::from_shards(mlp.shard(group.size())?, group, mlp)
    }

    /// As [`new`](Self::new) over given shards (e.g. [`SparseMlp::shard_equal`]'s, to
    /// measure what balancing buys): one per rank, and a cut of `mlp`
    /// ([`MlpShards::check_cut_of`]), else a typed error before anything is uploaded.
    pub fn from_shards(
        shards: MlpShards<T>,
        group: &TpGroup,
        mlp: &SparseMlp<BsrMatrix<T>>,
    ) -> Result<Self, Error> {
        if shards.shards().len() != group.size() {
            return Err(Error::InvalidArgument(format!(
                "{} shards for {} ranks",
                shards.shards().len(),
                group.size()
            )));
        }
        shards.check_cut_of(mlp)?;
        let inter = shards.ranges().iter().map(|r| r.len()).collect();
        let (work, imbalance) = (shards.work().to_vec(), shards.imbalance());
        let mut ranks = Vec::with_capacity(group.size());
        for (r, s) in shards.shards().iter().enumerate() {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            ranks.push(s.upload(&stream)?);
        }
        Ok(Self {
            ranks,
            inter,
            work,
            imbalance,
            hidden: mlp.gate_up().k(),
            out: mlp.down().m(),
        })
    }

    /// Each rank's intermediate rows (its h has `batch x inter[r]` values).
    pub fn inter(&self) -> &[usize] {
        &self.inter
    }
    /// Each rank's weight elements (gate, up and down blocks).
    pub fn work(&self) -> &[usize] {
        &self.work
    }
    /// The largest rank's weight over the mean.
    pub fn imbalance(&self) -> f64 {
        self.imbalance
    }
    /// The input features (x has `batch x hidden` values on every rank).
    pub fn hidden(&self) -> usize {
        self.hidden
    }
    /// The output features (each rank's y has `batch x out` values).
    pub fn out(&self) -> usize {
        self.out
    }

    /// `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` over the group: rank `r` reads `x[r]` (the whole
    /// `batch x hidden` input, replicated), writes its slice of h to `h[r]` (`batch x
    /// inter[r]`) and its partial y to `y[r]` (`batch x out`, f32), then one all-reduce sums
    /// the partials into every `y[r]`. Every buffer on its rank's stream. Every check of every
    /// rank runs before anything is enqueued.
    pub fn forward(
        &self,
        group: &TpGroup,
        x: &[CudaSlice<T>],
        batch: usize,
        h: &mut [CudaSlice<T>],
        y: &mut [CudaSlice<f32>],
    ) -> Result<(), Error> {
        let n = self.ranks.len();
        if group.size() != n || x.len() != n || h.len() != n || y.len() != n {
            return Err(Error::InvalidArgument(format!(
                "TpSparseMlp over {n} ranks: a group of {}, {} x, {} h and {} y buffers",
                group.size(),
                x.len(),
                h.len(),
                y.len()
            )));
        }
        group.check_buffers("TpSparseMlp y", y)?;
        // Every check of every rank before rank 0 is enqueued, so a refused call launches
        // nothing anywhere: y on the rank's stream (above) and h on y's, the weights', x's
        // and h's contexts against it, lengths, types, the kernels' selection.
        for r in 0..n {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            check_contexts(&stream, &[("x", x[r].stream()), ("h", h[r].stream())])?;
            self.ranks[r].check_forward(&x[r], batch, &mut h[r], &mut y[r])?;
        }
        for r in 0..n {
            self.ranks[r].forward(&x[r], batch, &mut h[r], &mut y[r])?;
        }
        group.all_reduce_sum(y)
    }
}

/// A linear layer `y = act(α·x·Wᵀ + bias + β·y)` split over a [`TpGroup`], nnz-balanced
/// ([`BsrMatrix::shard`]): rank `r` runs rank `r`'s layer of a [`TpLinearPlan`], with the
/// layer's options.
#[cfg(feature = "nccl")]
pub struct TpSparseLinear<T> {
    split: TpSplit,
    ranks: Vec<SparseLinear<DeviceBsr<T>, CudaSlice<T>>>,
    ranges: Vec<Range<usize>>,
    imbalance: f64,
}

#[cfg(feature = "nccl")]
impl<T: Element> TpSparseLinear<T> {
    /// `layer` cut `split`-wise into `group.size()` shards ([`TpLinearPlan::new`], whose
    /// errors these are), each rank's layer uploaded with its part of the bias and the
    /// layer's options (α; β as [`TpSplit`] says; the backend) to its rank's GPU. A rank
    /// without weight (more ranks than block-rows or -columns) uploads no bias. A layer whose
    /// backend is [`Backend::Cpu`] is [`Error::BackendUnavailable`]: its ranks run on GPUs.
    pub fn new(
        layer: &SparseLinear<BsrMatrix<T>, Vec<T>>,
        split: TpSplit,
        group: &TpGroup,
    ) -> Result<Self, Error> {
        let backend = layer.options().get_backend();
        if backend == Backend::Cpu {
            return Err(Error::BackendUnavailable {
                backend,
                reason: "a tensor-parallel layer runs on the group's GPUs".into(),
            });
        }
        Self::upload(TpLinearPlan::new(layer, split, group.size())?, group)
    }

    /// Each rank's layer of `plan` to its rank's GPU (one rank per GPU of `group`).
    fn upload(plan: TpLinearPlan<T>, group: &TpGroup) -> Result<Self, Error> {
        if plan.ranks().len() != group.size() {
            return Err(Error::InvalidArgument(format!(
                "a plan of {} ranks for a group of {}",
                plan.ranks().len(),
                group.size()
            )));
        }
        let mut ranks = Vec::with_capacity(group.size());
        for (r, layer) in plan.ranks().iter().enumerate() {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            // The plan gives a rank without outputs no bias; an empty one would still be no
            // bias (CUDA has no empty allocations).
            let bias = match layer.bias() {
                Some(b) if !b.is_empty() => Some(stream.clone_htod(b)?),
                _ => None,
            };
            ranks.push(
                SparseLinear::new_device(
                    DeviceBsr::upload(layer.weight(), &stream)?,
                    bias,
                    layer.activation(),
                )?
                .with_options(layer.options()),
            );
        }
        Ok(Self {
            split: plan.split(),
            ranks,
            ranges: plan.ranges().to_vec(),
            imbalance: plan.imbalance(),
        })
    }

    /// How the layer is split.
    pub fn split(&self) -> TpSplit {
        self.split
    }
    /// Each rank's range of output features (column-parallel) or input features
    /// (row-parallel).
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }
    /// The largest rank's nonzero blocks over the mean.
    pub fn imbalance(&self) -> f64 {
        self.imbalance
    }

    /// Column-parallel: rank `r` reads the whole `x[r]` (`batch x in`, row-major) and writes
    /// `y[r]` (`batch x ranges()[r].len()`): its features of y. Row-parallel: rank `r` reads
    /// `x[r]` (`batch x ranges()[r].len()`: its features of x) and every `y[r]` (`batch x
    /// out`) receives the whole y after the all-reduce. Every buffer on its rank's stream;
    /// every rank's checks run before anything is enqueued.
    pub fn forward(
        &self,
        group: &TpGroup,
        x: &[CudaSlice<T>],
        batch: usize,
        y: &mut [CudaSlice<f32>],
    ) -> Result<(), Error> {
        let n = self.ranks.len();
        if group.size() != n || x.len() != n || y.len() != n {
            return Err(Error::InvalidArgument(format!(
                "TpSparseLinear over {n} ranks: a group of {}, {} x and {} y buffers",
                group.size(),
                x.len(),
                y.len()
            )));
        }
        if self.split == TpSplit::Row {
            group.check_buffers("TpSparseLinear y", y)?;
        }
        for r in 0..n {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            check_contexts(&stream, &[("x", x[r].stream()), ("y", y[r].stream())])?;
            if y[r].stream().cu_stream() != stream.cu_stream() {
                return Err(Error::InvalidArgument(format!(
                    "TpSparseLinear: rank {r}'s y is not on its rank's stream"
                )));
            }
            let w = self.ranks[r].weight();
            let need = |rows: usize| batch.checked_mul(rows);
            if need(w.k()).is_none_or(|v| v > x[r].len())
                || need(w.m()).is_none_or(|v| v > y[r].len())
            {
                return Err(Error::InvalidArgument(format!(
                    "TpSparseLinear: rank {r} needs x of batch x {} and y of batch x {} values",
                    w.k(),
                    w.m()
                )));
            }
            // The rest of the rank's checks (the weight's and bias's contexts, types, the
            // kernel's selection) before rank 0 is enqueued, too.
            self.ranks[r].check_forward(&x[r], batch, &mut y[r])?;
        }
        for r in 0..n {
            self.ranks[r].forward(&x[r], batch, &mut y[r])?;
        }
        match self.split {
            TpSplit::Column => Ok(()),
            TpSplit::Row => group.all_reduce_sum(y),
        }
    }
}
