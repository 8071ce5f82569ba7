//! Tells the binary which tch it was built with (`DEEPGREEN_TCH_VERSION`), read from Cargo.lock,
//! so that runs report the version that was really linked rather than one typed in a source;
//! and records the LibTorch library folder torch-sys linked against as the binary's rpath, so
//! that it runs without LD_LIBRARY_PATH (the torch wheel's libraries, as the C++ stack's).
use std::path::Path;

fn main() {
    let libtorch = std::env::var("DEP_TCH_LIBTORCH_LIB").expect("torch-sys reports its LibTorch folder");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}");
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
