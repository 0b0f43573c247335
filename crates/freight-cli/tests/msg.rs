//! `freight msg cpp` and `freight msg python`: the C++ header and the
//! Python package of a package of the user's own, and what they say of a
//! package they cannot read. (The Python suite imports and uses what
//! `freight msg python` writes: `python/tests/test_user_types.py`.)

use std::path::Path;
use std::process::Command;

fn freight(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_freight")).args(args).output().expect("running freight")
}

fn package(root: &Path, name: &str, msg: &str, text: &str) -> String {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("msg")).unwrap();
    std::fs::write(dir.join("msg").join(format!("{msg}.msg")), text).unwrap();
    dir.display().to_string()
}

#[test]
fn msg_cpp_writes_a_header_per_package_and_refuses_a_broken_file_with_its_line() {
    let root = std::env::temp_dir().join(format!("freight-msg-cpp-{}", std::process::id()));
    let out = root.join("out");
    let good = package(&root, "my_msgs", "Scan", "std_msgs/Header header\nfloat32[] ranges\n");
    let ran = freight(&["msg", "cpp", "--out", &out.display().to_string(), &good]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let header = out.join("freight/msgs/my_msgs.hpp");
    assert_eq!(String::from_utf8_lossy(&ran.stdout), format!("{}\n", header.display()));
    let source = std::fs::read_to_string(&header).unwrap();
    assert!(source.contains("struct Scan {"), "{source}");
    assert!(source.contains("::freight::Buffer<float> ranges{};"), "{source}");
    assert!(source.contains("static constexpr const char *DEFINITION ="), "{source}");
    // Only the package asked for: std_msgs comes with freight's own headers.
    assert!(!out.join("freight/msgs/std_msgs.hpp").exists());

    let bad = package(&root, "bad_msgs", "Broken", "uint32 fine\nnot_a_type field\n");
    let ran = freight(&["msg", "cpp", "--out", &out.display().to_string(), &bad]);
    assert!(!ran.status.success());
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("Broken.msg:2"), "{said}");

    let ran =
        freight(&["msg", "cpp", "--out", &out.display().to_string(), &root.join("nowhere").display().to_string()]);
    assert!(!ran.status.success());
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("nowhere"), "{said}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn msg_python_writes_a_package_whose_modules_carry_the_definitions() {
    let root = std::env::temp_dir().join(format!("freight-msg-python-{}", std::process::id()));
    let out = root.join("out");
    let good = package(&root, "my_msgs", "Scan", "std_msgs/Header header\nfloat32[] ranges # \"m\" \\ s\n");
    std::fs::create_dir_all(root.join("my_msgs/srv")).unwrap();
    std::fs::write(root.join("my_msgs/srv/Echo.srv"), "string text\n---\nstring text\n").unwrap();
    let ran = freight(&["msg", "python", "--out", &out.display().to_string(), &good]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let printed = String::from_utf8_lossy(&ran.stdout);
    for file in ["__init__.py", "msg.py", "msg.pyi", "srv.py", "srv.pyi"] {
        assert!(printed.contains(&out.join("my_msgs").join(file).display().to_string()), "{printed}");
    }
    let msg = std::fs::read_to_string(out.join("my_msgs/msg.py")).unwrap();
    assert!(msg.contains("Scan = _message_class(\n    \"my_msgs/msg/Scan\",\n"), "{msg}");
    // The definition as rosbag2 records it: the type's text, then Header's.
    assert!(msg.contains(r#"        "float32[] ranges # \"m\" \\ s\n""#), "{msg}");
    assert!(msg.contains("\"MSG: std_msgs/Header\\n\""), "{msg}");
    let srv = std::fs::read_to_string(out.join("my_msgs/srv.py")).unwrap();
    assert!(srv.contains("Echo = _service_class(\n    \"my_msgs/srv/Echo\",\n"), "{srv}");
    // The stubs: Header from freight's built-in module, the service's halves by name.
    let stub = std::fs::read_to_string(out.join("my_msgs/msg.pyi")).unwrap();
    assert!(stub.contains("from freight.msgs import std_msgs\n"), "{stub}");
    assert!(stub.contains("class Scan:") && stub.contains("    header: std_msgs.Header\n"), "{stub}");
    assert!(stub.contains("    ranges: npt.NDArray[np.float32]\n"), "{stub}");
    let stub = std::fs::read_to_string(out.join("my_msgs/srv.pyi")).unwrap();
    assert!(stub.contains("class Echo:\n") && stub.contains("    Request: type[Echo_Request]\n"), "{stub}");
    // Only the package asked for: std_msgs comes with freight.
    assert!(!out.join("std_msgs").exists());

    let bad = package(&root, "bad_msgs", "Broken", "uint32 fine\nnot_a_type field\n");
    let ran = freight(&["msg", "python", "--out", &out.display().to_string(), &bad]);
    assert!(!ran.status.success());
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("Broken.msg:2"), "{said}");
    let _ = std::fs::remove_dir_all(&root);
}
