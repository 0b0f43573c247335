//! Every `.msg` definition freight ships in `interfaces/` matches ROS 2 Humble,
//! field by field and constant by constant, as the `rosbags` Python package
//! knows it (its built-in `ROS2_HUMBLE` type store).
//!
//! The interpreter is `$FREIGHT_PYTHON` (default `python3`), which needs
//! `pip install rosbags`; set `FREIGHT_SKIP_PYTHON_INTEROP=1` to skip.

use std::collections::BTreeMap;

use freight_msg_gen::{load_package, shipped_interfaces_dir, ArrayKind, MsgSpec, Value};
use freight_testkit::{self as testkit, Lack};

mod rosbags;

const SCRIPT: &str = r#"
import sys
try:
    from rosbags.typesys import Stores, get_typestore
except ImportError:
    print("NO_ROSBAGS")
    sys.exit(3)
store = get_typestore(Stores.ROS2_HUMBLE)

def base(node):
    kind, val = node
    if kind.name == "BASE":
        name, bound = val
        return name + ("<=%d" % bound if bound else "")
    return val

for ty in sys.argv[1:]:
    if ty not in store.fielddefs:
        print("MISSING\t%s" % ty)
        continue
    consts, fields = store.fielddefs[ty]
    for name, cty, value in consts:
        print("CONST\t%s\t%s\t%s\t%s" % (ty, name, cty, repr(value)))
    for name, (kind, val) in fields:
        if kind.name == "ARRAY":
            print("FIELD\t%s\t%s\t%s\tfixed\t%d" % (ty, name, base(val[0]), val[1]))
        elif kind.name == "SEQUENCE":
            print("FIELD\t%s\t%s\t%s\t%s\t%d" % (ty, name, base(val[0]), "bounded" if val[1] else "unbounded", val[1]))
        else:
            print("FIELD\t%s\t%s\t%s\tsingle\t0" % (ty, name, base((kind, val))))
"#;

/// Our definitions, in the script's line format.
fn ours(spec: &MsgSpec) -> Vec<String> {
    let ty = spec.type_name();
    let mut out = Vec::new();
    for c in &spec.constants {
        let value = match &c.value {
            Value::Bool(true) => "True".to_string(),
            Value::Bool(false) => "False".to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format!("{f:?}"),
            Value::String(s) => format!("'{s}'"),
        };
        out.push(format!("CONST\t{ty}\t{}\t{}\t{value}", c.name, c.ty.ros_name()));
    }
    for f in &spec.fields {
        let (kind, size) = match f.ty.array {
            ArrayKind::Single => ("single", 0),
            ArrayKind::Fixed(n) => ("fixed", n),
            ArrayKind::Bounded(n) => ("bounded", n),
            ArrayKind::Unbounded => ("unbounded", 0),
        };
        out.push(format!("FIELD\t{ty}\t{}\t{}\t{kind}\t{size}", f.name, f.ty.base.ros_name()));
    }
    if spec.fields.is_empty() {
        // ROS 2 gives an empty message one hidden byte.
        out.push(format!("FIELD\t{ty}\tstructure_needs_at_least_one_member\tuint8\tsingle\t0"));
    }
    out
}

const TEST: &str = "shipped_interfaces_match_rosbags_ros2_humble";

#[test]
fn shipped_interfaces_match_rosbags_ros2_humble() {
    let mut specs: BTreeMap<String, MsgSpec> = BTreeMap::new();
    for pkg in ["builtin_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs"] {
        let pkg = load_package(&shipped_interfaces_dir().join(pkg)).unwrap();
        assert!(!pkg.messages.is_empty());
        for m in pkg.messages {
            specs.insert(m.type_name(), m);
        }
    }
    assert!(specs.len() >= 50, "{} shipped types", specs.len());

    let names: Vec<&str> = specs.keys().map(String::as_str).collect();
    let Some(stdout) = rosbags::run(TEST, SCRIPT, &names, "") else { return };

    let mut theirs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for line in stdout.lines() {
        let parts: Vec<&str> = line.split('\t').collect();
        match parts.as_slice() {
            ["MISSING", ty] => problems.push(format!("{ty}: not in rosbags' ROS2_HUMBLE store")),
            [_, ty, ..] => theirs.entry(ty.to_string()).or_default().push(normalize(line)),
            _ => problems.push(format!("unexpected output `{line}`")),
        }
    }
    for (ty, spec) in &specs {
        let ours: Vec<String> = ours(spec).iter().map(|l| normalize(l)).collect();
        let theirs = theirs.get(ty).cloned().unwrap_or_default();
        if theirs.is_empty() {
            continue; // reported as MISSING
        }
        if ours != theirs {
            problems.push(format!("{ty}:\n  ours:    {ours:?}\n  rosbags: {theirs:?}"));
        }
    }
    assert!(problems.is_empty(), "mismatches with ROS 2 Humble:\n{}", problems.join("\n"));
}

/// Floats compared by value (`1e-05` vs `1e-5`).
fn normalize(line: &str) -> String {
    let mut parts: Vec<String> = line.split('\t').map(str::to_string).collect();
    if parts[0] == "CONST" && parts[3].starts_with("float") {
        if let Ok(v) = parts[4].parse::<f64>() {
            parts[4] = format!("{v:?}");
        }
    }
    parts.join("\t")
}

/// Every `.srv` freight ships matches the one of the stock ROS 2 Jazzy
/// install that `make test` puts in `.venv-ros-jazzy` (rosbags knows no
/// services): the same fields, in order, of the same types, both ways.
#[test]
fn shipped_services_match_the_stock_ros2_install() {
    const TEST: &str = "shipped_services_match_the_stock_ros2_install";
    let stock_root = shipped_interfaces_dir().join("../.venv-ros-jazzy/share");
    let ours = load_package(&shipped_interfaces_dir().join("std_srvs")).unwrap();
    assert!(ours.services.len() >= 3, "{} services", ours.services.len());
    let stock_dir = stock_root.join("std_srvs");
    if !stock_dir.join("srv").is_dir() {
        return testkit::skip(
            TEST,
            Lack::Setup,
            &format!("no stock std_srvs at {} (make test installs it)", stock_dir.display()),
        );
    }
    let stock = load_package(&stock_dir).unwrap();
    let shape = |m: &MsgSpec| -> Vec<(String, String)> {
        m.fields.iter().map(|f| (f.name.clone(), format!("{}{:?}", f.ty.base.ros_name(), f.ty.array))).collect()
    };
    for srv in &ours.services {
        let theirs = stock
            .services
            .iter()
            .find(|s| s.name == srv.name)
            .unwrap_or_else(|| panic!("stock ROS 2 has no std_srvs/srv/{}", srv.name));
        assert_eq!(shape(&srv.request), shape(&theirs.request), "{} request", srv.type_name());
        assert_eq!(shape(&srv.response), shape(&theirs.response), "{} response", srv.type_name());
    }
}
