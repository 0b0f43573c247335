//! The rosbag2 schemas of freight's built-in types (`Builder::schemas`) are
//! what ROS 2 Jazzy's tools make of them: the RIHS01 type hashes equal those of
//! the `rosbags` Python package's `ROS2_JAZZY` type store and those in the
//! `.json` type descriptions of a stock ROS 2 Jazzy install, and the `ros2msg`
//! texts, read back by `rosbags`, define the fields that store has.
//!
//! The interpreter is `$FREIGHT_PYTHON` (default `python3`), which needs
//! `pip install rosbags`; set `FREIGHT_SKIP_PYTHON_INTEROP=1` to skip. The stock
//! install is the `.venv-ros-jazzy` that `make test` makes.

use std::collections::BTreeMap;

use freight_msg_gen::{shipped_interfaces_dir, Builder, TypeSchema};
use freight_testkit::{self as testkit, Lack};

mod rosbags;

/// Reads `[[type name, ros2msg, rihs01], ...]` on stdin; for each type, parses
/// the `ros2msg` text with rosbags and prints the types whose fields differ
/// from the store's (constants are not compared: freight's interfaces are
/// Humble's, checked by `interfaces_match_ros2.rs`, and Jazzy's
/// `sensor_msgs/NavSatStatus` has two more, `STATUS_UNKNOWN` and
/// `SERVICE_UNKNOWN`, which the type hash does not cover), then
/// the store's hash of the type, or (for a type the store lacks: freight's own
/// packages, the halves of services) the hash of what rosbags read from the text.
const SCRIPT: &str = r#"
import sys
try:
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg
    from rosbags.typesys.base import Nodetype
except ImportError:
    print("NO_ROSBAGS")
    sys.exit(3)
store = get_typestore(Stores.ROS2_JAZZY)
# Records: type name, ros2msg, rihs01, split by ASCII's unit and record separators.
for record in sys.stdin.read().split("\x1e"):
    if not record:
        continue
    name, text, _ = record.split("\x1f")
    try:
        types = get_types_from_msg(text, name)
    except Exception as e:
        print("UNREADABLE\t%s\t%r" % (name, e))
        continue
    # The root comes first; rosbags files a service half as pkg/srv/msg/Name.
    root = next(iter(types))
    types = {(name if t == root else t): d for t, d in types.items()}
    for t, (_, fields) in types.items():
        if t not in store.fielddefs:
            continue
        # The store has types from their IDL, where an empty message has
        # rosidl's hidden member; the .msg text has none.
        fields = fields or [("structure_needs_at_least_one_member", (Nodetype.BASE, ("uint8", 0)))]
        if fields != store.fielddefs[t][1]:
            print("DIFFERS\t%s\t%s\t%r\t%r" % (name, t, fields, store.fielddefs[t][1]))
    if name in store.fielddefs:
        print("HASH\t%s\t%s" % (name, store.hash_rihs01(name)))
    else:
        own = get_typestore(Stores.EMPTY)
        own.register(types)
        print("READ_HASH\t%s\t%s" % (name, own.hash_rihs01(name)))
"#;

/// Types whose rosbags hash is not ROS 2's: rosbags 0.11.9 hashes a `.msg`
/// `char` as FIELD_TYPE_CHAR (13), where rosidl, whose IDL makes `char` a
/// `uint8`, writes FIELD_TYPE_UINT8 (3); the stock `.json` files (and
/// `schema.rs`'s unit test) check these.
const ROSBAGS_HASHES_CHAR_WRONG: &[&str] = &["std_msgs/msg/Char"];

const TEST: &str = "schemas_match_rosbags_ros2_jazzy";

#[test]
fn schemas_match_rosbags_ros2_jazzy() {
    let schemas = Builder::built_ins().schemas().unwrap();
    assert!(schemas.len() >= 60, "{} built-in types", schemas.len());
    let Some(stdout) = rosbags::run(TEST, SCRIPT, &[], &script_input(&schemas)) else { return };

    let ours: BTreeMap<&str, &TypeSchema> = schemas.iter().map(|s| (s.type_name.as_str(), s)).collect();
    let mut problems = Vec::new();
    let (mut from_store, mut from_text) = (0, 0);
    for line in stdout.lines() {
        let parts: Vec<&str> = line.split('\t').collect();
        match parts.as_slice() {
            ["HASH", ty, theirs] => {
                from_store += 1;
                if ours[ty].rihs01 != *theirs && !ROSBAGS_HASHES_CHAR_WRONG.contains(ty) {
                    problems.push(format!("{ty}: RIHS01 {} (ours), {theirs} (rosbags' ROS2_JAZZY)", ours[ty].rihs01));
                }
            }
            ["READ_HASH", ty, theirs] => {
                from_text += 1;
                if ours[ty].rihs01 != *theirs {
                    problems
                        .push(format!("{ty}: RIHS01 {} (ours), {theirs} (rosbags, from our ros2msg)", ours[ty].rihs01));
                }
            }
            ["DIFFERS", ty, part, read, store] => {
                problems.push(format!("{ty}: our ros2msg defines {part} as {read}, the store as {store}"))
            }
            ["UNREADABLE", ty, e] => problems.push(format!("{ty}: rosbags cannot read our ros2msg: {e}")),
            _ => problems.push(format!("unexpected output `{line}`")),
        }
    }
    assert!(problems.is_empty(), "{} mismatches with ROS 2 Jazzy:\n{}", problems.len(), problems.join("\n"));
    assert_eq!(from_store + from_text, schemas.len(), "a type went unchecked:\n{stdout}");
    assert!(from_store >= 50, "only {from_store} types in rosbags' ROS2_JAZZY store");
}

/// Each schema as type name, `ros2msg` and hash, split by ASCII's unit (0x1f)
/// and record (0x1e) separators, which no `.msg` text contains.
fn script_input(schemas: &[TypeSchema]) -> String {
    schemas.iter().map(|s| format!("{}\x1f{}\x1f{}\x1e", s.type_name, s.ros2msg, s.rihs01)).collect()
}

/// The hash a stock type description file (rosidl's JSON) gives `type_name`:
/// the `hash_string` after its `type_name` entry in `type_hashes`.
fn stock_hash<'a>(json: &'a str, type_name: &str) -> Option<&'a str> {
    let hashes = &json[json.find("\"type_hashes\"")?..];
    let entry = &hashes[hashes.find(&format!("\"type_name\": \"{type_name}\""))?..];
    let value = &entry[entry.find("\"hash_string\": \"")? + "\"hash_string\": \"".len()..];
    value.get(..value.find('"')?)
}

/// The RIHS01 hashes equal those of the type description files that a stock
/// ROS 2 Jazzy install ships (`share/<pkg>/msg/<Name>.json`, and for a
/// service's halves `share/<pkg>/srv/<Service>.json`), for every built-in type
/// that has one (freight's own `tensor_msgs` has none).
#[test]
fn schemas_match_the_stock_ros2_jazzy_type_descriptions() {
    const TEST: &str = "schemas_match_the_stock_ros2_jazzy_type_descriptions";
    let share = shipped_interfaces_dir().join("../.venv-ros-jazzy/share");
    if !share.join("sensor_msgs/msg/Image.json").is_file() {
        return testkit::skip(
            TEST,
            Lack::Setup,
            &format!("no stock ROS 2 type descriptions at {} (make test installs them)", share.display()),
        );
    }
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    for schema in Builder::built_ins().schemas().unwrap() {
        let parts: Vec<&str> = schema.type_name.split('/').collect();
        let [package, folder, name] = parts.as_slice() else { panic!("type name {}", schema.type_name) };
        let file = match *folder {
            "srv" => name.trim_end_matches("_Request").trim_end_matches("_Response"),
            _ => name,
        };
        let path = share.join(package).join(folder).join(format!("{file}.json"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            assert_eq!(*package, "tensor_msgs", "no {} in the stock install", path.display());
            continue;
        };
        let stock = stock_hash(&text, &schema.type_name)
            .unwrap_or_else(|| panic!("{}: no hash of {}", path.display(), schema.type_name));
        if stock != schema.rihs01 {
            problems.push(format!("{}: {} (ours), {stock} (stock)", schema.type_name, schema.rihs01));
        }
        compared.push(schema.type_name.clone());
    }
    assert!(problems.is_empty(), "{} hashes differ from stock ROS 2 Jazzy:\n{}", problems.len(), problems.join("\n"));
    // Every package but tensor_msgs, the halves of services included.
    assert!(compared.len() >= 60, "only {} types compared: {compared:?}", compared.len());
    for ty in ["std_msgs/msg/Char", "std_msgs/msg/Empty", "sensor_msgs/msg/Image", "std_srvs/srv/Trigger_Request"] {
        assert!(compared.iter().any(|c| c == ty), "{ty} not compared");
    }
}
