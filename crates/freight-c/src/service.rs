//! Services: `freight_service_server` (take each request, answer it when you
//! like), `freight_callback_service` (a callback the executor runs for each
//! request) and `freight_client` with `freight_pending_call`.
//!
//! Requests and responses cross as messages do: small fields in CDR with
//! buffer ordinals, buffers as memory ranges. A request arrives as a
//! `freight_sample` with the `freight_request_id` to answer it with.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use freight::{BackendKind, RequestId, ServiceOptions, WaitSet};

use crate::error::{destroy, guard, hand_out, handle, str_arg, Failure, Status};
use crate::executor::{register, Dispatch, UserData};
use crate::node::FreightNode;
use crate::publisher::{backend_arg, bytes, lens_arg, message_args, take_loan, FreightBuffer, FreightLoan};
use crate::subscription::accepted_arg;
use crate::subscription::FreightSample;
use crate::types::{service_maker, AnyClient, AnyPendingCall, AnyServer, ServiceMaker};

/// Which call a request is (`freight_request_id` in C): the client and its
/// call's sequence number, as ROS 2's `rmw_request_id_t` carries them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreightRequestId {
    /// The client's id.
    pub client: u64,
    /// The call's sequence number on that client.
    pub sequence: i64,
}

impl From<RequestId> for FreightRequestId {
    fn from(id: RequestId) -> Self {
        FreightRequestId { client: id.client, sequence: id.sequence }
    }
}

impl From<FreightRequestId> for RequestId {
    fn from(id: FreightRequestId) -> Self {
        RequestId { client: id.client, sequence: id.sequence }
    }
}

/// A service server (`freight_service_server` in C).
pub struct FreightServiceServer(Box<dyn AnyServer>);

/// A client (`freight_client` in C).
pub struct FreightClient(Box<dyn AnyClient>);

/// A call waiting for its reply (`freight_pending_call` in C); empty once
/// the reply was handed out.
pub struct FreightPendingCall(Option<Box<dyn AnyPendingCall>>);

/// The callback of a service (`freight_request_callback` in C). It owns
/// `request` (destroy it when done), answers with
/// [`freight_service_server_send_response`] on `server` and `id` (at once,
/// or later while the service lives), and returns whether all went well:
/// false stops the spin, which returns `FREIGHT_ERROR_CALLBACK`.
pub type FreightRequestCallback = unsafe extern "C" fn(
    request: *mut FreightSample,
    id: FreightRequestId,
    server: *const FreightServiceServer,
    user_data: *mut c_void,
) -> bool;

/// A service with a callback, as its node and executors see it.
struct CallbackService {
    server: FreightServiceServer,
    callback: FreightRequestCallback,
    user_data: UserData,
}

impl Dispatch for CallbackService {
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        self.server.0.add_to(waitset);
    }

    fn run(&self, stop: &AtomicBool) -> Result<usize, Failure> {
        let mut ran = 0;
        while let Some((request, id)) = self.server.0.take_request(Duration::ZERO)? {
            let request = Box::into_raw(Box::new(FreightSample(request)));
            ran += 1;
            // SAFETY: the callback and its data as the service's creator
            // promised; the callback owns the request; the server lives
            // while this entry does.
            if !unsafe { (self.callback)(request, id.into(), &self.server, self.user_data.0) } {
                return Err(Failure::new(Status::Callback, "a service callback failed"));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok(ran)
    }
}

/// How a service server or client is made (`freight_service_options` in C);
/// all zero is the default.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightServiceOptions {
    /// The memory the loans of what this end sends lend (`"shm"`, the
    /// default when null; `"cuda"`, `"cuda-host"`, `"fake-device"`).
    pub backend: *const c_char,
    /// The memory this end takes as it is in what it receives,
    /// `accepted_backends[0..accepted_backend_count]` (none: `cpu` and
    /// `shm`); for any other it receives a host copy.
    pub accepted_backends: *const *const c_char,
    /// How many names `accepted_backends` holds.
    pub accepted_backend_count: usize,
}

/// The options a C call gives (null: the defaults).
///
/// # Safety
/// `options` is null or points to a `freight_service_options` whose strings
/// are NUL-terminated.
unsafe fn service_options_arg(options: *const FreightServiceOptions) -> Result<ServiceOptions, Failure> {
    // SAFETY (all): as the caller promised.
    let Some(options) = (unsafe { options.as_ref() }) else { return Ok(ServiceOptions::default()) };
    let backend = match options.backend.is_null() {
        true => BackendKind::Shm,
        false => backend_arg(unsafe { str_arg(options.backend, "the backend") }?)?,
    };
    let accepted_backends = unsafe { accepted_arg(options.accepted_backends, options.accepted_backend_count) }?;
    Ok(ServiceOptions { backend, accepted_backends })
}

/// A service with a callback (`freight_callback_service` in C).
pub struct FreightCallbackService {
    // The one strong reference: nodes and executors hold it weakly.
    _entry: Arc<dyn Dispatch>,
}

/// The node, the maker of the service type and the service name of a C call.
///
/// # Safety
/// As the functions that take them promise.
unsafe fn service_args<'a>(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
) -> Result<(&'a FreightNode, ServiceMaker, &'a str), Failure> {
    // SAFETY (all): as the caller promised.
    let node = unsafe { handle(node, "the node") }?;
    let srv_type = unsafe { str_arg(srv_type, "the service type") }?;
    let name = unsafe { str_arg(name, "the service name") }?;
    Ok((node, service_maker(srv_type)?, name))
}

/// Writes a sample to the out pointer `out`, or null for none.
///
/// # Safety
/// `out` is writable (checked for null before anything was taken).
unsafe fn hand_out_sample(out: *mut *mut FreightSample, sample: Option<FreightSample>) {
    let ptr = sample.map_or(std::ptr::null_mut(), |s| Box::into_raw(Box::new(s)));
    // SAFETY: as the caller promised.
    unsafe { out.write(ptr) };
}

/// Sends the request a C call gives through `client`.
///
/// # Safety
/// `client` is null or live; the rest as in [`message_args`].
unsafe fn send_request(
    client: *const FreightClient,
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
) -> Result<Box<dyn AnyPendingCall>, Failure> {
    // SAFETY (both): as the caller promised.
    let client = unsafe { handle(client, "the client") }?;
    let (fields, buffers) = unsafe { message_args(fields, fields_len, buffers, count) }?;
    client.0.call_async(fields, &buffers)
}

/// Creates a server of `srv_type` (`"std_srvs/srv/SetBool"`, a built-in
/// service or one whose request and response are registered) for the
/// service `name`, with ROS 2's service QoS.
///
/// # Safety
/// `node` is null or live; `srv_type` and `name` are null or NUL-terminated;
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_create(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    out: *mut *mut FreightServiceServer,
) -> Status {
    // SAFETY: as the caller promised; null options are the defaults.
    unsafe { freight_service_server_create_with_options(node, srv_type, name, std::ptr::null(), out) }
}

/// Creates a server as [`freight_service_server_create`] does, whose
/// response loans lend `options->backend` and which takes requests in
/// `options->accepted_backends` as they are (null: the defaults).
/// `FREIGHT_ERROR_CREATE`, saying why, when this process cannot use one.
///
/// # Safety
/// As [`freight_service_server_create`]; `options` is null or points to a
/// `freight_service_options`.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_create_with_options(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    options: *const FreightServiceOptions,
    out: *mut *mut FreightServiceServer,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let (node, maker, name) = unsafe { service_args(node, srv_type, name) }?;
        let options = unsafe { service_options_arg(options) }?;
        let server = maker.server(node.node(), name, options)?;
        unsafe { hand_out(out, FreightServiceServer(server)) }
    })
}

/// Takes the next request, waiting up to `timeout_ns` nanoseconds (0: only
/// look). `*request` receives it (null when none came in time, still
/// `FREIGHT_OK`) and `*id` the id to answer it with.
///
/// # Safety
/// `server` is null or live; `request` and `id` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_take_request(
    server: *const FreightServiceServer,
    timeout_ns: u64,
    request: *mut *mut FreightSample,
    id: *mut FreightRequestId,
) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let server = unsafe { handle(server, "the service server") }?;
        if request.is_null() || id.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "an out pointer is a null pointer"));
        }
        let taken = server.0.take_request(Duration::from_nanos(timeout_ns))?;
        let (sample, taken_id) = match taken {
            Some((sample, taken_id)) => (Some(FreightSample(sample)), taken_id.into()),
            None => (None, FreightRequestId { client: 0, sequence: 0 }),
        };
        // SAFETY (both): non-null and writable by the caller's contract.
        unsafe {
            id.write(taken_id);
            hand_out_sample(request, sample);
        }
        Ok(())
    })
}

/// Sends the response whose small fields are `fields` (CDR, buffer fields as
/// ordinals) and whose buffers are `buffers[0..count]` (copied) to the call
/// `id`. A client that gave up on the call drops it.
///
/// # Safety
/// `server` is null or live; `fields` is readable for `fields_len` bytes;
/// `buffers` is null or points to `count` `freight_buffer`s, each readable.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_send_response(
    server: *const FreightServiceServer,
    id: FreightRequestId,
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let server = unsafe { handle(server, "the service server") }?;
        let (fields, buffers) = unsafe { message_args(fields, fields_len, buffers, count) }?;
        server.0.send_response(id.into(), fields, &buffers)
    })
}

/// Lends `lens[i]` bytes for each buffer field of a response, in field
/// order; `*out` receives the loan. Write it, then send it with
/// [`freight_service_server_send_loaned_response`] (nothing is copied on the
/// way to the client), or give it back with `freight_loan_destroy`.
///
/// # Safety
/// `server` is null or live; `lens` is null or points to `count` lengths;
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_loan_response(
    server: *const FreightServiceServer,
    lens: *const usize,
    count: usize,
    out: *mut *mut FreightLoan,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let server = unsafe { handle(server, "the service server") }?;
        let loan = server.0.loan_response(unsafe { lens_arg(lens, count) }?)?;
        unsafe { hand_out(out, FreightLoan(loan)) }
    })
}

/// Sends `loan` (from [`freight_service_server_loan_response`], every byte
/// written) with the response's small fields `fields` (CDR, buffer fields as
/// ordinals) to the call `id`. The loan is consumed whatever the outcome.
///
/// # Safety
/// `server` is null or live; `loan` is null or a live loan of this server;
/// `fields` is readable for `fields_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_send_loaned_response(
    server: *const FreightServiceServer,
    id: FreightRequestId,
    loan: *mut FreightLoan,
    fields: *const u8,
    fields_len: usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised; the loan is taken over
        // first, so it is freed on every path below.
        let loan = unsafe { take_loan(loan) }?;
        let server = unsafe { handle(server, "the service server") }?;
        let fields = unsafe { bytes(fields, fields_len, "the fields") }?;
        server.0.send_loaned_response(id.into(), loan.0, fields)
    })
}

/// Ends a service server (null is ignored); requests taken from it stay
/// valid, but can no longer be answered.
///
/// # Safety
/// `server` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_service_server_destroy(server: *mut FreightServiceServer) {
    // SAFETY: as the caller promised.
    unsafe { destroy(server) }
}

/// Creates a service `name` of `srv_type` whose requests go to
/// `callback(request, id, server, user_data)` when an executor that `node`
/// was added to spins. Destroying the handle ends it.
///
/// # Safety
/// As [`freight_service_server_create`]; `callback` is a valid function and
/// `user_data` stays usable by it, from the spinning thread, until the handle
/// is destroyed.
#[no_mangle]
pub unsafe extern "C" fn freight_node_create_service_callback(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    callback: Option<FreightRequestCallback>,
    user_data: *mut c_void,
    out: *mut *mut FreightCallbackService,
) -> Status {
    // SAFETY: as the caller promised; null options are the defaults.
    unsafe {
        freight_node_create_service_callback_with_options(
            node,
            srv_type,
            name,
            std::ptr::null(),
            callback,
            user_data,
            out,
        )
    }
}

/// A callback service as [`freight_node_create_service_callback`] makes it,
/// with `options` (null: the defaults) as
/// [`freight_service_server_create_with_options`] takes them.
///
/// # Safety
/// As [`freight_node_create_service_callback`]; `options` is null or points
/// to a `freight_service_options`.
#[no_mangle]
pub unsafe extern "C" fn freight_node_create_service_callback_with_options(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    options: *const FreightServiceOptions,
    callback: Option<FreightRequestCallback>,
    user_data: *mut c_void,
    out: *mut *mut FreightCallbackService,
) -> Status {
    guard(|| {
        let callback = callback.ok_or_else(|| Failure::new(Status::InvalidArgument, "the callback is null"))?;
        // SAFETY (all): as the caller promised.
        let (node, maker, name) = unsafe { service_args(node, srv_type, name) }?;
        let options = unsafe { service_options_arg(options) }?;
        let server = FreightServiceServer(maker.server(node.node(), name, options)?);
        let entry: Arc<dyn Dispatch> = Arc::new(CallbackService { server, callback, user_data: UserData(user_data) });
        register(node.callbacks(), &entry);
        unsafe { hand_out(out, FreightCallbackService { _entry: entry }) }
    })
}

/// Ends a callback service (null is ignored): its callback is not called
/// again once this returns, unless a spin on another thread is running it
/// right now.
///
/// # Safety
/// `service` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_callback_service_destroy(service: *mut FreightCallbackService) {
    // SAFETY: as the caller promised.
    unsafe { destroy(service) }
}

/// Creates a client of `srv_type` for the service `name`.
///
/// # Safety
/// As [`freight_service_server_create`].
#[no_mangle]
pub unsafe extern "C" fn freight_client_create(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    out: *mut *mut FreightClient,
) -> Status {
    // SAFETY: as the caller promised; null options are the defaults.
    unsafe { freight_client_create_with_options(node, srv_type, name, std::ptr::null(), out) }
}

/// Creates a client as [`freight_client_create`] does, whose request loans
/// lend `options->backend` and which takes replies in
/// `options->accepted_backends` as they are (null: the defaults).
///
/// # Safety
/// As [`freight_client_create`]; `options` is null or points to a
/// `freight_service_options`.
#[no_mangle]
pub unsafe extern "C" fn freight_client_create_with_options(
    node: *const FreightNode,
    srv_type: *const c_char,
    name: *const c_char,
    options: *const FreightServiceOptions,
    out: *mut *mut FreightClient,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let (node, maker, name) = unsafe { service_args(node, srv_type, name) }?;
        let options = unsafe { service_options_arg(options) }?;
        let client = maker.client(node.node(), name, options)?;
        unsafe { hand_out(out, FreightClient(client)) }
    })
}

/// Waits up to `timeout_ns` for a server of the service; whether one is
/// there (false for a null client).
///
/// # Safety
/// `client` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_client_wait_for_service(client: *const FreightClient, timeout_ns: u64) -> bool {
    let mut ready = false;
    guard(|| {
        // SAFETY: as the caller promised.
        let client = unsafe { handle(client, "the client") }?;
        ready = client.0.wait_for_service(Duration::from_nanos(timeout_ns));
        Ok(())
    });
    ready
}

/// Servers of the service matched now (0 for a null client).
///
/// # Safety
/// `client` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_client_server_count(client: *const FreightClient) -> usize {
    // SAFETY: as the caller promised.
    unsafe { client.as_ref() }.map_or(0, |c| c.0.server_count())
}

/// Sends the request whose small fields are `fields` and whose buffers are
/// `buffers[0..count]` (copied); `*out` receives the pending call, which
/// [`freight_pending_call_wait`] completes. `FREIGHT_ERROR_NO_SERVER` when
/// the service has no server.
///
/// # Safety
/// `client` is null or live; `fields` and `buffers` as in
/// [`freight_service_server_send_response`]; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_client_call_async(
    client: *const FreightClient,
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
    out: *mut *mut FreightPendingCall,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        if out.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        let pending = unsafe { send_request(client, fields, fields_len, buffers, count) }?;
        unsafe { hand_out(out, FreightPendingCall(Some(pending))) }
    })
}

/// Lends `lens[i]` bytes for each buffer field of a request, in field order;
/// `*out` receives the loan. Write it, then send it with
/// [`freight_client_call_loaned`] (nothing is copied on the way to the
/// servers), or give it back with `freight_loan_destroy`.
///
/// # Safety
/// `client` is null or live; `lens` is null or points to `count` lengths;
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_client_loan_request(
    client: *const FreightClient,
    lens: *const usize,
    count: usize,
    out: *mut *mut FreightLoan,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let client = unsafe { handle(client, "the client") }?;
        let loan = client.0.loan_request(unsafe { lens_arg(lens, count) }?)?;
        unsafe { hand_out(out, FreightLoan(loan)) }
    })
}

/// Sends `loan` (from [`freight_client_loan_request`], every byte written)
/// with the request's small fields `fields` and returns at once, as
/// [`freight_client_call_async`] does. The loan is consumed whatever the
/// outcome.
///
/// # Safety
/// `client` is null or live; `loan` is null or a live loan of this client;
/// `fields` is readable for `fields_len` bytes; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_client_call_loaned(
    client: *const FreightClient,
    loan: *mut FreightLoan,
    fields: *const u8,
    fields_len: usize,
    out: *mut *mut FreightPendingCall,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised; the loan is taken over
        // first, so it is freed on every path below.
        let loan = unsafe { take_loan(loan) }?;
        if out.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        let client = unsafe { handle(client, "the client") }?;
        let fields = unsafe { bytes(fields, fields_len, "the fields") }?;
        let pending = client.0.call_loaned(loan.0, fields)?;
        unsafe { hand_out(out, FreightPendingCall(Some(pending))) }
    })
}

/// Waits up to `timeout_ns` for the reply; `*reply` receives it.
/// `FREIGHT_ERROR_TIMEOUT` leaves the call pending (wait again, or destroy
/// it); `FREIGHT_ERROR_NO_SERVER` says every server went away before it
/// answered. A call hands out its reply once.
///
/// # Safety
/// `call` is null or live and used by one thread at a time; `reply` is null
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_pending_call_wait(
    call: *mut FreightPendingCall,
    timeout_ns: u64,
    reply: *mut *mut FreightSample,
) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let call = unsafe { call.as_mut() }
            .ok_or_else(|| Failure::new(Status::InvalidArgument, "the pending call is a null pointer"))?;
        if reply.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        let pending = call
            .0
            .as_mut()
            .ok_or_else(|| Failure::new(Status::InvalidArgument, "the call already handed out its reply"))?;
        let sample = pending.wait_for(Duration::from_nanos(timeout_ns))?;
        call.0 = None;
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { hand_out_sample(reply, Some(FreightSample(sample))) };
        Ok(())
    })
}

/// Forgets a call (null is ignored): a reply that comes later is dropped.
///
/// # Safety
/// `call` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_pending_call_destroy(call: *mut FreightPendingCall) {
    // SAFETY: as the caller promised.
    unsafe { destroy(call) }
}

/// Calls the service and waits up to `timeout_ns` for the reply: `*reply`
/// receives it. `FREIGHT_ERROR_TIMEOUT` when none came in time (the call is
/// forgotten), `FREIGHT_ERROR_NO_SERVER` when there is no server or every
/// server went away before it answered.
///
/// # Safety
/// As [`freight_client_call_async`]; `reply` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_client_call(
    client: *const FreightClient,
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
    timeout_ns: u64,
    reply: *mut *mut FreightSample,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        if reply.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        let mut pending = unsafe { send_request(client, fields, fields_len, buffers, count) }?;
        let sample = pending.wait_for(Duration::from_nanos(timeout_ns))?;
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { hand_out_sample(reply, Some(FreightSample(sample))) };
        Ok(())
    })
}

/// Ends a client (null is ignored); a call it sent stays pending, and can
/// still be waited for.
///
/// # Safety
/// `client` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_client_destroy(client: *mut FreightClient) {
    // SAFETY: as the caller promised.
    unsafe { destroy(client) }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;
    use crate::context::{freight_context_create_with, freight_context_destroy, FreightContextOptions};
    use crate::node::{freight_node_create, freight_node_destroy};

    fn last() -> String {
        // SAFETY: never null; lives until this thread's next failure.
        unsafe { CStr::from_ptr(crate::freight_last_error()) }.to_str().unwrap().to_owned()
    }

    #[test]
    fn unknown_service_types_and_null_arguments_are_typed_errors() {
        let options = FreightContextOptions { domain_id: crate::FREIGHT_DOMAIN_FROM_ENV, local_only: true };
        let (mut ctx, mut node) = (std::ptr::null_mut(), std::ptr::null_mut());
        let mut server = std::ptr::null_mut();
        let mut client = std::ptr::null_mut();
        unsafe {
            assert_eq!(freight_context_create_with(&options, &mut ctx), Status::Ok);
            assert_eq!(freight_node_create(ctx, c"c_services".as_ptr(), std::ptr::null(), &mut node), Status::Ok);
            let status = freight_service_server_create(node, c"my_srvs/srv/Move".as_ptr(), c"/m".as_ptr(), &mut server);
            assert_eq!(status, Status::Type);
            assert!(
                last().contains("\"my_srvs/srv/Move\" is neither one of freight's built-in services"),
                "{}",
                last()
            );
            // A message type is not a service type.
            let status = freight_client_create(node, c"std_msgs/msg/String".as_ptr(), c"/m".as_ptr(), &mut client);
            assert_eq!(status, Status::Type);
            assert_eq!(
                freight_client_create(std::ptr::null(), c"std_srvs/srv/Empty".as_ptr(), c"/m".as_ptr(), &mut client),
                Status::InvalidArgument
            );
            assert!(server.is_null() && client.is_null());

            let status =
                freight_service_server_create(node, c"std_srvs/srv/Empty".as_ptr(), c"/m".as_ptr(), &mut server);
            assert_eq!(status, Status::Ok);
            let mut id = FreightRequestId { client: 0, sequence: 0 };
            assert_eq!(
                freight_service_server_take_request(server, 0, std::ptr::null_mut(), &mut id),
                Status::InvalidArgument
            );
            let mut request = std::ptr::null_mut();
            assert_eq!(freight_service_server_take_request(server, 0, &mut request, &mut id), Status::Ok);
            assert!(request.is_null(), "a request came from nowhere");
            // Null handles: false, zero, nothing freed.
            assert!(!freight_client_wait_for_service(std::ptr::null(), 0));
            assert_eq!(freight_client_server_count(std::ptr::null()), 0);
            let mut reply = std::ptr::null_mut();
            assert_eq!(freight_pending_call_wait(std::ptr::null_mut(), 0, &mut reply), Status::InvalidArgument);
            freight_pending_call_destroy(std::ptr::null_mut());
            freight_service_server_destroy(server);
            freight_node_destroy(node);
            freight_context_destroy(ctx);
        }
    }
}
