//! Lists the built-in message types for `freight topic echo | hz | bw`
//! (`src/topic.rs` includes the list) and the built-in service types for
//! `freight service call` (`src/service.rs`), from the `.msg` and `.srv` files
//! the types are generated from.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let built_ins = freight_msg_gen::Builder::built_ins();
    if let Err(e) = built_ins.generate_type_list(out.join("built_ins.rs"), "dispatch") {
        panic!("listing the built-in messages from the workspace's interfaces/: {e}");
    }
    if let Err(e) = built_ins.generate_service_list(out.join("built_in_services.rs"), "dispatch") {
        panic!("listing the built-in services from the workspace's interfaces/: {e}");
    }
}
