//! Lists the built-in message types for `freight topic echo | hz | bw`
//! (`src/topic.rs` includes the list), from the `.msg` files the types are
//! generated from.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = freight_msg_gen::Builder::built_ins().generate_type_list(out.join("built_ins.rs"), "dispatch") {
        panic!("listing the built-in messages from the workspace's interfaces/: {e}");
    }
}
