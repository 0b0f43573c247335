//! Writes the definitions of the built-in message types that C and C++
//! endpoints are made of (`src/message_types.rs` includes them), and gives
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
    // Their Rust types, which the tests compare the layouts with.
    if let Err(e) = built_ins.generate_type_list(out.join("built_ins.rs"), "dispatch") {
        panic!("listing the built-in messages from the workspace's interfaces/: {e}");
    }
    // The definitions of the built-in messages and services' halves, which C
    // endpoints are made of.
    if let Err(e) = built_ins.generate_schema_table(out.join("schemas.rs")) {
        panic!("the schemas of the built-in messages from the workspace's interfaces/: {e}");
    }
    // The Rust types of the generator's test package, which the tests meet
    // from C++ as a user's own package (tests/user_types.rs).
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let test_pkg = manifest.join("../freight-msg-gen/tests/msgs/freight_test_msgs");
    if let Err(e) = freight_msg_gen::Builder::new().package_dir(&test_pkg).generate(out.join("freight_test_msgs.rs")) {
        panic!("generating the test package {}: {e}", test_pkg.display());
    }
}
