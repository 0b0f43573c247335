//! `freight service` against real services: in this test process (shared
//! memory) and, from a second "host", over DDS.

use std::process::Command;

use freight::msgs::std_srvs::{SetBool, SetBool_Response, Trigger, Trigger_Response};
use freight::Context;
use freight_testkit::{other_host_available, OTHER_HOST_MOUNTS};

fn freight(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_freight")).args(args).output().expect("run freight");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn service_list_and_type_show_this_hosts_services() {
    let ctx = Context::builder().domain_id(79).local_only().create().unwrap();
    let node = ctx.create_node_with_namespace("arm", "/robot").unwrap();
    let base = format!("/cli_srv_{}", std::process::id());
    let _enable = node.create_service::<SetBool>(&format!("{base}/enable"), |_| SetBool_Response::default()).unwrap();
    let _home = node.create_service::<Trigger>(&format!("{base}/home"), |_| Trigger_Response::default()).unwrap();
    // A topic is not a service.
    let _topic = node.create_publisher::<freight::msgs::std_msgs::Bool>(&format!("{base}/state"), 1).unwrap();

    let (ok, out, err) = freight(&["service", "list", "-t", "--domain", "79", "--spin-time", "0"]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{base}/enable [std_srvs/srv/SetBool]\n")), "{out}");
    assert!(out.contains(&format!("{base}/home [std_srvs/srv/Trigger]\n")), "{out}");
    assert!(!out.contains(&format!("{base}/state")), "{out}");

    let (ok, out, err) = freight(&["service", "type", &format!("{base}/enable"), "--domain", "79", "--spin-time", "0"]);
    assert!(ok, "{err}");
    assert_eq!(out, "std_srvs/srv/SetBool\n");

    let (ok, _, err) = freight(&["service", "type", &format!("{base}/none"), "--domain", "79", "--spin-time", "0"]);
    assert!(!ok);
    assert!(err.contains("no service") && err.contains("freight service list"), "{err}");
}

#[test]
fn service_list_sees_services_of_other_hosts_through_dds() {
    const TEST: &str = "service_list_sees_services_of_other_hosts_through_dds";
    if !other_host_available(TEST) {
        return;
    }
    let ctx = Context::builder().domain_id(80).dds_config(freight::DdsConfig::loopback()).create().unwrap();
    let node = ctx.create_node("remote_arm").unwrap();
    let name = format!("/cli_remote_srv_{}", std::process::id());
    let _service = node.create_service::<SetBool>(&name, |_| SetBool_Response::default()).unwrap();
    let loopback = concat!(env!("CARGO_MANIFEST_DIR"), "/../freight-dds/loopback.xml");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", OTHER_HOST_MOUNTS, env!("CARGO_BIN_EXE_freight")])
        .args(["service", "list", "-t", "--domain", "80", "--spin-time", "2"])
        .env("CYCLONEDDS_URI", format!("file://{loopback}"))
        .output()
        .expect("run freight");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("{name} [std_srvs/srv/SetBool]\n")), "{stdout}");
}
