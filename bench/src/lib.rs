//! Shared pieces of sparsek's benchmarks (`benches/spmm.rs`) and report
//! (`src/bin/bench_report.rs`): the plot font and, with `cuda`, the dense baselines.

pub mod plot_font;

#[cfg(feature = "cuda")]
pub mod baseline;
#[cfg(feature = "cuda")]
pub mod ceilings;
#[cfg(feature = "cuda")]
pub mod decode;
