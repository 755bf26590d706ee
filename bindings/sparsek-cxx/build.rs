//! Generates the C++ side of the bridge in src/lib.rs and compiles it into this crate's
//! static library. The generated header lands in `$OUT_DIR/cxxbridge/include/sparsek-cxx/
//! src/lib.rs.h` (and a link to it in `<target dir>/cxxbridge/`); the copy that C++ users
//! include is the committed `include/sparsek/rust.h` (`scripts/update-cxx-headers.sh`).

fn main() {
    cxx_build::bridge("src/lib.rs")
        .std("c++17")
        .compile("sparsek_cxx_bridge");
    println!("cargo:rerun-if-changed=src/lib.rs");
}
