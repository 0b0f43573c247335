//! The expected texts are what `ros2 topic echo` (rosidl_runtime_py's
//! `message_to_yaml`, PyYAML 6) prints for the same message.

use super::{python_float, style, Style, YamlOptions};
use crate::msgs::sensor_msgs::{PointCloud2, PointField};
use crate::msgs::std_msgs::Header;
use crate::{message, Buffer, Message};

message! {
    /// A point with a name.
    pub struct Point = "test_msgs/msg/Point" {
        pub x: f64,
        pub label: String,
    }
}

message! {
    /// No fields.
    pub struct Nothing = "test_msgs/msg/Nothing" {}
}

message! {
    /// One field of each kind.
    pub struct Everything = "test_msgs/msg/Everything" {
        pub flag: bool,
        pub small: i8,
        pub big: u64,
        pub ratio: f32,
        pub precise: f64,
        pub name: String,
        pub names: Vec<String>,
        pub triple: [f64; 3],
        pub points: Vec<Point>,
        pub nothing: Nothing,
        pub r#type: u8,
        pub samples: Buffer<f32>,
    }
}

fn everything() -> Everything {
    Everything {
        flag: true,
        small: -3,
        big: u64::MAX,
        ratio: 0.1,
        precise: 0.5,
        name: String::new(),
        names: vec!["a b".into(), "123".into()],
        triple: [1.0, -0.0, 1e-5],
        points: vec![Point { x: 2.0, label: "on".into() }, Point { x: 1e16, label: "x: y".into() }],
        nothing: Nothing {},
        r#type: 7,
        samples: Buffer::from(vec![0.25f32, 3.0]),
    }
}

fn options(truncate_length: Option<usize>, no_arr: bool, no_str: bool) -> YamlOptions {
    YamlOptions { truncate_length, no_arr, no_str }
}

#[test]
fn nested_messages_are_indented_by_two_spaces() {
    let h = Header { stamp: crate::msgs::builtin_interfaces::Time { sec: 5, nanosec: 7 }, frame_id: "cam".into() };
    assert_eq!(h.to_yaml(&YamlOptions::default()), "stamp:\n  sec: 5\n  nanosec: 7\nframe_id: cam\n");
}

#[test]
fn every_kind_of_field_is_printed_as_ros2_prints_it() {
    let expected = "\
flag: true
small: -3
big: 18446744073709551615
ratio: 0.10000000149011612
precise: 0.5
name: ''
names:
- a b
- '123'
triple:
- 1.0
- -0.0
- 1.0e-05
points:
- x: 2.0
  label: 'on'
- x: 1.0e+16
  label: 'x: y'
nothing: {}
type: 7
samples:
- 0.25
- 3.0
";
    assert_eq!(everything().to_yaml(&YamlOptions::default()), expected);
}

#[test]
fn a_message_without_fields_is_an_empty_mapping() {
    assert_eq!(Nothing {}.to_yaml(&YamlOptions::default()), "{}\n");
}

#[test]
fn empty_sequences_are_flow_style() {
    let m = Everything { names: vec![], points: vec![], samples: Buffer::new(), ..everything() };
    let yaml = m.to_yaml(&YamlOptions::default());
    assert!(yaml.contains("\nnames: []\n") && yaml.contains("\npoints: []\n"), "{yaml}");
    assert!(yaml.ends_with("\nsamples: []\n"), "{yaml}");
}

#[test]
fn strings_are_quoted_only_where_yaml_needs_it() {
    let plain = [
        "cam",
        "bgra8",
        "it's",
        "a b",
        "x:y",
        "a#b",
        "-x",
        "héllo",
        "1.2.3",
        "0x1g",
        "0o7",
        "1e5x",
        "2001-12-14x",
        "Yes!",
    ];
    for s in plain {
        assert_eq!(style(s, false), Style::Plain, "{s:?}");
    }
    let single = [
        "",
        "123",
        "-1",
        "0755",
        "1_000",
        "0x1F",
        "0b101",
        "1:30",
        "1.5",
        ".5",
        "1.",
        "-.inf",
        ".nan",
        "yes",
        "No",
        "on",
        "OFF",
        "true",
        "null",
        "~",
        "<<",
        "=",
        "2001-12-14",
        "2001-12-14 21:59:43.10 -5",
        "a: b",
        "x #y",
        "- x",
        "#x",
        "*x",
        "&x",
        "!x",
        "[x",
        "{x",
        "|x",
        ">x",
        "'x",
        "\"x",
        "%x",
        "@x",
        "`x",
        "? x",
        ": x",
        "...",
        "---x",
        " lead",
        "trail ",
        "a\nb",
        "a\n",
    ];
    for s in single {
        assert_eq!(style(s, false), Style::SingleQuoted, "{s:?}");
    }
    for s in ["tab\there", "cr\r", "nul\0", "a \nb", "a\n b", "bom\u{feff}"] {
        assert_eq!(style(s, false), Style::DoubleQuoted, "{s:?}");
    }
    // `1e5` has no point, so YAML 1.1 reads it as a string.
    assert_eq!(style("1e5", false), Style::Plain);
}

#[test]
fn quoted_strings_escape_as_pyyaml_does() {
    let p = |s: &str| Point { x: 0.0, label: s.into() }.to_yaml(&YamlOptions::default());
    assert_eq!(p("it's 'quoted'"), "x: 0.0\nlabel: it's 'quoted'\n");
    assert_eq!(p("'quoted'"), "x: 0.0\nlabel: '''quoted'''\n");
    assert_eq!(p("tab\t\"q\" \\ \u{1}\u{85}"), "x: 0.0\nlabel: \"tab\\t\\\"q\\\" \\\\ \\x01\\N\"\n");
    // A line break in single quotes is written twice (once folds to a space),
    // and the next line is indented under the key.
    assert_eq!(p("two\nlines"), "x: 0.0\nlabel: 'two\n\n  lines'\n");
}

#[test]
fn sequences_up_to_the_limit_are_printed_in_full() {
    let names: Vec<String> = (0..3).map(|i| i.to_string()).collect();
    let m = Everything { names, ..everything() };
    let yaml = m.to_yaml(&options(Some(3), false, false));
    assert!(yaml.contains("\nnames:\n- '0'\n- '1'\n- '2'\ntriple:\n"), "{yaml}");
}

#[test]
fn sequences_over_the_limit_end_with_an_ellipsis() {
    let m = Everything { names: vec!["a".into(), "b".into(), "c".into()], ..everything() };
    let yaml = m.to_yaml(&options(Some(2), false, false));
    assert!(yaml.contains("\nnames:\n- a\n- b\n- '...'\ntriple:\n- 1.0\n- -0.0\n- '...'\npoints:\n"), "{yaml}");
    // Each item is truncated too.
    let yaml = m.to_yaml(&options(Some(0), false, false));
    assert!(yaml.contains("\nnames:\n- '...'\n"), "{yaml}");
}

#[test]
fn long_strings_are_truncated_by_characters() {
    let long = "é".repeat(130);
    let yaml = Point { x: 0.0, label: long.clone() }.to_yaml(&YamlOptions::default());
    assert_eq!(yaml, format!("x: 0.0\nlabel: {}...\n", "é".repeat(128)));
    let yaml = Point { x: 0.0, label: long.clone() }.to_yaml(&options(None, false, false));
    assert_eq!(yaml, format!("x: 0.0\nlabel: {long}\n"));
}

#[test]
fn a_large_buffer_shows_its_first_elements_and_says_how_many_it_has() {
    let cloud =
        PointCloud2 { data: Buffer::from((0..1000u32).map(|i| i as u8).collect::<Vec<_>>()), ..Default::default() };
    let yaml = cloud.to_yaml(&YamlOptions::default());
    let head: String = (0..128).map(|i| format!("- {i}\n")).collect();
    assert!(
        yaml.contains(&format!("\ndata:  # 1000 elements (uint8) in cpu\n{head}- '...'\nis_dense: false\n")),
        "{yaml}"
    );
    // Up to the limit it is exactly what ROS 2 prints, without a comment.
    let cloud = PointCloud2 { data: Buffer::from(vec![1u8; 128]), ..Default::default() };
    let yaml = cloud.to_yaml(&YamlOptions::default());
    assert!(yaml.contains("\ndata:\n- 1\n") && !yaml.contains('#') && !yaml.contains("..."), "{yaml}");
}

#[test]
fn a_buffer_that_cannot_be_read_is_an_empty_sequence_with_the_reason() {
    let slot = crate::RawBuffer::loan_slot(0, 8, crate::BackendKind::Shm);
    let cloud = PointCloud2 { data: Buffer::from_raw(slot).expect("whole bytes"), ..Default::default() };
    let yaml = cloud.to_yaml(&YamlOptions::default());
    let line = yaml.lines().find(|l| l.starts_with("data:")).unwrap_or_default();
    assert!(line.starts_with("data: []  # 8 elements (uint8) in shm; not readable here: "), "{yaml}");
    assert!(line.contains("loan"), "{line}");
}

#[test]
fn full_length_prints_every_element() {
    let cloud = PointCloud2 { data: Buffer::from(vec![9u8; 1000]), ..Default::default() };
    let yaml = cloud.to_yaml(&options(None, false, false));
    assert_eq!(yaml.lines().filter(|l| *l == "- 9").count(), 1000);
    assert!(!yaml.contains('#'), "{yaml}");
}

#[test]
fn no_arr_and_no_str_summarize_fields_as_ros2_does() {
    let mut m = everything();
    m.samples = Buffer::from(vec![0f32; 33]);
    let cloud = PointCloud2 {
        fields: vec![PointField { name: "x".into(), ..Default::default() }],
        data: Buffer::from(vec![0u8; 12]),
        ..Default::default()
    };
    let yaml = cloud.to_yaml(&options(Some(128), true, false));
    assert!(yaml.contains("\nfields: '<sequence type: sensor_msgs/msg/PointField, length: 1>'\n"), "{yaml}");
    assert!(yaml.contains("\ndata: '<sequence type: uint8, length: 12>'\n"), "{yaml}");
    let yaml = m.to_yaml(&options(Some(128), true, true));
    assert!(yaml.contains("\nname: '<string length: <0>>'\n"), "{yaml}");
    assert!(yaml.contains("\nnames: '<sequence type: string, length: 2>'\n"), "{yaml}");
    assert!(yaml.contains("\ntriple: '<array type: double[3]>'\n"), "{yaml}");
    assert!(yaml.contains("\nsamples: '<sequence type: float, length: 33>'\n"), "{yaml}");
    // Strings inside sequences of messages are summarized too; the sequence
    // itself only with --no-arr.
    let yaml = m.to_yaml(&options(Some(128), false, true));
    assert!(yaml.contains("\n  label: '<string length: <4>>'\n"), "{yaml}");
}

#[test]
fn floats_are_printed_as_python_repr() {
    let cases: &[(f64, &str)] = &[
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.5, "0.5"),
        (100.0, "100.0"),
        (123.456, "123.456"),
        (0.0001, "0.0001"),
        (0.00001, "1.0e-05"),
        (1.5e-7, "1.5e-07"),
        (1e15, "1000000000000000.0"),
        (1e16, "1.0e+16"),
        (1.2345678901234567e17, "1.2345678901234566e+17"),
        (-2.5e300, "-2.5e+300"),
        (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        (5e-324, "5.0e-324"),
        (f64::from(0.1f32), "0.10000000149011612"),
        (f64::NAN, ".nan"),
        (f64::INFINITY, ".inf"),
        (f64::NEG_INFINITY, "-.inf"),
    ];
    for (x, text) in cases {
        assert_eq!(python_float(*x), *text, "{x:e}");
    }
}
