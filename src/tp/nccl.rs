//! NCCL as sparsek calls it: the library checked function by function before the first call
//! ([`check_nccl`]), the communicators of a group held as raw handles, and their abort on
//! drop with its status ignored.
//!
//! cudarc loads NCCL lazily: each `sys` function looks itself up on first call and panics
//! when the library lacks it, and its `Comm` panics when `ncclCommAbort` fails on drop.
//! sparsek therefore resolves every function it calls in the library cudarc's loader uses
//! before any of them runs, and holds its communicators itself.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use cudarc::nccl::{result, sys};

use crate::error::Error;

/// Every NCCL function sparsek calls (through cudarc's `nccl::result`): resolved before the
/// first call where cudarc loads libnccl at run time (the link resolves them otherwise).
#[cfg_attr(feature = "cuda-linked", allow(dead_code))]
pub(crate) const NCCL_FUNCTIONS: [&str; 5] = [
    "ncclCommInitAll",
    "ncclGroupStart",
    "ncclAllReduce",
    "ncclGroupEnd",
    "ncclCommAbort",
];

fn nccl_error(what: &str, e: result::NcclError) -> Error {
    Error::Nccl(format!("{what}: {:?}", e.0))
}

/// Whether NCCL can be used: a `libnccl.so` loads (cudarc's search: its candidate names on
/// the loader's path, `LD_LIBRARY_PATH` first) and the one loaded has every function sparsek
/// calls. Otherwise [`Error::Nccl`] naming the first one missing (or the library). Needs
/// no GPU; [`TpGroup::new`](super::TpGroup::new) runs it first.
pub fn check_nccl() -> Result<(), Error> {
    resolve_nccl()
}

/// With `cuda-linked`, libnccl is a link-time dependency of the executable (cudarc's
/// dynamic-linking): a process running this has it, with every function its link resolved.
#[cfg(feature = "cuda-linked")]
fn resolve_nccl() -> Result<(), Error> {
    Ok(())
}

/// [`check_nccl`] where cudarc loads libnccl at run time.
#[cfg(not(feature = "cuda-linked"))]
fn resolve_nccl() -> Result<(), Error> {
    // SAFETY: asks the dynamic loader whether one of cudarc's candidate names opens (the
    // library is loaded and closed again, running its initializers as any use would).
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Nccl(
            "no libnccl.so found: install the pinned nvidia-nccl wheel (third_party/setup.sh \
             --nccl) and put its lib/ on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    // SAFETY: a candidate opened just above, and `culib` tries the same candidates in the
    // same order, so it finds one rather than panicking; the library it returns is the one
    // every cudarc NCCL call looks its function up in.
    let lib = unsafe { sys::culib() };
    for name in NCCL_FUNCTIONS {
        // SAFETY: the symbol is only looked up, never called or read: the pointer type
        // given is never used.
        let found = unsafe { lib.get::<*const c_void>(name) }.is_ok();
        if !found {
            return Err(Error::Nccl(format!(
                "the libnccl loaded has no {name}: install the pinned nvidia-nccl wheel \
                 (third_party/setup.sh --nccl) and put its lib/ first on LD_LIBRARY_PATH"
            )));
        }
    }
    Ok(())
}

/// One rank's communicator and the stream its collectives run on.
struct Rank {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
}

/// A group's communicators (`ncclCommInitAll`), aborted on drop. The raw handles keep it
/// neither `Send` nor `Sync`, like cudarc's `Comm`.
pub(crate) struct Comms {
    ranks: Vec<Rank>,
}

impl Comms {
    /// One communicator per stream, rank `i` on `streams[i]`: the streams' devices are
    /// distinct and at most `MAX_SHARDS` (the caller checked). [`check_nccl`] runs first.
    pub(crate) fn init_all(streams: Vec<Arc<CudaStream>>) -> Result<Self, Error> {
        check_nccl()?;
        let count = c_int::try_from(streams.len())
            .map_err(|_| Error::InvalidArgument("too many streams for NCCL".into()))?;
        let ordinals = streams
            .iter()
            .map(|s| c_int::try_from(s.context().ordinal()))
            .collect::<Result<Vec<c_int>, _>>()
            .map_err(|_| Error::InvalidArgument("a device ordinal past i32".into()))?;
        let mut comms: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); streams.len()];
        // SAFETY: `comms` has room for `count` handles and `ordinals` holds `count` distinct
        // device ordinals, as ncclCommInitAll requires; check_nccl resolved it, so cudarc's
        // loader finds it.
        unsafe { result::comm_init_all(comms.as_mut_ptr(), count, ordinals.as_ptr()) }
            .map_err(|e| nccl_error("ncclCommInitAll", e))?;
        let ranks = comms
            .into_iter()
            .zip(streams)
            .map(|(comm, stream)| Rank { comm, stream })
            .collect();
        Ok(Self { ranks })
    }

    pub(crate) fn len(&self) -> usize {
        self.ranks.len()
    }

    pub(crate) fn stream(&self, rank: usize) -> Option<&Arc<CudaStream>> {
        self.ranks.get(rank).map(|r| &r.stream)
    }

    /// `bufs[r]` summed over the ranks into every `bufs[r]`, in one NCCL group. The caller
    /// checked one buffer per rank, of one length, each on its rank's stream.
    pub(crate) fn all_reduce_sum(&self, bufs: &mut [CudaSlice<f32>]) -> Result<(), Error> {
        result::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        let mut first_err = None;
        // The buffers' event records are dropped after ncclGroupEnd, which is where NCCL
        // enqueues the collectives: a later reader on another stream waits for them.
        let mut records = Vec::with_capacity(bufs.len());
        for (rank, buf) in self.ranks.iter().zip(bufs.iter_mut()) {
            let count = buf.len();
            let (ptr, record) = buf.device_ptr_mut(&rank.stream);
            records.push(record);
            // SAFETY: `ptr` is the device address of `buf`'s `count` f32 values (in and out
            // in place), on the device of `rank.stream`, which `comm` was made for; `buf`
            // stays borrowed until the group has been enqueued. ncclAllReduce was resolved
            // by check_nccl.
            let status = unsafe {
                result::all_reduce(
                    ptr as *const c_void,
                    ptr as *mut c_void,
                    count,
                    sys::ncclDataType_t::ncclFloat32,
                    sys::ncclRedOp_t::ncclSum,
                    rank.comm,
                    rank.stream.cu_stream() as sys::cudaStream_t,
                )
            };
            if let Err(e) = status {
                first_err.get_or_insert(nccl_error("ncclAllReduce", e));
            }
        }
        // The group is closed whatever happened inside it.
        let end = result::group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
        drop(records);
        end?;
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        for rank in &self.ranks {
            // SAFETY: `comm` came from ncclCommInitAll and is released once, here, while its
            // stream (and so its context) is still held. ncclCommAbort was resolved by
            // check_nccl before the communicators existed, so the loader cannot panic. Its
            // status is ignored: a drop has no caller to tell, and the handle is gone
            // either way.
            let _ = unsafe { result::comm_abort(rank.comm) };
        }
    }
}
