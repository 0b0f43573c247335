//! `make install-c` (scripts/install-c.sh) installs a package that a user's
//! CMake project finds with `find_package(freight 0.1 CONFIG REQUIRED)` and
//! links as `freight::freight`; the program runs from the build tree.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn ok(what: &str, out: Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
fn a_cmake_project_finds_the_installed_package_and_links_it() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = common::library_dir();
    let work = std::env::temp_dir().join(format!("freight-c-install-{}", std::process::id()));
    let (prefix, build) = (work.join("prefix"), work.join("build"));
    let script = crate_dir.join("../../scripts/install-c.sh");
    ok("install-c.sh", Command::new("sh").arg(&script).arg(&prefix).arg(&built).output().unwrap());
    let configured = Command::new("cmake")
        .arg("-S")
        .arg(crate_dir.join("tests/cmake"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .output()
        .expect("running cmake");
    ok("cmake (configure)", configured);
    ok("cmake --build", Command::new("cmake").arg("--build").arg(&build).output().unwrap());
    let ran = ok("the consumer", Command::new(build.join("consumer")).output().unwrap());
    assert!(ran.contains("node /cmake/consumer\n"), "{ran}");
    // The installed message headers: an Image is as long as Rust's.
    let image = freight::msgs::sensor_msgs::Image { data: vec![1u8; 12].into(), ..Default::default() };
    let len = freight::Message::to_cdr(&image).unwrap().len();
    assert!(ran.contains(&format!("image {len} bytes\n")), "{ran}");
    // The program records the library by name, not by the build's path.
    let needed = ok("readelf", Command::new("readelf").arg("-d").arg(build.join("consumer")).output().unwrap());
    assert!(needed.contains("Shared library: [libfreight_c.so]"), "{needed}");
    let _ = std::fs::remove_dir_all(&work);
}
