//! freight's Python message modules (`python/freight/msgs/<package>.py` and its
//! `.pyi` stub) are what the generator makes of `interfaces/`, so a `.msg`
//! change without `make msgs` fails here. With `FREIGHT_MSG_GEN_WRITE=1`
//! (what `make msgs` sets) the test writes them instead.

use std::path::{Path, PathBuf};

use freight_msg_gen::{Builder, BUILT_IN_PACKAGES, BUILT_IN_SERVICE_PACKAGES};

/// Packages whose module is hand-written around the generated one, which is
/// then `_<package>` (`tensor_msgs.py` adds numpy and torch helpers).
const WRAPPED: &[&str] = &["tensor_msgs"];

fn msgs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/freight/msgs")
}

#[test]
fn python_message_modules_match_the_msg_files() {
    let modules = Builder::built_ins().python_modules().expect("the shipped interfaces generate");
    assert_eq!(
        modules.len(),
        BUILT_IN_PACKAGES.len() + BUILT_IN_SERVICE_PACKAGES.len(),
        "one module per built-in package"
    );
    let write = std::env::var_os("FREIGHT_MSG_GEN_WRITE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for module in &modules {
        let stem = if WRAPPED.contains(&module.package.as_str()) {
            format!("_{}", module.package)
        } else {
            module.package.clone()
        };
        for (ext, text) in [("py", &module.source), ("pyi", &module.stub)] {
            let path = msgs_dir().join(format!("{stem}.{ext}"));
            if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            if write {
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(stale.is_empty(), "out of date with interfaces/ (run `make msgs`): {}", stale.join(", "));
}
