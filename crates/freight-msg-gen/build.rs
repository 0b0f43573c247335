//! Generates the code of the crate's own integration tests (`tests/generated.rs`)
//! with the crate's own generator, whose sources it shares.

#[allow(dead_code, unused_imports)]
#[path = "src/lib.rs"]
mod gen;

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    let test_pkg = manifest.join("tests/msgs/freight_test_msgs");
    if !test_pkg.is_dir() {
        // Packaged without its tests: nothing to generate.
        return;
    }
    if let Err(e) = gen::Builder::new().package_dir(&test_pkg).generate(out.join("freight_test_msgs.rs")) {
        panic!("generating the test messages: {e}");
    }
    let mut all = gen::Builder::new();
    for pkg in ["builtin_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs"] {
        all = all.shipped_package(pkg);
    }
    if let Err(e) = all.generate(out.join("shipped_interfaces.rs")) {
        panic!("generating the shipped interfaces: {e}");
    }
}
