//! `include/freight/freight.h` and the library cannot drift apart: every
//! function the header declares is exported, every exported function is
//! declared, and the status codes have the same names and values.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn header() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/freight/freight.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names `freight_...` directly followed by `(`: the declared functions.
fn declared(header: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in header.match_indices("freight_") {
        let rest = &header[at..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let before = header[..at].chars().next_back();
        if rest[end..].starts_with('(') && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.insert(rest[..end].to_owned());
        }
    }
    names
}

#[test]
fn the_header_declares_exactly_what_the_library_exports() {
    let lib = common::library_dir().join("libfreight_c.so");
    let nm = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("running nm");
    assert!(nm.status.success(), "nm {}: {}", lib.display(), String::from_utf8_lossy(&nm.stderr));
    let exported: BTreeSet<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("freight_"))
        .map(str::to_owned)
        .collect();
    let declared = declared(&header());
    assert!(!declared.is_empty());
    assert_eq!(declared, exported, "freight.h (left) and libfreight_c.so (right) differ");
}

#[test]
fn the_status_codes_are_the_same_on_both_sides() {
    let header = header();
    for status in freight_c::Status::ALL {
        let name = status.name().to_str().unwrap();
        let line = format!("{name} = {}", status as i32);
        assert!(header.contains(&line), "freight.h lacks `{line}`");
    }
    let statuses = &header[header.find("typedef enum freight_status {").expect("the status enum")..];
    let statuses = &statuses[..statuses.find("} freight_status;").expect("the end of the status enum")];
    let in_header = statuses.lines().filter(|l| l.trim_start().starts_with("FREIGHT_") && l.contains(" = ")).count();
    assert_eq!(in_header, freight_c::Status::ALL.len(), "freight.h has other status codes than freight_c::Status");
    assert!(header.contains("#define FREIGHT_DOMAIN_FROM_ENV UINT32_MAX"));
    assert_eq!(freight_c::FREIGHT_DOMAIN_FROM_ENV, u32::MAX);
}

#[test]
fn the_wait_modes_are_the_same_on_both_sides() {
    let header = header();
    for (name, value) in
        [("FREIGHT_WAIT_BLOCK", freight_c::FREIGHT_WAIT_BLOCK), ("FREIGHT_WAIT_SPIN", freight_c::FREIGHT_WAIT_SPIN)]
    {
        let line = format!("{name} = {value},");
        assert!(header.contains(&line), "freight.h lacks `{line}`");
    }
}
