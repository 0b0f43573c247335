//! Generates the built-in message types (`msgs`) from the `.msg` files in the
//! workspace's `interfaces/` directory, the one definition of each.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = freight_msg_gen::Builder::built_ins().generate(out.join("msgs.rs")) {
        panic!("generating the built-in messages from the workspace's interfaces/: {e}");
    }
}
