//! The generator's output as a string, and its errors.

use std::path::{Path, PathBuf};

use freight_msg_gen::{Builder, GenError, ParseErrorKind};
use freight_testkit::PrivateDir;

/// A fresh package directory `<private dir>/<pkg>/msg` with the given files, and the
/// private directory, which removes it all when dropped.
fn package(pkg: &str, files: &[(&str, &str)]) -> (PrivateDir, PathBuf) {
    let root = PrivateDir::new("freight-msg-gen");
    let dir = root.path().join(pkg);
    std::fs::create_dir_all(dir.join("msg")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join("msg").join(name), text).unwrap();
    }
    (root, dir)
}

fn test_package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msgs/freight_test_msgs")
}

#[test]
fn emits_message_blocks() {
    let code = Builder::new().package_dir(test_package()).generate_string().unwrap();
    for expected in [
        "pub mod freight_test_msgs {",
        "pub struct Everything = \"freight_test_msgs/msg/Everything\" {",
        "pub struct Nothing = \"freight_test_msgs/msg/Nothing\" {}",
        "pub header: Header,",
        "use super::super::super::std_msgs::msg::Header;",
        "pub inners: Vec<Inner>,",
        "pub fixed_inners: [Inner; 2],",
        "pub few_inners: Vec<Inner> where (sequence(3)),",
        "pub data: Buffer<u8>,",
        "pub floats: Buffer<f32>,",
        "pub chars: Buffer<u8>,",
        "pub flags: Vec<bool>,",
        "pub names: Vec<String>,",
        "pub short_names: Vec<String> where (sequence(2), strings(4)),",
        "pub fixed: [f64; 3],",
        "pub covariance: super::super::super::__freight_msg_gen::FixedArray<f64, 36>,",
        "pub bounded: Vec<i16> where (sequence(4)),",
        "pub r#type: String,",
        "pub r#loop: u8,",
        "pub const NEG: i8 = -3;",
        "pub const BIG: u64 = 18446744073709551615;",
        "pub const HALF: f32 = 0.5;",
        "pub const GREETING: &'static str = \"hello # not a comment\";",
        "#[doc = \" A keyword as a field name.\"]",
        "#[doc = \" Default (from the `.msg` file): `42`.\"]",
        "pub with_default: i32 = 42,",
        "pub pair_default: [f64; 2] = [1.5, -2.0],",
        "#[doc = \" A message using every kind of field freight-msg-gen supports.\"]",
        // Dependencies from the shipped interfaces, and only those used.
        "pub struct Header = \"std_msgs/msg/Header\"",
        "pub struct Time = \"builtin_interfaces/msg/Time\"",
        "pub struct PoseWithCovariance = \"geometry_msgs/msg/PoseWithCovariance\"",
    ] {
        assert!(code.contains(expected), "missing `{expected}` in:\n{code}");
    }
    // `sensor_msgs` is there for `Image`, which the package's `Detect.srv`
    // uses; its other messages are not.
    assert!(!code.contains("pub struct PointCloud2"));
    assert!(!code.contains("Duration"));
}

#[test]
fn string_message_does_not_shadow_string() {
    let code = Builder::new().shipped_package("std_msgs").generate_string().unwrap();
    assert!(code.contains("pub struct String = \"std_msgs/msg/String\" {"));
    assert!(code.contains("pub data: ::std::string::String,"));
    assert!(code.contains("pub frame_id: String,"));
}

#[test]
fn local_package_shadows_shipped_and_resolves_header() {
    let (_root, dir) = package("std_msgs", &[("Header.msg", "int32 seq\n"), ("Uses.msg", "Header h\nHeader[] hs\n")]);
    let code = Builder::new().package_dir(&dir).generate_string().unwrap();
    assert!(code.contains("pub seq: i32,"));
    assert!(code.contains("pub hs: Vec<Header>,"));
    assert!(!code.contains("builtin_interfaces"));
}

#[test]
fn generate_writes_the_file() {
    let (_root, dir) = package("write_msgs", &[("A.msg", "B b\n"), ("B.msg", "uint8 x\n")]);
    let out = dir.join("out").join("gen.rs");
    Builder::new().package_dir(&dir).generate(&out).unwrap();
    let code = std::fs::read_to_string(&out).unwrap();
    assert!(code.contains("pub b: B,"));
    assert!(code.contains("use super::B;") || code.contains("use super::super::super::write_msgs::msg::B;"));
}

#[test]
fn unknown_message_type_names_file_and_line() {
    let (_root, dir) = package("bad_msgs", &[("A.msg", "# doc\nint32 x\nMissing m\n")]);
    match Builder::new().package_dir(&dir).generate_string().unwrap_err() {
        GenError::UnknownType { file, line, ty } => {
            assert!(file.ends_with("bad_msgs/msg/A.msg"), "{file:?}");
            assert_eq!(line, 3);
            assert_eq!(ty, "bad_msgs/msg/Missing");
        }
        e => panic!("{e}"),
    }
    let (_root, dir) = package("bad_msgs", &[("A.msg", "other_msgs/Thing t\n")]);
    let e = Builder::new().package_dir(&dir).generate_string().unwrap_err();
    assert!(e.to_string().contains("A.msg:1: unknown message type `other_msgs/msg/Thing`"), "{e}");
    // Without the shipped interfaces, Header is unknown too.
    let (_root, dir) = package("bad_msgs", &[("A.msg", "Header h\n")]);
    let e = Builder::new().package_dir(&dir).use_shipped_interfaces(false).generate_string().unwrap_err();
    assert!(matches!(e, GenError::UnknownType { .. }), "{e}");
}

#[test]
fn parse_errors_carry_the_path() {
    let (_root, dir) = package("bad_msgs", &[("A.msg", "int32 x\nwstring w\n")]);
    match Builder::new().package_dir(&dir).generate_string().unwrap_err() {
        GenError::Parse(e) => {
            assert!(e.file.ends_with("bad_msgs/msg/A.msg"));
            assert_eq!(e.line, 2);
            assert_eq!(*e.kind, ParseErrorKind::Unsupported("wstring".into()));
        }
        e => panic!("{e}"),
    }
}

#[test]
fn missing_dirs_and_packages() {
    let (_root, dir) = package("empty_pkg", &[]);
    std::fs::remove_dir(dir.join("msg")).unwrap();
    assert!(matches!(Builder::new().package_dir(&dir).generate_string(), Err(GenError::NoMsgDir { .. })));
    assert!(matches!(Builder::new().package_dir(dir.join("nope")).generate_string(), Err(GenError::Io { .. })));
    assert!(matches!(
        Builder::new().shipped_package("nav_msgs").generate_string(),
        Err(GenError::UnknownPackage { .. })
    ));
}

#[test]
fn a_srv_file_without_a_separator_is_an_error_at_its_end() {
    let root = PrivateDir::new("freight-msg-gen");
    let dir = root.path().join("my_srvs");
    std::fs::create_dir_all(dir.join("srv")).unwrap();
    std::fs::write(dir.join("srv").join("Broken.srv"), "bool data\nbool more\n").unwrap();
    match Builder::new().package_dir(&dir).generate_string() {
        Err(GenError::Parse(e)) => {
            assert_eq!(e.line, 2, "{e}");
            assert!(e.to_string().contains("---"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // An error in the response half names its line in the file.
    std::fs::write(dir.join("srv").join("Broken.srv"), "bool data\n---\nbool ok\nwstring text\n").unwrap();
    match Builder::new().package_dir(&dir).generate_string() {
        Err(GenError::Parse(e)) => {
            assert_eq!(e.line, 4, "{e}");
            assert!(matches!(*e.kind, ParseErrorKind::Unsupported(_)), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_srv_only_package_generates_its_services_and_what_they_use() {
    let code = Builder::new().package_dir(test_package()).generate_string().unwrap();
    for expected in [
        "pub mod srv {",
        "pub struct Detect_Request = \"freight_test_msgs/srv/Detect_Request\" {",
        "use super::super::super::sensor_msgs::msg::Image;",
        "pub image: Image,",
        "pub struct Detect_Response = \"freight_test_msgs/srv/Detect_Response\" {",
        "impl ::freight_msg::ServiceType for Detect {",
        "type Request = Detect_Request;",
        // The message the request uses, from the shipped interfaces.
        "pub struct Image = \"sensor_msgs/msg/Image\"",
    ] {
        assert!(code.contains(expected), "missing {expected:?}");
    }
}
