//! Generates, with freight's own generator, the message types of the
//! `cdr_generated` and `cdr_generic` targets: the shipped interfaces and the
//! generator's test package (every kind of field), the list of all of them,
//! and their definitions (`ros2msg`, what a generated C++ type carries).

use std::fmt::Write;
use std::path::PathBuf;

/// The shipped packages, every message of which is generated.
const SHIPPED: &[&str] = &["builtin_interfaces", "std_msgs", "geometry_msgs", "sensor_msgs"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let test_pkg = manifest.join("../crates/freight-msg-gen/tests/msgs/freight_test_msgs");
    println!("cargo:rerun-if-changed=build.rs");
    let mut builder = freight_msg_gen::Builder::new().package_dir(&test_pkg);
    for pkg in SHIPPED {
        builder = builder.shipped_package(*pkg);
    }
    builder.generate(out.join("generated.rs")).unwrap_or_else(|e| panic!("generating the message types: {e}"));
    builder.generate_schema_table(out.join("schemas.rs")).unwrap_or_else(|e| panic!("the types' schemas: {e}"));

    // `TYPES`: every generated message, as the functions that fuzz it.
    let interfaces = freight_msg_gen::shipped_interfaces_dir();
    let dirs = SHIPPED.iter().map(|p| interfaces.join(p)).chain([test_pkg]);
    let mut list = String::from("/// Every generated message type: its name, its fuzz entry and its seed.\n");
    list.push_str("const TYPES: &[(&str, fn(&[u8]), fn() -> Vec<u8>)] = &[\n");
    let mut generic = String::from("/// Every generated message type: its name, its generic fuzz entry and its seed.\n");
    generic.push_str("const TYPES: &[(&str, fn(&str, &[u8]), fn() -> Vec<u8>)] = &[\n");
    for dir in dirs {
        let pkg = freight_msg_gen::load_package(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for m in &pkg.messages {
            let path = format!("generated::{}::msg::{}", pkg.name, m.name);
            let _ = writeln!(list, "    (\"{}/msg/{}\", decoded::<{path}>, default_cdr::<{path}>),", pkg.name, m.name);
            let _ = writeln!(generic, "    (\"{}/msg/{}\", as_generic::<{path}>, default_cdr::<{path}>),", pkg.name, m.name);
        }
    }
    list.push_str("];\n");
    generic.push_str("];\n");
    std::fs::write(out.join("types.rs"), list).expect("writing the list of types");
    std::fs::write(out.join("generic_types.rs"), generic).expect("writing the list of types");
}
