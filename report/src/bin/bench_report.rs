//! sparsek's benchmark report: one table of every backend beside dense cuBLAS, with each
//! row's roofline floor and efficiency E, written as JSON, as a PNG plot and as a markdown
//! table, and a regression gate against a recorded baseline.
//!
//! ```text
//! bench_report run   [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64,32x32]
//!                    [--densities 1/16,1/8,1/4] [--patterns topk,skewed,random,causal]
//!                    [--dtypes f16,bf16] [--layouts row/row,col/col] [--backends hopper,wmma]
//!                    [--repeats 7] [--iters 20] [--json report.json] [--png report.png]
//!                    [--markdown report.md]
//!                    [--baseline report/baseline/h100.json] [--tolerance 0.05] [--rechecks 1]
//!                    [--slowdown N]
//! bench_report decode [--shapes 4096x4096,14336x4096,4096x14336] [--ns 1,8,16,32,64,128,256]
//!                    [--densities 0.25,0.5] [--blocks 128x128,64x64,32x32] [--json decode.json]
//! bench_report products [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64]
//!                    [--densities 1/8,1/4] [--dtypes f16,bf16] [--repeats 7] [--iters 20]
//!                    [--json products.json]
//! bench_report fp8 [--m 8192 --n 8192 --k 8192] [--blocks 128x128,64x64] [--densities 1/8,1/4]
//!                    [--patterns topk,random] [--decode-shapes 4096x4096,14336x4096] [--ns 1,8,16]
//!                    [--json fp8.json] [--markdown fp8.md]
//! bench_report tp [--shape 4096x14336] [--block 128x128] [--density 0.5] [--patterns ramp,topk]
//!                 [--batches 1,8,32,128,256] [--json tp.json]   (two GPUs, NCCL)
//! bench_report attention FILE.jsonl... [--json OUT]
//! bench_report check REPORT.json BASELINE.json [--tolerance 0.05]
//! bench_report plot  REPORT.json OUT.png
//! bench_report markdown REPORT.json OUT.md
//! ```
//!
//! `--backends` names the families as the reports key them: `hopper` (`cutlass`, its old name,
//! is taken too and keyed `hopper`), `wmma`.
//!
//! `run`, `decode`, `products`, `fp8` and `tp` need the `cuda` feature and a GPU; `attention`, `check`,
//! `plot` and `markdown` run anywhere (`attention` tabulates the JSON lines that
//! `run.sh attention` collects on the GPU machine: sparsek's `attention_check --time` beside
//! `report/peers/attention_torch.py`, same run).
//!
//! Each subcommand is a module of `sparsek_report::report` (`run`, `decode`, `products`, `fp8`,
//! `attention`, `gate` for `check`, `plot`, `markdown`), its details in the module's
//! documentation; this binary only dispatches.

use anyhow::{bail, Result};

use sparsek_report::report;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.first().map(String::as_str) {
        Some("run") => report::run::command,
        Some("decode") => report::decode::command,
        Some("products") => report::products::command,
        Some("fp8") => report::fp8::command,
        Some("tp") => report::tp::command,
        Some("attention") => report::attention::command,
        Some("check") => report::gate::command,
        Some("plot") => report::plot::command,
        Some("markdown") => report::markdown::command,
        _ => bail!("usage: bench_report run|decode|products|fp8|tp|attention|check|plot|markdown ... (see the doc comment of src/bin/bench_report.rs)"),
    };
    command(&args[1..])
}
