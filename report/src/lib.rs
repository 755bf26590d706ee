//! Shared pieces of sparsek's benchmarks (`benches/families.rs`) and report
//! (`src/bin/bench_report.rs`): the report's subcommands (`report`, one module each), the
//! plot font, the roofline arithmetic and, with `cuda`, the dense baselines and the bandwidth
//! ceilings.

pub mod plot_font;
pub mod report;
pub mod roofline;

#[cfg(feature = "cuda")]
pub mod baseline;
#[cfg(feature = "cuda")]
pub mod ceilings;
#[cfg(feature = "cuda")]
pub mod dense_fp8;
