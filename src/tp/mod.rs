//! Tensor parallelism over NCCL (feature `nccl`): pruned layers split over the GPUs of one
//! process ([`TpGroup`]: one communicator and stream per GPU). A gated MLP: column-parallel
//! gate and up, row-parallel down, one all-reduce ([`TpSparseMlp`]); a linear layer
//! column-parallel (each GPU its slice of the outputs) or row-parallel (each GPU its slice of
//! the inputs, one all-reduce) ([`TpSparseLinear`]). Every cut balances the weight each GPU
//! streams ([`SparseMlp::shard`], [`BsrMatrix::shard`]), not its row count.
//!
//! Determinism: each GPU's products are deterministic (the kernels reduce in a fixed order);
//! the all-reduce's order is NCCL's. For a fixed communicator (same GPUs, same topology),
//! message size, type and algorithm, NCCL reduces in the same order every call, so the
//! result is bitwise repeatable; with two GPUs the sum of two partials is order-free
//! anyway. Set `NCCL_ALGO` / `NCCL_PROTO` to pin the algorithm across NCCL versions and
//! tuning changes; results across different GPU counts agree within f32 reduction-order
//! rounding.
//!
//! NCCL is loaded at run time (cudarc's dynamic loading); a process where no `libnccl.so`
//! can be found gets [`Error::Nccl`] from [`TpGroup::new`], never a panic.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use cudarc::nccl::safe::{Comm, ReduceOp};

use std::ops::Range;

use crate::element::Element;
use crate::epilogue::Activation;
use crate::error::Error;
use crate::format::{BsrMatrix, ShardAxis, MAX_SHARDS};
use crate::gpu::result::check_contexts;
use crate::gpu::DeviceBsr;
use crate::linear::SparseLinear;
use crate::mlp::{MlpShards, SparseMlp};

fn nccl(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Nccl(format!("{what}: {e:?}"))
}

/// The GPUs of one tensor-parallel group, driven from one process: an NCCL communicator
/// per GPU (`ncclCommInitAll`) over the given streams, rank `i` on `streams[i]`.
pub struct TpGroup {
    comms: Vec<Comm>,
}

impl TpGroup {
    /// A group over one stream per GPU (distinct devices, at most [`MAX_SHARDS`]).
    /// [`Error::Nccl`] when NCCL cannot be loaded or initialized.
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
        // SAFETY: only asks the dynamic loader whether a libnccl can be opened.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(Error::Nccl(
                "no libnccl.so found: install the pinned nvidia-nccl wheel (third_party/setup.sh \
                 --nccl) and put its lib/ on LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let comms = Comm::from_devices(streams).map_err(|e| nccl("ncclCommInitAll", e))?;
        Ok(Self { comms })
    }

    /// The number of GPUs.
    pub fn size(&self) -> usize {
        self.comms.len()
    }

    /// Rank `rank`'s stream (where its work and its collectives run).
    pub fn stream(&self, rank: usize) -> Option<Arc<CudaStream>> {
        self.comms.get(rank).map(Comm::stream)
    }

    /// `bufs[r]` (rank r's, on its stream) summed over the ranks into every `bufs[r]`, in
    /// one NCCL group. All of one length; checked before anything is enqueued.
    pub fn all_reduce_sum(&self, bufs: &mut [CudaSlice<f32>]) -> Result<(), Error> {
        self.check_buffers("all_reduce_sum", bufs)?;
        cudarc::nccl::safe::group_start().map_err(|e| nccl("ncclGroupStart", e))?;
        let mut first_err = None;
        for (comm, buf) in self.comms.iter().zip(bufs.iter_mut()) {
            if let Err(e) = comm.all_reduce_in_place(buf, &ReduceOp::Sum) {
                first_err.get_or_insert(nccl("ncclAllReduce", e));
            }
        }
        // The group is closed whatever happened inside it.
        cudarc::nccl::safe::group_end().map_err(|e| nccl("ncclGroupEnd", e))?;
        first_err.map_or(Ok(()), Err)
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
        for (r, (comm, buf)) in self.comms.iter().zip(bufs).enumerate() {
            if buf.len() != bufs[0].len() {
                return Err(Error::InvalidArgument(format!(
                    "{what}: rank {r}'s buffer holds {} values, rank 0's {}",
                    buf.len(),
                    bufs[0].len()
                )));
            }
            if buf.stream().cu_stream() != comm.stream().cu_stream() {
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
pub struct TpSparseMlp<T> {
    ranks: Vec<SparseMlp<DeviceBsr<T>>>,
    inter: Vec<usize>,
    work: Vec<usize>,
    imbalance: f64,
    hidden: usize,
    out: usize,
}

impl<T: Element> TpSparseMlp<T> {
    /// `mlp` cut into `group.size()` nnz-balanced shards, each uploaded to its rank's GPU.
    pub fn new(mlp: &SparseMlp<BsrMatrix<T>>, group: &TpGroup) -> Result<Self, Error> {
        Self::from_shards(mlp.shard(group.size())?, group, mlp)
    }

    /// As [`new`](Self::new) over given shards (e.g. [`SparseMlp::shard_equal`]'s, to
    /// measure what balancing buys).
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
        for r in 0..n {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            check_contexts(&stream, &[("x", x[r].stream()), ("h", h[r].stream())])?;
            self.ranks[r].check_lens(batch, x[r].len(), h[r].len(), y[r].len())?;
        }
        for r in 0..n {
            self.ranks[r].forward(&x[r], batch, &mut h[r], &mut y[r])?;
        }
        group.all_reduce_sum(y)
    }
}

/// How a linear layer is split ([`TpSparseLinear`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpSplit {
    /// By output features (block-rows): rank `r` computes its range of y's features from the
    /// whole x; no collective (the outputs stay split, as a row-parallel layer wants them).
    Column,
    /// By input features (block-columns): rank `r` reads its range of x's features; the
    /// partial ys are summed by one all-reduce (f32). The bias is added once (rank 0's); an
    /// activation cannot come before the sum, so the layer takes none.
    Row,
}

/// A linear layer `y = act(x·Wᵀ + bias)` split over a [`TpGroup`], nnz-balanced
/// ([`BsrMatrix::shard`]).
pub struct TpSparseLinear<T> {
    split: TpSplit,
    ranks: Vec<SparseLinear<DeviceBsr<T>, CudaSlice<T>>>,
    ranges: Vec<Range<usize>>,
    imbalance: f64,
}

impl<T: Element> TpSparseLinear<T> {
    /// `layer` cut `split`-wise into `group.size()` shards, each uploaded with its slice of
    /// the bias to its rank's GPU. A row-parallel layer with an activation is
    /// [`Error::InvalidArgument`].
    pub fn new(
        layer: &SparseLinear<BsrMatrix<T>, Vec<T>>,
        split: TpSplit,
        group: &TpGroup,
    ) -> Result<Self, Error> {
        if split == TpSplit::Row && layer.activation() != Activation::None {
            return Err(Error::InvalidArgument(
                "a row-parallel layer takes no activation (it would apply before the all-reduce's sum)".into(),
            ));
        }
        let w = layer.weight();
        let axis = match split {
            TpSplit::Column => ShardAxis::BlockRows,
            TpSplit::Row => ShardAxis::BlockCols,
        };
        let shards = w.shard(axis, group.size())?;
        let (unit, len) = match split {
            TpSplit::Column => (w.block().rows, w.m()),
            TpSplit::Row => (w.block().cols, w.k()),
        };
        let ranges: Vec<Range<usize>> = shards
            .ranges()
            .iter()
            .map(|r| (r.start * unit).min(len)..(r.end * unit).min(len))
            .collect();
        let imbalance = shards.imbalance();
        let mut ranks = Vec::with_capacity(group.size());
        for (r, (shard, range)) in shards.shards().iter().zip(&ranges).enumerate() {
            let stream = group
                .stream(r)
                .ok_or(Error::InvalidArgument("rank out of range".into()))?;
            let bias = match (layer.bias(), split) {
                (Some(b), TpSplit::Column) => Some(stream.clone_htod(&b[range.clone()])?),
                (Some(b), TpSplit::Row) if r == 0 => Some(stream.clone_htod(b)?),
                _ => None,
            };
            ranks.push(SparseLinear::new_device(
                DeviceBsr::upload(shard, &stream)?,
                bias,
                layer.activation(),
            )?);
        }
        Ok(Self {
            split,
            ranks,
            ranges,
            imbalance,
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
