//! Types outside freight's built-in ones, defined by a stock ROS 2 install:
//! every message type of the Jazzy and Kilted installs that `make test` puts in
//! `.venv-ros-jazzy` and `.venv-ros-kilted` gets its schema from the install's
//! `.msg` files (`Schema::from_share_dirs`, what `freight bag record` does for
//! such a type), with the RIHS01 hash of the install's own type description
//! (`share/<pkg>/msg/<Name>.json`).

use std::path::{Path, PathBuf};

use freight_bag::Schema;
use freight_testkit::{skip, Lack};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `hash_string` that `json` gives `type_name`.
fn stock_hash<'a>(json: &'a str, type_name: &str) -> Option<&'a str> {
    let entry = &json[json.find(&format!("\"type_name\": \"{type_name}\",\n      \"hash_string\""))?..];
    let value = &entry[entry.find("\"hash_string\": \"")? + "\"hash_string\": \"".len()..];
    value.get(..value.find('"')?)
}

fn every_message_matches(venv: &str) {
    let share = repo().join(venv).join("share");
    if !share.join("rcl_interfaces/msg/Log.msg").is_file() {
        let why = format!("no stock ROS 2 install at {} (make test installs it)", share.display());
        return skip(&format!("schemas_from_{venv}"), Lack::Setup, &why);
    }
    let mut compared = Vec::new();
    for package in std::fs::read_dir(&share).unwrap() {
        let package = package.unwrap().path();
        let Ok(files) = std::fs::read_dir(package.join("msg")) else { continue };
        for file in files {
            let file = file.unwrap().path();
            if file.extension().is_none_or(|e| e != "msg") {
                continue;
            }
            let name = |p: &Path| p.file_stem().unwrap().to_str().unwrap().to_owned();
            let type_name = format!("{}/msg/{}", name(&package), name(&file));
            let schema = Schema::from_share_dirs(&type_name, std::slice::from_ref(&share))
                .unwrap_or_else(|e| panic!("{venv}: {e}"));
            let json = std::fs::read_to_string(file.with_extension("json")).unwrap();
            assert_eq!(Some(schema.rihs01.as_ref()), stock_hash(&json, &type_name), "{venv}: {type_name}");
            assert_eq!(schema.ros2msg.split("\n=====").next(), Some(std::fs::read_to_string(&file).unwrap().as_str()));
            compared.push(type_name);
        }
    }
    // rcl_interfaces (/rosout, /parameter_events), the type descriptions and
    // lifecycle and action messages besides freight's own packages.
    assert!(compared.len() >= 100, "{venv}: only {compared:?}");
    for ty in ["rcl_interfaces/msg/Log", "rcl_interfaces/msg/ParameterEvent", "lifecycle_msgs/msg/TransitionEvent"] {
        assert!(compared.iter().any(|c| c == ty), "{venv}: {ty} not compared");
    }
}

#[test]
fn every_message_of_stock_jazzy_has_its_schema_and_hash() {
    every_message_matches(".venv-ros-jazzy");
}

#[test]
fn every_message_of_stock_kilted_has_its_schema_and_hash() {
    every_message_matches(".venv-ros-kilted");
}
