//! The allocation guard of the fuzz tests (tests/fuzz.rs, tests/common/fuzz.rs): a global
//! allocator that refuses any single allocation above `ALLOC_LIMIT` (16 MiB), returning null,
//! and counts it. A huge request then surfaces as a typed error through `try_reserve`, or
//! aborts the test (an infallible allocation): the fuzz tests tell which was attempted.
//! Each test binary declares `#[global_allocator] static GLOBAL: Guard = Guard;` (a binary
//! using tests/common/fuzz.rs gets the declaration there).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Largest single allocation let through; a larger one gets null.
pub const ALLOC_LIMIT: usize = 16 << 20;

/// Allocations refused so far.
pub static REFUSED: AtomicUsize = AtomicUsize::new(0);
/// The largest refused.
pub static REFUSED_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The largest let through.
pub static LARGEST: AtomicUsize = AtomicUsize::new(0);
/// The case running (named when an allocation is refused).
pub static CASE: AtomicU64 = AtomicU64::new(u64::MAX);
static REPORTED: AtomicBool = AtomicBool::new(false);

pub struct Guard;

impl Guard {
    /// Whether an allocation of `size` bytes may go ahead; records it either way.
    fn admit(size: usize) -> bool {
        if size > ALLOC_LIMIT {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            REFUSED_SIZE.fetch_max(size, Ordering::Relaxed);
            // Said once, without allocating: an infallible allocation aborts right after.
            if !REPORTED.swap(true, Ordering::Relaxed) {
                let case = CASE.load(Ordering::Relaxed);
                let _ = writeln!(
                    std::io::stderr(),
                    "fuzz: case {case} asked for {size} bytes (limit {ALLOC_LIMIT}): refused \
                     (reported once)"
                );
            }
            false
        } else {
            LARGEST.fetch_max(size, Ordering::Relaxed);
            true
        }
    }
}

// SAFETY: forwards to `System`, or returns null (allowed: an allocation failure).
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        if Self::admit(layout.size()) {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
            unsafe { System.alloc(layout) }
        } else {
            std::ptr::null_mut()
        }
    }
    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        if Self::admit(layout.size()) {
            // SAFETY: as alloc.
            unsafe { System.alloc_zeroed(layout) }
        } else {
            std::ptr::null_mut()
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: ptr came from System with this layout (alloc above).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        if Self::admit(new_size) {
            // SAFETY: ptr came from System with this layout.
            unsafe { System.realloc(ptr, layout, new_size) }
        } else {
            std::ptr::null_mut()
        }
    }
}
