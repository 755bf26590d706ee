//! With `cuda`: compiles kernels/bandwidth.cu to PTX with the nvcc that sparsek's build
//! found (exported as its `nvcc` link metadata), for the ceilings of bench_report. Without
//! it (or on docs.rs) the PTX is empty and the ceilings say so.

fn main() {
    println!("cargo:rerun-if-changed=kernels/bandwidth.cu");
    println!("cargo:rerun-if-env-changed=DEP_SPARSEK_KERNELS_NVCC");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let ptx = out.join("bandwidth.ptx");
    let Ok(nvcc) = std::env::var("DEP_SPARSEK_KERNELS_NVCC") else {
        std::fs::write(&ptx, "").expect("writing an empty bandwidth.ptx");
        return;
    };
    let status = std::process::Command::new(&nvcc)
        .args([
            "-ptx",
            "-O3",
            "-arch=compute_80",
            "kernels/bandwidth.cu",
            "-o",
        ])
        .arg(&ptx)
        .status()
        .unwrap_or_else(|e| panic!("running {nvcc}: {e}"));
    assert!(status.success(), "nvcc failed on kernels/bandwidth.cu");
}
