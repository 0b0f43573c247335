//! The `ros2msg` schema and RIHS01 type hash of every built-in message type
//! (`src/schema.rs` includes the table), from the `.msg` and `.srv` files the
//! types are generated from.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = freight_msg_gen::Builder::built_ins().generate_schema_table(out.join("schemas.rs")) {
        panic!("describing the built-in messages from the workspace's interfaces/: {e}");
    }
}
