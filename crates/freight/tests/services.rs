//! Services: calls in one process, across processes through shared memory,
//! and across "hosts" over DDS; what a client sees when there is no server,
//! when a server never answers, and when a server's process dies mid-call.
//!
//! Children are this test binary re-run on the test's own name with
//! `FREIGHT_SRV_ROLE=<role>`; they report on stdout in lines marked `#srv# `
//! and end when their stdin closes.

mod common;

use std::time::{Duration, Instant};

use common::Peer;

use freight::{
    BackendKind, BackendSet, Buffer, CallError, Context, DdsConfig, Executor, Node, Sample, ServiceOptions,
    ServiceType, Transport,
};
use freight_testkit::{other_host_available, OTHER_HOST_MOUNTS};

freight::message! {
    /// Bytes to check.
    pub struct ChecksumRequest = "freight_test/srv/Checksum_Request" {
        pub salt: u64,
        pub data: Buffer<u8>,
    }
}

freight::message! {
    /// The sum of the bytes plus the salt, how the request came, and the
    /// bytes back, reversed.
    pub struct ChecksumResponse = "freight_test/srv/Checksum_Response" {
        pub sum: u64,
        pub transport: String,
        pub reversed: Buffer<u8>,
    }
}

/// A service with large fields both ways.
pub struct Checksum;

impl ServiceType for Checksum {
    const TYPE_NAME: &'static str = "freight_test/srv/Checksum";
    type Request = ChecksumRequest;
    type Response = ChecksumResponse;
}

fn checksum(request: Sample<ChecksumRequest>) -> ChecksumResponse {
    let bytes = request.data.as_bytes().expect("host bytes");
    let sum = bytes.iter().map(|&b| u64::from(b)).sum::<u64>() + request.salt;
    let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
    ChecksumResponse { sum, transport: format!("{:?}", request.info().transport), reversed: Buffer::from(reversed) }
}

fn request(salt: u64, len: usize) -> ChecksumRequest {
    ChecksumRequest { salt, data: Buffer::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>()) }
}

fn expected_sum(salt: u64, len: usize) -> u64 {
    (0..len).map(|i| (i % 251) as u64).sum::<u64>() + salt
}

const T: Duration = Duration::from_secs(10);
const ROLE: &str = "FREIGHT_SRV_ROLE";
const NAME: &str = "FREIGHT_SRV_NAME";
const DOMAIN: &str = "FREIGHT_SRV_DOMAIN";
const MARK: &str = "#srv# ";

fn service_name(name: &str) -> String {
    format!("/srv_{}_{name}", std::process::id())
}

fn node(name: &str) -> Node {
    Context::new().unwrap().create_node(name).unwrap()
}

/// This run's DDS domain (children inherit it): 200..=229, away from the
/// other test files' domains.
fn domain() -> u32 {
    std::env::var(DOMAIN).ok().and_then(|d| d.parse().ok()).unwrap_or(200 + std::process::id() % 30)
}

fn network_node(name: &str) -> Node {
    Context::builder()
        .domain_id(domain())
        .dds_config(DdsConfig::loopback())
        .create()
        .expect("context")
        .create_node(name)
        .expect("node")
}

// ---------------------------------------------------------------------------
// Children
// ---------------------------------------------------------------------------

/// This test binary on `test` in `role`, for the service `name`; `mounts`
/// as [`Peer::spawn`] takes them.
fn spawn(test: &str, role: &str, name: &str, mounts: Option<&str>) -> Peer {
    let envs = [(ROLE, role.to_string()), (NAME, name.to_string()), (DOMAIN, domain().to_string())];
    Peer::spawn(test, &envs, mounts, MARK)
}

/// Runs the child role if this process is a child; true if it was.
fn child() -> bool {
    let Ok(role) = std::env::var(ROLE) else { return false };
    let name = std::env::var(NAME).expect("the service's name");
    // Ends the child when the parent closes its stdin.
    let done = common::stdin_closed();
    match role.as_str() {
        // Serves Checksum until stdin closes.
        "server" | "network_server" => {
            let node = if role == "server" { node("srv_child") } else { network_node("srv_child") };
            let mut service = node.create_service::<Checksum>(&name, checksum).expect("service");
            println!("{MARK}READY");
            while done.try_recv().is_err() {
                service.serve(Duration::from_millis(20)).expect("serve");
            }
        }
        // Says it got a request and never answers it.
        "stuck_server" => {
            let node = node("srv_stuck");
            let mut service = node
                .create_service::<Checksum>(&name, |_| {
                    println!("{MARK}GOT");
                    std::thread::sleep(Duration::from_secs(3600));
                    ChecksumResponse::default()
                })
                .expect("service");
            println!("{MARK}READY");
            service.serve(T).expect("serve");
        }
        // Takes requests in (fake) device memory as they are and answers
        // each with the bytes reversed in a device loan, until stdin closes.
        "device_server" => {
            let node = node("srv_device");
            let server = node.create_service_server_with_options::<Checksum>(&name, device_options()).expect("server");
            println!("{MARK}READY");
            while done.try_recv().is_err() {
                let Some((request, id)) = server.take_request(Duration::from_millis(20)).expect("take") else {
                    continue;
                };
                let bytes = request.data.to_vec().expect("the request's bytes");
                println!("{MARK}GOT {} {}", request.backend(), bytes.len());
                let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
                let mut reply = server.loan_response(&[reversed.len()]).expect("a reply loan");
                reply.write_buffer_from_host(0, 0, &reversed).expect("writing the reply");
                // SAFETY: the one buffer was written whole above.
                let mut reply = unsafe { reply.assume_init() };
                reply.sum = bytes.iter().map(|&b| u64::from(b)).sum::<u64>() + request.salt;
                server.send_loaned_response(id, reply).expect("the reply");
            }
        }
        other => panic!("unknown role {other}"),
    }
    true
}

// ---------------------------------------------------------------------------
// In one process
// ---------------------------------------------------------------------------

#[test]
fn a_call_in_one_process_is_answered_by_pointer() {
    let n = node("srv_intra");
    let name = service_name("intra");
    let mut service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(client.wait_for_service(T));
    assert_eq!(client.server_count(), 1);
    let pending = client.call_async(request(7, 1 << 20)).unwrap();
    assert_eq!(service.serve(T).unwrap(), 1);
    let reply = pending.wait(T).unwrap();
    assert_eq!(reply.sum, expected_sum(7, 1 << 20));
    assert_eq!(reply.transport, "Intra");
    assert_eq!(reply.info().transport, Transport::Intra);
    let sent = request(7, 1 << 20);
    let reversed: Vec<u8> = sent.data.as_bytes().unwrap().iter().rev().copied().collect();
    assert_eq!(reply.reversed.as_bytes().unwrap(), &reversed[..]);
}

#[test]
fn pending_calls_get_their_own_replies_and_other_clients_theirs() {
    let n = node("srv_many");
    let name = service_name("many");
    let mut service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let clients = [n.create_client::<Checksum>(&name).unwrap(), n.create_client::<Checksum>(&name).unwrap()];
    let mut pending = Vec::new();
    for salt in 0..6u64 {
        let c = &clients[salt as usize % 2];
        pending.push((salt, c.call_async(request(salt, 100 + salt as usize)).unwrap()));
    }
    let mut answered = 0;
    while answered < 6 {
        answered += service.serve(T).unwrap();
    }
    // Collected in reverse order: each call finds its own reply.
    for (salt, call) in pending.into_iter().rev() {
        assert_eq!(call.wait(T).unwrap().sum, expected_sum(salt, 100 + salt as usize), "call {salt}");
    }
}

#[test]
fn an_executor_serves_services() {
    let n = node("srv_exec");
    let name = service_name("exec");
    let service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let mut exec = Executor::new();
    exec.add_service(service);
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let client = n.create_client::<Checksum>(&name).unwrap();
    for salt in 0..3 {
        assert_eq!(client.call(request(salt, 64), T).unwrap().sum, expected_sum(salt, 64));
    }
    stop.stop();
    spinner.join().unwrap().unwrap();
}

#[test]
fn a_call_without_a_server_fails_at_once_and_one_never_answered_times_out() {
    let n = node("srv_none");
    let name = service_name("none");
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(!client.service_is_ready());
    let t0 = Instant::now();
    assert!(!client.wait_for_service(Duration::from_millis(100)));
    assert!(t0.elapsed() >= Duration::from_millis(100));
    match client.call(request(0, 8), T) {
        Err(CallError::NoServer { service }) => assert_eq!(service, name),
        other => panic!("{other:?}"),
    }
    // A server that never serves: the call times out, and the reply that
    // comes after is dropped, not given to the next call.
    let mut service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let t0 = Instant::now();
    match client.call(request(1, 8), Duration::from_millis(200)) {
        Err(CallError::Timeout { timeout, .. }) => assert_eq!(timeout, Duration::from_millis(200)),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(service.try_serve().unwrap(), 1, "the timed-out request is still answered");
    let next = client.call_async(request(2, 8)).unwrap();
    service.serve(T).unwrap();
    assert_eq!(next.wait(T).unwrap().sum, expected_sum(2, 8), "the late reply must not answer this call");
}

#[test]
fn a_name_is_one_service_type() {
    freight::message! { pub struct Other = "freight_test/srv/Other_Request" { pub x: u8 } }
    struct OtherSrv;
    impl ServiceType for OtherSrv {
        const TYPE_NAME: &'static str = "freight_test/srv/Other";
        type Request = Other;
        type Response = ChecksumResponse;
    }
    let n = node("srv_types");
    let name = service_name("types");
    let _service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let err = n.create_client::<OtherSrv>(&name).expect_err("another request type on the name");
    assert!(err.to_string().contains("freight_test/srv/Checksum_Request"), "{err}");
}

// ---------------------------------------------------------------------------
// Across processes
// ---------------------------------------------------------------------------

#[test]
fn a_server_in_another_process_answers_through_shared_memory() {
    const TEST: &str = "a_server_in_another_process_answers_through_shared_memory";
    if child() {
        return;
    }
    let name = service_name("procs");
    let server = spawn(TEST, "server", &name, None);
    server.expect("READY");
    let n = node("srv_client");
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(client.wait_for_service(T));
    for (salt, len) in [(1, 0), (2, 8 << 20), (3, 1000)] {
        let reply = client.call(request(salt, len), T).unwrap();
        assert_eq!(reply.sum, expected_sum(salt, len), "request of {len} bytes");
        assert_eq!(reply.transport, "Shm", "the request crossed in shared memory");
        assert_eq!(reply.info().transport, Transport::Shm, "and so did the reply");
        assert_eq!(reply.reversed.len(), len);
    }
    // A loaned request: written in shared memory, read there by the server.
    let mut loan = client.loan_request(&[4 << 20]).unwrap().write_from_fn(|i| (i % 251) as u8);
    loan.salt = 9;
    let reply = client.call_loaned(loan).unwrap().wait(T).unwrap();
    assert_eq!((reply.sum, reply.transport.as_str()), (expected_sum(9, 4 << 20), "Shm"));
}

#[test]
fn a_server_that_dies_mid_call_ends_the_call_promptly() {
    const TEST: &str = "a_server_that_dies_mid_call_ends_the_call_promptly";
    if child() {
        return;
    }
    let name = service_name("dies");
    let mut server = spawn(TEST, "stuck_server", &name, None);
    server.expect("READY");
    let n = node("srv_client_dies");
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(client.wait_for_service(T));
    let pending = client.call_async(request(0, 1 << 20)).unwrap();
    server.expect("GOT");
    server.kill();
    let t0 = Instant::now();
    match pending.wait(Duration::from_secs(30)) {
        Err(CallError::ServerGone { service }) => assert_eq!(service, name),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "noticed after {:?}", t0.elapsed());
    assert!(matches!(client.call(request(0, 8), T), Err(CallError::NoServer { .. })));
}

/// A server stopped (Ctrl-Z, a debugger) is alive: a call to it times out,
/// it is not taken for gone, and once continued it serves again.
#[test]
fn a_stopped_server_is_waited_for_and_serves_again_when_continued() {
    const TEST: &str = "a_stopped_server_is_waited_for_and_serves_again_when_continued";
    if child() {
        return;
    }
    let name = service_name("stopped");
    let server = spawn(TEST, "server", &name, None);
    server.expect("READY");
    let n = node("srv_client_stopped");
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(client.wait_for_service(T));
    assert_eq!(client.call(request(1, 64), T).unwrap().sum, expected_sum(1, 64));
    // Stopped for sure before the first call: `kill` returns while a server thread may
    // still run for a moment (a full make test saw it answer one more call).
    freight_testkit::stop_process(server.id());
    for salt in 2..5 {
        let t0 = Instant::now();
        match client.call(request(salt, 64), Duration::from_millis(300)) {
            Err(CallError::Timeout { .. }) => {}
            other => panic!("a call to a stopped server: {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(2), "the call took {:?}", t0.elapsed());
    }
    assert!(client.service_is_ready(), "a stopped server is still there");
    // SAFETY: sending a signal touches no memory of this process.
    assert_eq!(unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGCONT) }, 0, "SIGCONT");
    let reply = client.call(request(5, 1 << 20), T).expect("the continued server answers");
    assert_eq!(reply.sum, expected_sum(5, 1 << 20));
}

// ---------------------------------------------------------------------------
// Across hosts, over DDS
// ---------------------------------------------------------------------------

#[test]
fn a_server_on_another_host_answers_over_dds() {
    const TEST: &str = "a_server_on_another_host_answers_over_dds";
    if child() || !other_host_available(TEST) {
        return;
    }
    let name = service_name("dds");
    let server = spawn(TEST, "network_server", &name, Some(OTHER_HOST_MOUNTS));
    server.expect("READY");
    let n = network_node("srv_client_dds");
    let client = n.create_client::<Checksum>(&name).unwrap();
    assert!(client.wait_for_service(T), "the remote server was never discovered");
    // The reply reader of this client and the server's reply writer match
    // after the request reader did: until then a reply has no way back.
    let deadline = Instant::now() + T;
    let reply = loop {
        match client.call(request(5, 300_000), Duration::from_millis(500)) {
            Ok(reply) => break reply,
            Err(CallError::Timeout { .. }) if Instant::now() < deadline => continue,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(reply.sum, expected_sum(5, 300_000));
    assert_eq!(reply.transport, "Network");
    assert_eq!(reply.info().transport, Transport::Network);
    assert_eq!(reply.reversed.len(), 300_000);
}

/// Every client receives every reply: one that never calls must not stall
/// the service once its queue is full of others' replies, nor make the
/// service report errors.
#[test]
fn an_idle_client_does_not_stall_the_service() {
    let n = node("srv_idle");
    let name = service_name("idle");
    let mut service = n.create_service::<Checksum>(&name, checksum).unwrap();
    let _idle = n.create_client::<Checksum>(&name).unwrap();
    let busy = n.create_client::<Checksum>(&name).unwrap();
    for salt in 0..30 {
        let call = busy.call_async(request(salt, 8)).unwrap();
        assert_eq!(service.try_serve().unwrap(), 1, "request {salt}");
        assert_eq!(call.wait(T).unwrap().sum, expected_sum(salt, 8));
    }
    // Ten calls pending and not collected fill this client's reply queue
    // with its own replies; another client's call is answered meanwhile
    // (skipped for the full queue, not waited for), and the ten are there.
    let pending: Vec<_> = (0..10).map(|s| busy.call_async(request(100 + s, 8)).unwrap()).collect();
    assert_eq!(service.try_serve().unwrap(), 10);
    let other = n.create_client::<Checksum>(&name).unwrap();
    let call = other.call_async(request(7, 8)).unwrap();
    assert_eq!(service.try_serve().unwrap(), 1);
    assert_eq!(call.wait(T).unwrap().sum, expected_sum(7, 8));
    for (s, call) in pending.into_iter().enumerate() {
        assert_eq!(call.wait(T).unwrap().sum, expected_sum(100 + s as u64, 8));
    }
}

/// A generated `std_srvs` service, served by an executor in another thread.
#[test]
fn std_srvs_set_bool_is_served() {
    use freight::msgs::std_srvs::{SetBool, SetBool_Request, SetBool_Response};
    let n = node("srv_setbool");
    let name = service_name("setbool");
    let service = n
        .create_service::<SetBool>(&name, |request| SetBool_Response {
            success: request.data,
            message: format!("switched {}", if request.data { "on" } else { "off" }),
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_service(service);
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let client = n.create_client::<SetBool>(&name).unwrap();
    let reply = client.call(SetBool_Request { data: true }, T).unwrap();
    assert!(reply.success);
    assert_eq!(reply.message, "switched on");
    stop.stop();
    spinner.join().unwrap().unwrap();
}

/// Loans for both ways: the server reads the client's request where the
/// client wrote it, and the client the server's reply where the server
/// wrote it (in one process: the same addresses).
#[test]
fn loaned_requests_and_replies_are_not_copied() {
    let n = node("srv_loans");
    let name = service_name("loans");
    let server = n.create_service_server::<Checksum>(&name).unwrap();
    let client = n.create_client::<Checksum>(&name).unwrap();
    let mut loan = client.loan_request(&[1 << 20]).unwrap().write_from_fn(|i| (i % 251) as u8);
    loan.salt = 3;
    let written_at = loan.buffer_mut(0).unwrap().as_ptr() as usize;
    let call = client.call_loaned(loan).unwrap();

    let (request, id) = server.take_request(T).unwrap().expect("the request");
    assert_eq!(request.salt, 3);
    assert_eq!(request.data.as_bytes().unwrap().as_ptr() as usize, written_at, "the client's loan, not a copy");
    let mut reply = server.loan_response(&[1 << 20]).unwrap().write_from_fn(|i| (i % 7) as u8);
    reply.sum = checksum(request).sum;
    let replied_at = reply.buffer_mut(0).unwrap().as_ptr() as usize;
    server.send_loaned_response(id, reply).unwrap();

    let reply = call.wait(T).unwrap();
    assert_eq!(reply.sum, expected_sum(3, 1 << 20));
    assert_eq!(reply.reversed.as_bytes().unwrap().as_ptr() as usize, replied_at, "the server's loan, not a copy");
    assert_eq!(reply.reversed.as_bytes().unwrap()[8], 1);
}

/// Lends in (fake) device memory and takes it as it is.
fn device_options() -> ServiceOptions {
    ServiceOptions {
        backend: BackendKind::FakeDevice,
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
    }
}

/// Between processes: a client's request lent in device memory reaches the
/// server there, and the server's device reply reaches that client there
/// and a client that does not take device memory as host bytes.
#[test]
fn requests_and_replies_in_device_memory_cross_processes() {
    const TEST: &str = "requests_and_replies_in_device_memory_cross_processes";
    if child() {
        return;
    }
    let name = service_name("device_procs");
    let server = spawn(TEST, "device_server", &name, None);
    server.expect("READY");
    let n = node("srv_device_client");
    let payload: Vec<u8> = (0..(1 << 20)).map(|i| (i * 31 % 256) as u8).collect();
    let reversed: Vec<u8> = payload.iter().rev().copied().collect();

    let client = n.create_client_with_options::<Checksum>(&name, device_options()).unwrap();
    assert!(client.wait_for_service(T));
    let mut loan = client.loan_request(&[payload.len()]).unwrap();
    assert!(loan.buffer_uninit_mut(0).is_none(), "the request is lent in device memory");
    loan.write_buffer_from_host(0, 0, &payload).unwrap();
    // SAFETY: the one buffer was written whole above.
    let mut loan = unsafe { loan.assume_init() };
    loan.salt = 9;
    let reply = client.call_loaned(loan).unwrap().wait(T).unwrap();
    assert_eq!(server.expect("GOT"), format!("GOT fake-device {}", payload.len()));
    assert_eq!(reply.backend(), BackendKind::FakeDevice);
    assert_eq!(reply.reversed.to_vec().unwrap(), reversed);
    assert_eq!(reply.sum, payload.iter().map(|&b| u64::from(b)).sum::<u64>() + 9);

    let plain = n.create_client::<Checksum>(&name).unwrap();
    assert!(plain.wait_for_service(T));
    let reply = plain.call(ChecksumRequest { salt: 1, data: Buffer::from(payload.clone()) }, T).unwrap();
    assert_eq!(server.expect("GOT"), format!("GOT shm {}", payload.len()));
    assert_eq!(reply.backend(), BackendKind::Shm, "the server's one host copy of its device reply");
    assert_eq!(reply.reversed.as_bytes().unwrap(), &reversed[..]);
}

/// Requests and replies negotiated per end, as a topic's messages are per
/// subscription: a client's requests lent in (fake) device memory reach a
/// server that takes it as they are and one that does not as a host copy;
/// a server's device replies reach an accepting client in device memory and
/// another client as host bytes. Never an empty or wrong buffer.
#[test]
fn requests_and_replies_are_negotiated_per_end() {
    let n = node("srv_backends");
    let device = device_options();
    let payload: Vec<u8> = (0..64 * 1024).map(|i| (i * 13 % 256) as u8).collect();
    for (label, server_options, server_sees) in
        [("takes", device, BackendKind::FakeDevice), ("copies", ServiceOptions::default(), BackendKind::Cpu)]
    {
        let name = service_name(&format!("backends_{label}"));
        let server = n.create_service_server_with_options::<Checksum>(&name, server_options).unwrap();
        let client = n.create_client_with_options::<Checksum>(&name, device).unwrap();
        let mut loan = client.loan_request(&[payload.len()]).unwrap();
        assert!(loan.buffer_uninit_mut(0).is_none(), "the request is lent in device memory");
        loan.write_buffer_from_host(0, 0, &payload).unwrap();
        // SAFETY: the one buffer was written whole above.
        let mut loan = unsafe { loan.assume_init() };
        loan.salt = 5;
        let call = client.call_loaned(loan).unwrap();
        let (request, id) = server.take_request(T).unwrap().expect("the request");
        assert_eq!(request.backend(), server_sees, "a server that {label} device memory");
        assert_eq!(request.data.to_vec().unwrap(), payload, "the same bytes either way");
        server.send_response(id, ChecksumResponse { sum: request.salt, ..Default::default() }).unwrap();
        assert_eq!(call.wait(T).unwrap().sum, 5);
    }

    let name = service_name("backends_replies");
    let server = n.create_service_server_with_options::<Checksum>(&name, device).unwrap();
    for (client_options, client_sees) in
        [(device, BackendKind::FakeDevice), (ServiceOptions::default(), BackendKind::Cpu)]
    {
        let client = n.create_client_with_options::<Checksum>(&name, client_options).unwrap();
        let call = client.call_async(request(1, 16)).unwrap();
        let (_, id) = server.take_request(T).unwrap().expect("the request");
        let mut reply = server.loan_response(&[payload.len()]).unwrap();
        reply.write_buffer_from_host(0, 0, &payload).unwrap();
        // SAFETY: the one buffer was written whole above.
        let reply = unsafe { reply.assume_init() };
        server.send_loaned_response(id, reply).unwrap();
        let reply = call.wait(T).unwrap();
        assert_eq!(reply.backend(), client_sees);
        assert_eq!(reply.reversed.to_vec().unwrap(), payload);
    }
}
