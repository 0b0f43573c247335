//! Gives `libfreight_c.so` a SONAME, so that programs linked against it by
//! path (CMake's imported target does) record `libfreight_c.so` as what they
//! need and find it through their RPATH or the loader's path, not by the
//! absolute path of the build.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfreight_c.so");
}
