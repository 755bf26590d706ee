//! The driver of the entry points' fuzz targets (tests/fuzz_api/main.rs, tests/fuzz_tp.rs):
//! it runs a target's cases one by one, each drawn from a generator seeded for that case
//! alone, and fails the target on the first case that
//! - panics (each case runs under `catch_unwind`; the panic hook keeps the message),
//! - asks for an allocation above `ALLOC_LIMIT` (16 MiB) where that is not allowed (the
//!   guard below refuses it and counts it; an infallible allocation aborts the process),
//! - takes longer than the binary's `case_limit`, or hangs (a watchdog names the case past
//!   `HANG_LIMIT` and aborts),
//! - or fails its own checks (`run` returns `Err`, usually through `ensure!`).
//!
//! `SPARSEK_FUZZ_SEED=<u64>` replays a run (the seed is printed; random by default),
//! `SPARSEK_FUZZ_CASES=<n>` sets the number of cases per target (`DEFAULT_CASES` by
//! default), `SPARSEK_FUZZ_ONLY=<i>` runs case `i` alone and prints its input.
//!
//! A binary that includes this module gets the allocation guard as its global allocator:
//! the driver reads the guard's counters, which only that allocator keeps.
#![allow(dead_code)]

use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use sparsek::Element;

#[path = "alloc_guard.rs"]
mod alloc_guard;
#[path = "fuzz_rng.rs"]
mod fuzz_rng;

pub use alloc_guard::ALLOC_LIMIT;
use alloc_guard::{Guard, CASE, LARGEST, REFUSED};
pub use fuzz_rng::FuzzRng;

#[global_allocator]
static GLOBAL: Guard = Guard;

/// A case still running after this is a hang: the watchdog names it and aborts.
pub const HANG_LIMIT: Duration = Duration::from_secs(30);

/// Cases per target unless `SPARSEK_FUZZ_CASES` says: a debug build runs a tenth (CI runs
/// the fuzz binaries under `cargo test` and `--features full`, then once more with
/// `SPARSEK_FUZZ_CASES=100000`).
pub const DEFAULT_CASES: u64 = if cfg!(debug_assertions) {
    10_000
} else {
    100_000
};

pub const I32_MAX: usize = i32::MAX as usize;

/// One target at a time: the guard's counters, the panic hook and the watchdog are
/// process-wide.
static SERIAL: Mutex<()> = Mutex::new(());
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a u64")),
    )
}

/// What a case's call did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Returned `Ok` (and its output checked).
    Accepted,
    /// Returned the expected `Err` (and its outputs untouched).
    Rejected,
}

pub type Check = Result<Outcome, String>;

/// Returns `Err(format!(...))` from the enclosing check unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {{
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)*));
        }
    }};
}
pub(crate) use ensure;

/// Values in [-1, 1) of any element type.
pub fn random_values<T: Element>(rng: &mut FuzzRng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| T::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect()
}

/// What a test binary's targets may do, and where they run.
#[derive(Debug, Clone, Copy)]
pub struct Driver {
    /// Longest a case may take.
    pub case_limit: Duration,
    /// Rayon workers the cases run on (calls from a worker avoid the injection latency).
    pub workers: usize,
    /// Whether a case that returns `Err` may have had an allocation refused (a huge buffer
    /// asked for through `try_reserve`, surfacing as a typed error); when not, any refused
    /// allocation fails the case. A case that returns `Ok` never may.
    pub refusal_may_reject: bool,
}

impl Driver {
    /// Runs the cases of one target: `gen` draws the input (printed on failure), `run`
    /// calls the entry point and checks it (it may draw the data from the same generator).
    /// `salt` tells the targets' case seeds apart.
    pub fn run<C: Debug>(
        &self,
        name: &str,
        salt: u64,
        gen: impl Fn(&mut FuzzRng) -> C + Sync,
        run: impl Fn(&C, &mut FuzzRng) -> Check + Sync,
    ) {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let seed = env_u64("SPARSEK_FUZZ_SEED").unwrap_or_else(|| rand::rng().random());
        let cases = env_u64("SPARSEK_FUZZ_CASES").unwrap_or(DEFAULT_CASES);
        let only = env_u64("SPARSEK_FUZZ_ONLY");
        println!("{name}: seed {seed} (replay with SPARSEK_FUZZ_SEED={seed}), {cases} cases");
        LARGEST.store(0, Ordering::Relaxed);

        // Panics are caught per case; the hook keeps the message instead of printing it.
        let hook = panic::take_hook();
        panic::set_hook(Box::new(|info| {
            *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string());
        }));
        // The watchdog: a case past HANG_LIMIT is a hang, named before the abort.
        let started = Instant::now();
        let case_start_ms = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let (case_start_ms, done, name) =
                (case_start_ms.clone(), done.clone(), name.to_owned());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let now = started.elapsed().as_millis() as u64;
                    let at = case_start_ms.load(Ordering::Relaxed);
                    if now.saturating_sub(at) > HANG_LIMIT.as_millis() as u64 {
                        let case = CASE.load(Ordering::Relaxed);
                        eprintln!(
                            "{name}: case {case} has run {} ms: a hang (SPARSEK_FUZZ_SEED={seed} \
                             SPARSEK_FUZZ_ONLY={case})",
                            now - at
                        );
                        std::process::abort();
                    }
                }
            })
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.workers)
            .build()
            .expect("a rayon pool");

        let (mut accepted, mut rejected, mut refused_err, mut failures) = (0u64, 0u64, 0u64, 0u64);
        let mut slowest = (Duration::ZERO, 0u64);
        let mut first_failure: Option<String> = None;
        let range = match only {
            Some(i) => i..i + 1,
            None => 0..cases,
        };
        let ran = range.end - range.start;
        pool.install(|| {
            for i in range {
                CASE.store(i, Ordering::Relaxed);
                let case_seed = (seed ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93))
                    ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let rng = &mut FuzzRng::new(case_seed);
                let case = match panic::catch_unwind(AssertUnwindSafe(|| gen(rng))) {
                    Ok(case) => case,
                    Err(_) => {
                        let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        first_failure.get_or_insert(format!(
                            "case {i}: the generator panicked (a bug of the fuzz): {msg:?}"
                        ));
                        failures += 1;
                        continue;
                    }
                };
                if only.is_some() {
                    println!("{name}: case {i}: {case:?}");
                }
                let refused_before = REFUSED.load(Ordering::Relaxed);
                case_start_ms.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                let t = Instant::now();
                let result = panic::catch_unwind(AssertUnwindSafe(|| run(&case, rng)));
                let took = t.elapsed();
                let refused = REFUSED.load(Ordering::Relaxed) - refused_before;
                if took > slowest.0 {
                    slowest = (took, i);
                }
                let failure = match result {
                    Ok(Ok(_)) if took > self.case_limit => Some(format!("took {took:?}")),
                    Ok(Ok(Outcome::Accepted)) if refused > 0 => Some(format!(
                        "returned Ok after {refused} refused allocations above {ALLOC_LIMIT} \
                         bytes"
                    )),
                    Ok(Ok(Outcome::Rejected)) if refused > 0 && !self.refusal_may_reject => Some(
                        format!("{refused} allocations above {ALLOC_LIMIT} bytes were asked for"),
                    ),
                    Ok(Ok(Outcome::Accepted)) => {
                        accepted += 1;
                        None
                    }
                    Ok(Ok(Outcome::Rejected)) => {
                        rejected += 1;
                        refused_err += (refused > 0) as u64;
                        None
                    }
                    Ok(Err(why)) => Some(why),
                    Err(_) => {
                        let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        Some(format!("panic: {}", msg.unwrap_or_default()))
                    }
                };
                if let Some(why) = failure {
                    failures += 1;
                    first_failure.get_or_insert(format!(
                        "case {i} (SPARSEK_FUZZ_SEED={seed} SPARSEK_FUZZ_ONLY={i}): {why}\n\
                         input: {case:?}"
                    ));
                }
            }
        });
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        let _ = watchdog.join();
        CASE.store(u64::MAX, Ordering::Relaxed);
        panic::set_hook(hook);

        println!(
            "{name}: {ran} cases, {accepted} accepted, {rejected} rejected ({refused_err} after \
             a refused allocation), {failures} failed; slowest case {} ({:.2?}); largest \
             allocation {} bytes; {:.2?}",
            slowest.1,
            slowest.0,
            LARGEST.load(Ordering::Relaxed),
            elapsed
        );
        if let Some(first) = &first_failure {
            println!("{name}: first failure (seed {seed}): {first}");
        }
        assert!(
            failures == 0,
            "{name} (seed {seed}): {failures} failed cases; first: {}",
            first_failure.unwrap_or_default()
        );
        if only.is_none() && cases >= 1000 {
            assert!(
                accepted > cases / 20 && rejected > cases / 20,
                "{name}: the fuzz lost its mix ({accepted} accepted, {rejected} rejected)"
            );
        }
    }
}
