//! Service servers and clients of any service type, for the Python package's
//! `Node.create_service` / `create_client` (`freight/services.py`, which runs
//! the callbacks and completes the futures).
//!
//! A service type reaches Rust through its request class: `SetBool.Request`
//! is the generated class of `std_srvs/srv/SetBool_Request`, and the
//! generated `services!` list names the Rust service of each request class.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Duration as StdDuration;

use freight::{
    CallError, Client as RustClient, CreateError, Envelope, Loan, LoanError, LoanUninit, Node as RustNode, PendingCall,
    RequestId, ServiceServer, ServiceType, WaitSet,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::endpoints::copy_arrays;
use crate::errors::{error, from_create, from_publish, from_take, from_wait, type_name, Kind};
use crate::fields::{Buffers, PyMessage};
use crate::messages;
use crate::user_types::{MessageType, UserService};

/// Creates the server and client of one service type.
pub(crate) trait ServiceEndpoints: Sync {
    fn server(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyServer>, CreateError>;
    fn client(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyClient>, CreateError>;
}

/// The [`ServiceEndpoints`] of `S`.
pub(crate) struct TypedService<S>(PhantomData<fn() -> S>);

impl<S> TypedService<S> {
    pub(crate) const NEW: Self = TypedService(PhantomData);
}

impl<S> ServiceEndpoints for TypedService<S>
where
    S: ServiceType,
    S::Request: PyMessage,
    S::Response: PyMessage,
{
    fn server(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyServer>, CreateError> {
        Ok(Box::new(node.create_service_server::<S>(name)?))
    }

    fn client(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyClient>, CreateError> {
        Ok(Box::new(TypedClient { client: node.create_client::<S>(name)?, pending: Mutex::default() }))
    }
}

/// What [`endpoints_of`] finds.
enum ServiceEndpointsOf {
    BuiltIn(&'static dyn ServiceEndpoints),
    User(UserService),
}

impl std::ops::Deref for ServiceEndpointsOf {
    type Target = dyn ServiceEndpoints;
    fn deref(&self) -> &(dyn ServiceEndpoints + 'static) {
        match self {
            ServiceEndpointsOf::BuiltIn(e) => *e,
            ServiceEndpointsOf::User(u) => u,
        }
    }
}

/// The service type behind a Python service class (one with `Request` and
/// `Response` attributes, as rclpy's service classes have): a built-in
/// one's Rust service, or a user's service of two [`MessageType`]s.
fn endpoints_of(srv_type: &Bound<'_, PyAny>) -> PyResult<ServiceEndpointsOf> {
    let half = |name: &str| srv_type.getattr(name).ok().and_then(|r| r.cast_into::<PyType>().ok());
    if let Some(typed) = half("Request").and_then(|r| messages::typed_service(&r)) {
        return Ok(ServiceEndpointsOf::BuiltIn(typed));
    }
    fn user<'py>(class: Option<Bound<'py, PyType>>) -> Option<Bound<'py, MessageType>> {
        class.and_then(|c| c.getattr("_freight_type").ok()).and_then(|t| t.cast_into::<MessageType>().ok())
    }
    if let (Some(request), Some(response)) = (user(half("Request")), user(half("Response"))) {
        return Ok(ServiceEndpointsOf::User(UserService { request: request.unbind(), response: response.unbind() }));
    }
    Err(PyTypeError::new_err(format!(
        "{} is not a freight service class; freight's Python services are {}, and the services of your own \
         packages that `freight msg python` generates",
        srv_type.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
        messages::SERVICE_NAMES.join(", ")
    )))
}

/// A Python request or response written into a loan that `lend` makes: its
/// arrays copied once, straight into the frame that is sent, as a
/// publisher's `publish(msg)` does.
fn to_loan<M: PyMessage>(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    role: &str,
    lend: impl FnOnce(&[usize]) -> Result<LoanUninit<Envelope<M>>, LoanError> + Send,
) -> PyResult<Loan<Envelope<M>>> {
    let obj = obj
        .cast::<M::Class>()
        .map_err(|_| PyTypeError::new_err(format!("the {role} must be a {}, not {}", M::TYPE_NAME, type_name(obj))))?;
    let obj = obj.try_borrow()?;
    let mut arrays = Vec::new();
    M::arrays_of(&obj, py, &mut arrays);
    let loan = copy_arrays(py, &arrays, lend)?;
    // SAFETY: `copy_arrays` wrote every byte of every buffer.
    let mut loan = unsafe { loan.assume_init() };
    M::write_fields(&obj, py, &mut loan, Buffers::Keep)?;
    Ok(loan)
}

fn to_python<M: PyMessage>(py: Python<'_>, msg: M) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, msg.read_fields(py)?)?.into_any())
}

/// A request as Python gets it, and its id `(client, sequence)`.
pub(crate) type PyRequest = (Py<PyAny>, (u64, i64));

/// A service server of any service type.
pub(crate) trait AnyServer: Send + Sync {
    fn take_request(&self, py: Python<'_>) -> PyResult<Option<PyRequest>>;
    fn send_response(&self, py: Python<'_>, id: (u64, i64), response: &Bound<'_, PyAny>) -> PyResult<()>;
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>);
    fn service_name(&self) -> &str;
}

impl<S> AnyServer for ServiceServer<S>
where
    S: ServiceType,
    S::Request: PyMessage,
    S::Response: PyMessage,
{
    fn take_request(&self, py: Python<'_>) -> PyResult<Option<PyRequest>> {
        let taken = py.detach(|| ServiceServer::take_request(self, StdDuration::ZERO)).map_err(from_take)?;
        taken.map(|(request, id)| Ok((to_python(py, request.into_message())?, (id.client, id.sequence)))).transpose()
    }

    fn send_response(&self, py: Python<'_>, id: (u64, i64), response: &Bound<'_, PyAny>) -> PyResult<()> {
        let response = to_loan::<S::Response>(py, response, "response", |lens| self.loan_response(lens))?;
        let id = RequestId { client: id.0, sequence: id.1 };
        py.detach(|| self.send_loaned_response(id, response)).map_err(from_publish)
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add_service(self);
    }

    fn service_name(&self) -> &str {
        ServiceServer::service_name(self)
    }
}

/// Sleeps, without the GIL, until a reply comes to one of `client`'s calls
/// or `timeout` passes; a zero timeout does not wait.
pub(crate) fn wait_for_replies(py: Python<'_>, client: &dyn AnyClient, timeout: StdDuration) -> PyResult<()> {
    if timeout.is_zero() {
        return Ok(());
    }
    py.detach(|| {
        let mut waitset = WaitSet::new();
        client.add_to(&mut waitset);
        waitset.wait(timeout)
    })
    .map(drop)
    .map_err(from_wait)
}

/// The replies that came for the calls in `pending` (`try_get` asks one),
/// each call removed once answered.
pub(crate) fn answered<C, R>(
    pending: &Mutex<HashMap<i64, C>>,
    mut try_get: impl FnMut(&mut C) -> Result<Option<R>, CallError>,
) -> Result<Vec<(i64, R)>, CallError> {
    let mut pending = lock(pending);
    let mut replies = Vec::new();
    for (&sequence, call) in pending.iter_mut() {
        if let Some(reply) = try_get(call)? {
            replies.push((sequence, reply));
        }
    }
    for (sequence, _) in &replies {
        pending.remove(sequence);
    }
    Ok(replies)
}

/// A poisoned lock means a panic elsewhere left the map as it was between
/// two whole operations: go on with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A service client of any service type.
pub(crate) trait AnyClient: Send + Sync {
    fn call_async(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<i64>;
    fn take_responses(&self, py: Python<'_>, timeout: StdDuration) -> PyResult<Vec<(i64, Py<PyAny>)>>;
    fn forget(&self, sequence: i64);
    fn server_count(&self) -> usize;
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>);
    fn service_name(&self) -> &str;
}

/// A client and its calls waiting for a reply, by sequence number.
struct TypedClient<S: ServiceType> {
    client: RustClient<S>,
    pending: Mutex<HashMap<i64, PendingCall<S>>>,
}

pub(crate) fn from_call(e: CallError) -> PyErr {
    match e {
        CallError::Request(e) => from_publish(e),
        CallError::Reply(e) => from_take(e),
        e @ CallError::NoServer { .. } => error(Kind::NoServer, e.to_string()),
        e @ CallError::ServerGone { .. } => error(Kind::ServerGone, e.to_string()),
        e => error(Kind::Context, e.to_string()),
    }
}

impl<S> AnyClient for TypedClient<S>
where
    S: ServiceType,
    S::Request: PyMessage,
    S::Response: PyMessage,
{
    fn call_async(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<i64> {
        let request = to_loan::<S::Request>(py, request, "request", |lens| self.client.loan_request(lens))?;
        let call = py.detach(|| self.client.call_loaned(request)).map_err(from_call)?;
        let sequence = call.sequence();
        lock(&self.pending).insert(sequence, call);
        Ok(sequence)
    }

    fn take_responses(&self, py: Python<'_>, timeout: StdDuration) -> PyResult<Vec<(i64, Py<PyAny>)>> {
        wait_for_replies(py, self, timeout)?;
        let replies = py.detach(|| answered(&self.pending, PendingCall::try_get)).map_err(from_call)?;
        replies.into_iter().map(|(sequence, reply)| Ok((sequence, to_python(py, reply.into_message())?))).collect()
    }

    fn forget(&self, sequence: i64) {
        lock(&self.pending).remove(&sequence);
    }

    fn server_count(&self) -> usize {
        self.client.server_count()
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add_client(&self.client);
    }

    fn service_name(&self) -> &str {
        self.client.service_name()
    }
}

/// The native half of a service server; `freight.services.Service` runs its
/// callback.
#[pyclass(frozen, module = "freight._native", name = "ServiceServer")]
pub(crate) struct Server {
    pub(crate) inner: Box<dyn AnyServer>,
}

#[pymethods]
impl Server {
    #[new]
    fn new(node: &Bound<'_, crate::endpoints::Node>, srv_type: &Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
        let inner = endpoints_of(srv_type)?.server(node.get().inner(), name).map_err(from_create)?;
        Ok(Server { inner })
    }

    /// The next request and its id `(client, sequence)`, or `None`.
    fn take_request(&self, py: Python<'_>) -> PyResult<Option<PyRequest>> {
        self.inner.take_request(py)
    }

    /// Sends `response` to the call `request_id`.
    fn send_response(&self, py: Python<'_>, request_id: (u64, i64), response: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.send_response(py, request_id, response)
    }

    #[getter]
    fn service_name(&self) -> &str {
        self.inner.service_name()
    }
}

/// The native half of a service client; `freight.services.Client` keeps the
/// futures.
#[pyclass(frozen, module = "freight._native", name = "ServiceClient")]
pub(crate) struct Client {
    pub(crate) inner: Box<dyn AnyClient>,
}

#[pymethods]
impl Client {
    #[new]
    fn new(node: &Bound<'_, crate::endpoints::Node>, srv_type: &Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
        let inner = endpoints_of(srv_type)?.client(node.get().inner(), name).map_err(from_create)?;
        Ok(Client { inner })
    }

    /// Sends `request`; returns the call's sequence number. Raises
    /// `freight.NoServerError` when no server is there.
    fn call_async(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<i64> {
        self.inner.call_async(py, request)
    }

    /// The replies that came for pending calls, as `(sequence, response)`,
    /// after waiting up to `timeout_sec` for a reply to come (0: no wait).
    /// The wait releases the GIL.
    #[pyo3(signature = (timeout_sec=0.0))]
    fn take_responses(&self, py: Python<'_>, timeout_sec: f64) -> PyResult<Vec<(i64, Py<PyAny>)>> {
        let timeout = StdDuration::try_from_secs_f64(timeout_sec.max(0.0)).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("timeout_sec={timeout_sec} is not a number of seconds"))
        })?;
        self.inner.take_responses(py, timeout)
    }

    /// Forgets the call `sequence`: its reply, if it comes, is dropped.
    fn forget(&self, sequence: i64) {
        self.inner.forget(sequence)
    }

    /// Servers there now, on this host and over the network.
    fn server_count(&self) -> usize {
        self.inner.server_count()
    }

    #[getter]
    fn service_name(&self) -> &str {
        self.inner.service_name()
    }
}
