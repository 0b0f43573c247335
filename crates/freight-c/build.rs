//! Lists the built-in message and service types that C and C++ endpoints
//! are made of (`src/types.rs` includes the lists), and gives
//! `libfreight_c.so` a SONAME, so that programs linked against it by path
//! (CMake's imported target does) record `libfreight_c.so` as what they need
//! and find it through their RPATH or the loader's path, not by the absolute
//! path of the build.
use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfreight_c.so");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let built_ins = freight_msg_gen::Builder::built_ins();
    if let Err(e) = built_ins.generate_type_list(out.join("built_ins.rs"), "dispatch") {
        panic!("listing the built-in messages from the workspace's interfaces/: {e}");
    }
    if let Err(e) = built_ins.generate_service_list(out.join("built_in_services.rs"), "dispatch") {
        panic!("listing the built-in services from the workspace's interfaces/: {e}");
    }
}
