//! Generates the Python classes of the built-in messages (`src/messages.rs`
//! includes them) from the `.msg` files the Rust types are generated from.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = freight_msg_gen::Builder::built_ins().generate_pyo3(out.join("messages.rs")) {
        panic!("generating the Python message classes from the workspace's interfaces/: {e}");
    }
}
