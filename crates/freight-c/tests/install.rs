//! `make install` (scripts/install.sh) installs a package that a user's
//! CMake project finds with `find_package(freight 0.1 REQUIRED)` and links as
//! `freight::freight`, and that `pkg-config freight` describes; the programs
//! run.

mod common;

use std::path::Path;
use std::process::Command;

use common::ok;

#[test]
fn a_cmake_project_finds_the_installed_package_and_links_it() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = std::env::temp_dir().join(format!("freight-c-install-{}", std::process::id()));
    let (prefix, build) = (work.join("prefix"), work.join("build"));
    common::install(&prefix);
    assert!(prefix.join("bin/freight").is_file(), "the tool was not installed");
    common::cmake_build(&crate_dir.join("tests/cmake"), &build, &prefix);
    let ran = ok("the consumer", Command::new(build.join("consumer")).output().unwrap());
    assert!(ran.contains("node /cmake/consumer\n"), "{ran}");
    // The installed message headers: an Image is as long as Rust's.
    let image = freight::msgs::sensor_msgs::Image { data: vec![1u8; 12].into(), ..Default::default() };
    let len = freight::Message::to_cdr(&image).unwrap().len();
    assert!(ran.contains(&format!("image {len} bytes\n")), "{ran}");
    // The program records the library by name, not by the build's path.
    let needed = ok("readelf", Command::new("readelf").arg("-d").arg(build.join("consumer")).output().unwrap());
    assert!(needed.contains("Shared library: [libfreight_c.so]"), "{needed}");

    // pkg-config: the flags compile and link the same program.
    let pc_path = prefix.join("lib/pkgconfig");
    let flags = ok(
        "pkg-config",
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "freight"])
            .env("PKG_CONFIG_PATH", &pc_path)
            .output()
            .unwrap(),
    );
    let exe = work.join("consumer-pc");
    let compiled = Command::new("c++")
        .arg("-std=c++17")
        .arg(crate_dir.join("tests/cmake/main.cpp"))
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    ok("c++ with pkg-config's flags", compiled);
    let ran = ok("the pkg-config consumer", Command::new(&exe).output().unwrap());
    assert!(ran.contains("node /cmake/consumer\n"), "{ran}");
    let _ = std::fs::remove_dir_all(&work);
}
