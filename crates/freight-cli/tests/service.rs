//! `freight service` against real services: in this test process (shared
//! memory) and, from a second "host", over DDS.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use freight::msgs::std_srvs::{SetBool, SetBool_Response, Trigger, Trigger_Response};
use freight::{Context, DdsConfig};
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
    let ctx = Context::builder().domain_id(80).dds_config(DdsConfig::loopback()).create().unwrap();
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

/// A `SetBool` server on `name` in this process, served by a thread until
/// dropped; the requests' `data` come out of `requests`.
struct LightServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    requests: mpsc::Receiver<bool>,
}

impl LightServer {
    fn start(ctx: Context, name: String) -> LightServer {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, requests) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel();
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let node = ctx.create_node("light").unwrap();
                let mut service = node
                    .create_service::<SetBool>(&name, move |request| {
                        let _ = tx.send(request.data);
                        SetBool_Response { success: request.data, message: format!("light {}", request.data) }
                    })
                    .unwrap();
                ready_tx.send(()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    service.serve(Duration::from_millis(50)).unwrap();
                }
            }
        });
        ready.recv_timeout(Duration::from_secs(20)).expect("the server starts");
        LightServer { stop, thread: Some(thread), requests }
    }
}

impl Drop for LightServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn service_call_sends_the_yaml_request_and_prints_the_reply() {
    let name = format!("/cli_call_{}", std::process::id());
    let server = LightServer::start(Context::builder().domain_id(81).local_only().create().unwrap(), name.clone());

    let (ok, out, err) = freight(&["service", "call", &name, "std_srvs/SetBool", "{data: true}", "--domain", "81"]);
    assert!(ok, "{err}");
    assert_eq!(server.requests.try_recv(), Ok(true));
    let (request, response) = out.split_once("---\n").unwrap_or_else(|| panic!("two documents: {out}"));
    assert_eq!(request, format!("# request to {name} (std_srvs/srv/SetBool)\ndata: true\n"));
    let response = response.split_once('\n').map(|(comment, rest)| {
        assert!(comment.starts_with("# response in ") && comment.ends_with(" ms"), "{comment}");
        rest
    });
    assert_eq!(response, Some("success: true\nmessage: light true\n---\n"));

    // Nothing given: every field its default.
    let (ok, out, err) = freight(&["service", "call", &name, "std_srvs/srv/SetBool", "--domain", "81"]);
    assert!(ok, "{err}");
    assert!(out.contains("data: false\n---\n") && out.contains("message: light false\n"), "{out}");
    assert_eq!(server.requests.try_recv(), Ok(false));
}

#[test]
fn service_call_with_a_rate_calls_until_it_is_told_to_stop() {
    let name = format!("/cli_call_rate_{}", std::process::id());
    let server = LightServer::start(Context::builder().domain_id(82).local_only().create().unwrap(), name.clone());
    let mut child = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["service", "call", &name, "std_srvs/srv/SetBool", "data: true", "-r", "50", "--domain", "82"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run freight");
    let stdout = child.stdout.take().expect("piped");
    let mut responses = 0;
    for line in BufReader::new(stdout).lines() {
        if line.expect("read stdout").starts_with("# response in ") {
            responses += 1;
            if responses == 3 {
                // SAFETY: kill(2) on our own child's pid has no memory effects.
                assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
            }
        }
    }
    let status = child.wait().expect("wait for freight");
    assert!(status.success(), "SIGTERM ends a repeated call cleanly: {status}");
    assert!(responses >= 3, "{responses} responses");
    assert_eq!(server.requests.try_iter().count(), responses, "one request per response printed");
}

#[test]
fn service_call_refuses_wrong_values_and_says_when_nobody_answers() {
    let started = Instant::now();
    let (ok, _, err) = freight(&["service", "call", "/x", "std_srvs/srv/SetBool", "{data: 1}"]);
    assert!(!ok);
    assert!(err.contains("field data: expected a boolean, got an integer"), "{err}");
    let (ok, _, err) = freight(&["service", "call", "/x", "std_srvs/srv/SetBool", "{light: true}"]);
    assert!(!ok);
    assert!(err.contains("has no field `light`; its fields are: data"), "{err}");
    let (ok, _, err) = freight(&["service", "call", "/x", "std_srvs/srv/SetBool", "{data: [true"]);
    assert!(!ok);
    assert!(err.contains("not YAML"), "{err}");
    let (ok, _, err) = freight(&["service", "call", "/x", "my_srvs/srv/Nothing"]);
    assert!(!ok);
    assert!(err.contains("my_srvs/srv/Nothing is not a service type") && err.contains("std_srvs/srv/Trigger"), "{err}");
    // None of these waited for anything.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    let name = format!("/cli_call_nobody_{}", std::process::id());
    let (ok, _, err) =
        freight(&["service", "call", &name, "std_srvs/srv/Trigger", "--timeout", "0.5", "--domain", "83"]);
    assert!(!ok);
    assert!(err.contains(&format!("no server of {name} within 500ms")), "{err}");
}

#[test]
fn service_call_reaches_a_server_on_another_host_through_dds() {
    const TEST: &str = "service_call_reaches_a_server_on_another_host_through_dds";
    if !other_host_available(TEST) {
        return;
    }
    let name = format!("/cli_remote_call_{}", std::process::id());
    let ctx = Context::builder().domain_id(84).dds_config(DdsConfig::loopback()).create().unwrap();
    let server = LightServer::start(ctx, name.clone());
    let loopback = concat!(env!("CARGO_MANIFEST_DIR"), "/../freight-dds/loopback.xml");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", OTHER_HOST_MOUNTS, env!("CARGO_BIN_EXE_freight")])
        .args(["service", "call", &name, "std_srvs/srv/SetBool", "{data: true}", "--domain", "84", "--timeout", "20"])
        .env("CYCLONEDDS_URI", format!("file://{loopback}"))
        .output()
        .expect("run freight");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("success: true\nmessage: light true\n"), "{stdout}");
    assert_eq!(server.requests.try_recv(), Ok(true));
}
