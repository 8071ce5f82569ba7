//! Tells the binary which tch it was built with (`DEEPGREEN_TCH_VERSION`), read from Cargo.lock,
//! so that runs report the version that was really linked rather than one typed in a source;
//! and records the LibTorch library folder torch-sys linked against as the binary's rpath, so
//! that it runs without LD_LIBRARY_PATH (the torch wheel's libraries, as the C++ stack's).
use std::path::Path;

fn main() {
    let libtorch = std::env::var("DEP_TCH_LIBTORCH_LIB").expect("torch-sys reports its LibTorch folder");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}");
    // torch-sys names torch_cuda where the wheel has it, but the linker drops a library the
    // binary takes no symbol from (--as-needed), and LibTorch's CUDA part only registers itself
    // when loaded: without it tch sees no GPU and LibTorch is a CPU-only build (the runs'
    // framework_backend says cpu).  Kept as the C++ stack keeps it (CMakeLists.txt).
    if Path::new(&libtorch).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
    let lock = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).expect("Cargo.lock is committed beside Cargo.toml");
    let mut packages = text.split("[[package]]");
    let version = packages
        .find_map(|p| {
            let mut lines = p.lines().map(str::trim);
            (lines.clone().any(|l| l == "name = \"tch\""))
                .then(|| lines.find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_owned)))
                .flatten()
        })
        .expect("Cargo.lock lists tch");
    println!("cargo:rustc-env=DEEPGREEN_TCH_VERSION={version}");
}
