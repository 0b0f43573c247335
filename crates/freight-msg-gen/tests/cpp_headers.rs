//! freight's C++ message headers (`crates/freight-c/include/freight/msgs/<package>.hpp`)
//! are what the generator makes of `interfaces/`, so a `.msg` change without
//! `make msgs` fails here. With `FREIGHT_MSG_GEN_WRITE=1` (what `make msgs`
//! sets) the test writes them instead.

use std::path::{Path, PathBuf};

use freight_msg_gen::{Builder, BUILT_IN_PACKAGES, BUILT_IN_SERVICE_PACKAGES};

fn headers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../freight-c/include/freight/msgs")
}

#[test]
fn cpp_message_headers_match_the_msg_files() {
    let headers = Builder::built_ins().cpp_headers().expect("the shipped interfaces generate");
    assert_eq!(headers.len(), BUILT_IN_PACKAGES.len() + BUILT_IN_SERVICE_PACKAGES.len(), "one header per package");
    let write = std::env::var_os("FREIGHT_MSG_GEN_WRITE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for header in &headers {
        let path = headers_dir().join(format!("{}.hpp", header.package));
        if std::fs::read_to_string(&path).ok().as_deref() == Some(header.source.as_str()) {
            continue;
        }
        if write {
            std::fs::create_dir_all(headers_dir()).expect("making the headers' directory");
            std::fs::write(&path, &header.source).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "out of date with interfaces/ (run `make msgs`): {}", stale.join(", "));
}
