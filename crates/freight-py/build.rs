//! Generates the Python classes of the built-in messages (`src/messages.rs`
//! includes them) from the `.msg` files the Rust types are generated from.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let interfaces = manifest.join("../../interfaces");
    let mut builder = freight_msg_gen::Builder::new().interfaces_dir(&interfaces);
    for package in freight_msg_gen::BUILT_IN_PACKAGES {
        builder = builder.shipped_package(*package);
    }
    if let Err(e) = builder.generate_pyo3(out.join("messages.rs")) {
        panic!("generating the Python message classes from {}: {e}", interfaces.display());
    }
}
