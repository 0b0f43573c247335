//! Services: a request and its reply, carried as ROS 2 carries them.
//!
//! A service `/add` is two topics, named as every ROS 2 middleware names them
//! on DDS: requests on `rq/addRequest`, replies on `rr/addReply`, of the types
//! `pkg::srv::dds_::X_Request_` and `X_Response_`. A request starts with a
//! header, the client's id and the call's sequence number, as rmw_cyclonedds
//! writes it (`cdds_request_header_t`); the server puts the same header
//! before its reply. Every client of the name receives every reply and keeps
//! those with its id.
//!
//! Requests and replies are messages like any other underneath: large fields
//! are [`Buffer`](freight_msg::Buffer)s, handed over by pointer in one
//! process and through shared memory between processes, and negotiated per
//! subscriber: a server's replies per client, a client's requests per server.
//! [`ServiceOptions`] chooses where an end's loans live (a `cuda` request
//! loan a kernel writes) and which backends it takes as is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freight_msg::{
    BackendKind, BackendSet, BufferDecoder, BufferEncoder, CdrField, CdrReader, CdrWriter, DecodeError, EncodeError,
    FieldError, FieldValue, Message, RawBuffer, ServiceType, YamlField, YamlWriter,
};

use crate::delivery::FullQueues;
use crate::error::{CallError, CreateError, LoanError, PublishError, ServeError, TakeError};
use crate::loan::{Loan, LoanUninit};
use crate::node::Node;
use crate::publisher::{Publisher, PublisherOptions};
use crate::qos::QoS;
use crate::sample::Sample;
use crate::subscription::{Subscription, SubscriptionOptions};
use crate::sync::lock;

/// A request or reply in its envelope: the message and the request header,
/// who asked and which of its calls it is (set by freight when the loan is
/// sent). On the wire the header's 16 bytes come before the message's
/// fields, as rmw_cyclonedds lays them out.
///
/// It is what a loan for a request or a reply holds
/// ([`Client::loan_request`], [`ServiceServer::loan_response`]), and
/// dereferences to the message, so a written loan's fields are set as any
/// message's: `loan.width = 640`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope<M> {
    client: u64,
    sequence: i64,
    body: M,
}

impl<M> std::ops::Deref for Envelope<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.body
    }
}

impl<M> std::ops::DerefMut for Envelope<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.body
    }
}

impl<M: Message> CdrField for Envelope<M> {
    const MIN_SIZE: usize = 16 + M::MIN_SIZE;

    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        w.write_u64(self.client);
        w.write_i64(self.sequence);
        self.body.write(w, bufs)
    }

    fn read(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        Ok(Envelope { client: r.read_u64()?, sequence: r.read_i64()?, body: M::read(r, bufs)? })
    }

    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        self.body.visit_buffers(f);
    }

    fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut RawBuffer)) {
        self.body.visit_buffers_mut(f);
    }
}

impl<M: Message> YamlField for Envelope<M> {
    const IDL_NAME: &'static str = M::IDL_NAME;

    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        self.body.write_yaml(w);
    }

    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        self.body.set_from(value)
    }
}

impl<M: Message> Message for Envelope<M> {
    const TYPE_NAME: &'static str = M::TYPE_NAME;
    const DEFINITION: &'static str = M::DEFINITION;
}

/// Where the loans of one end of a service live and what it receives as is:
/// for a [`Client`], its requests and the replies; for a server, its replies
/// and the requests.
///
/// ```no_run
/// use freight::{BackendKind, BackendSet, Context, ServiceOptions};
/// use freight::msgs::std_srvs::Trigger;
/// let node = Context::new()?.create_node("detector")?;
/// // Requests lent in memory mapped for this process's GPU; replies from
/// // servers on the same device taken there too.
/// let options = ServiceOptions {
///     backend: BackendKind::CudaHost,
///     accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::CudaHost])),
/// };
/// let client = node.create_client_with_options::<Trigger>("detect", options)?;
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceOptions {
    /// Where the loans for what this end sends live, as
    /// [`PublisherOptions::backend`]: requests lent by
    /// [`Client::loan_request`], replies by [`ServiceServer::loan_response`].
    /// Copies sent with `call`/`send_response` go to shared memory.
    pub backend: BackendKind,
    /// Backends whose memory this end takes as is in what it receives, as
    /// [`SubscriptionOptions::accepted_backends`]; for any other it receives
    /// a host copy.
    pub accepted_backends: Option<BackendSet>,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions { backend: BackendKind::Shm, accepted_backends: None }
    }
}

impl ServiceOptions {
    pub(crate) fn sending(self) -> PublisherOptions {
        PublisherOptions { backend: self.backend, ..PublisherOptions::default() }
    }

    pub(crate) fn receiving(self) -> SubscriptionOptions {
        SubscriptionOptions { accepted_backends: self.accepted_backends, ..SubscriptionOptions::default() }
    }
}

/// The request and reply topics of the fully qualified service `name`.
pub(crate) fn service_topics(name: &str) -> (String, String) {
    (format!("rq{name}Request"), format!("rr{name}Reply"))
}

/// Which call a request is: the client that sent it and the call's sequence
/// number (`rmw_request_id_t` in ROS 2 terms). A reply sent with it reaches
/// that call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId {
    /// The client's id.
    pub client: u64,
    /// The call's sequence number on that client.
    pub sequence: i64,
}

/// A request taken from a [`ServiceServer`], and the id to answer it with.
pub type TakenRequest<M> = (Sample<M>, RequestId);

/// The requests of a service and the way back to each caller: take each
/// request and answer it when and from where you like (a worker thread, after
/// a long computation). [`Service`] is this with a callback that answers each
/// request at once.
///
/// ```no_run
/// use std::time::Duration;
/// use freight::Context;
/// use freight::msgs::std_srvs::{Trigger, Trigger_Response};
/// let node = Context::new()?.create_node("arm")?;
/// let server = node.create_service_server::<Trigger>("home")?;
/// loop {
///     if let Some((_request, id)) = server.take_request(Duration::from_secs(1))? {
///         // ... move the arm home, then:
///         server.send_response(id, Trigger_Response { success: true, message: "home".into() })?;
///     }
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct ServiceServer<S: ServiceType> {
    name: String,
    pub(crate) requests: Subscription<Envelope<S::Request>>,
    replies: Publisher<Envelope<S::Response>>,
}

impl<S: ServiceType> std::fmt::Debug for ServiceServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServiceServer<{}>({})", S::TYPE_NAME, self.name)
    }
}

impl<S: ServiceType> ServiceServer<S> {
    /// The service, fully qualified.
    pub fn service_name(&self) -> &str {
        &self.name
    }

    /// The next request, waiting up to `timeout` for one (zero: only one
    /// queued now), with the id to answer it with.
    pub fn take_request(&self, timeout: Duration) -> Result<Option<TakenRequest<S::Request>>, TakeError> {
        let taken = if timeout.is_zero() { self.requests.try_take()? } else { self.requests.take(timeout)? };
        Ok(taken.map(|Sample { msg: Envelope { client, sequence, body }, info }| {
            (Sample { msg: body, info }, RequestId { client, sequence })
        }))
    }

    /// Lends memory for a response with one length per buffer field, in
    /// declaration order, to send with
    /// [`send_loaned_response`](Self::send_loaned_response): nothing is
    /// copied on the way to the client.
    pub fn loan_response(&self, lens: &[usize]) -> Result<LoanUninit<Envelope<S::Response>>, LoanError> {
        self.replies.loan_buffers(lens)
    }

    /// Sends a written loan as the response to the call `id` (see
    /// [`send_response`](Self::send_response)).
    pub fn send_loaned_response(
        &self,
        id: RequestId,
        mut response: Loan<Envelope<S::Response>>,
    ) -> Result<(), PublishError> {
        (response.client, response.sequence) = (id.client, id.sequence);
        self.replies.publish(response)
    }

    /// Sends `response` to the call `id`. A client that gave up on the call
    /// drops it.
    ///
    /// Every client of the service receives every reply and keeps its own, so
    /// a reply never waits for room in a client's queue: an idle client's
    /// queue fills with others' replies, and waiting for it would stall the
    /// service. A full queue misses the reply and keeps what it holds (a
    /// waiting client's own replies); the caller's own queue is emptied when
    /// it calls (see [`Client::call_async`]).
    pub fn send_response(&self, id: RequestId, response: S::Response) -> Result<(), PublishError> {
        self.replies.publish_copy(&Envelope { client: id.client, sequence: id.sequence, body: response })
    }
}

/// Receives requests for `S` and answers each with its callback's response.
///
/// Serve it with an [`Executor`](crate::Executor)
/// ([`add_service`](crate::Executor::add_service)), or by calling
/// [`serve`](Self::serve) in a loop. It dereferences to its
/// [`ServiceServer`].
///
/// ```no_run
/// use freight::Context;
/// use freight::msgs::std_srvs::{SetBool, SetBool_Response};
/// let node = Context::new()?.create_node("motor")?;
/// let mut service = node.create_service::<SetBool>("enable", |request| SetBool_Response {
///     success: true,
///     message: format!("motor {}", if request.data { "on" } else { "off" }),
/// })?;
/// loop {
///     service.serve(std::time::Duration::from_secs(1))?;
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Service<S: ServiceType> {
    server: ServiceServer<S>,
    callback: Box<dyn FnMut(Sample<S::Request>) -> S::Response + Send>,
}

impl<S: ServiceType> std::fmt::Debug for Service<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Service<{}>({})", S::TYPE_NAME, self.server.name)
    }
}

impl<S: ServiceType> std::ops::Deref for Service<S> {
    type Target = ServiceServer<S>;
    fn deref(&self) -> &ServiceServer<S> {
        &self.server
    }
}

impl Node {
    /// Creates a server of `S` on the service `name` (resolved as a topic
    /// name is) that answers each request with `callback`'s response.
    pub fn create_service<S: ServiceType>(
        &self,
        name: &str,
        callback: impl FnMut(Sample<S::Request>) -> S::Response + Send + 'static,
    ) -> Result<Service<S>, CreateError> {
        self.create_service_with_options(name, ServiceOptions::default(), callback)
    }

    /// [`create_service`](Self::create_service) with [`ServiceOptions`] (see
    /// [`create_service_server_with_options`](Self::create_service_server_with_options)).
    pub fn create_service_with_options<S: ServiceType>(
        &self,
        name: &str,
        options: ServiceOptions,
        callback: impl FnMut(Sample<S::Request>) -> S::Response + Send + 'static,
    ) -> Result<Service<S>, CreateError> {
        Ok(Service { server: self.create_service_server_with_options(name, options)?, callback: Box::new(callback) })
    }

    /// Creates a server of `S` on the service `name` whose requests you take
    /// and answer yourself.
    pub fn create_service_server<S: ServiceType>(&self, name: &str) -> Result<ServiceServer<S>, CreateError> {
        self.create_service_server_with_options(name, ServiceOptions::default())
    }

    /// [`create_service_server`](Self::create_service_server) with its
    /// replies lent from `options.backend` and requests in
    /// `options.accepted_backends` taken as they are. Fails with
    /// [`CreateError::BackendUnavailable`] when this process cannot use one.
    pub fn create_service_server_with_options<S: ServiceType>(
        &self,
        name: &str,
        options: ServiceOptions,
    ) -> Result<ServiceServer<S>, CreateError> {
        let name = self.resolve_topic_name(name)?;
        let (rq, rr) = service_topics(&name);
        let qos = QoS::services_default();
        // The reply publisher first: a request is only taken once there is a
        // way to answer it. It skips full queues (`send_response`).
        let replies = Publisher::create_with(self, &rr, qos, options.sending(), FullQueues::SkipNew)?;
        let requests = Subscription::create(self, &rq, qos, options.receiving())?;
        Ok(ServiceServer { name, requests, replies })
    }

    /// Creates a client of `S` for the service `name` (resolved as a topic
    /// name is).
    pub fn create_client<S: ServiceType>(&self, name: &str) -> Result<Client<S>, CreateError> {
        self.create_client_with_options(name, ServiceOptions::default())
    }

    /// [`create_client`](Self::create_client) with its requests lent from
    /// `options.backend` and replies in `options.accepted_backends` taken as
    /// they are. Fails with [`CreateError::BackendUnavailable`] when this
    /// process cannot use one.
    pub fn create_client_with_options<S: ServiceType>(
        &self,
        name: &str,
        options: ServiceOptions,
    ) -> Result<Client<S>, CreateError> {
        let name = self.resolve_topic_name(name)?;
        let (rq, rr) = service_topics(&name);
        let qos = QoS::services_default();
        // The reply subscription first: a server answers only subscriptions
        // that exist when it replies.
        let replies = Subscription::create(self, &rr, qos, options.receiving())?;
        let requests = Publisher::create(self, &rq, qos, options.sending())?;
        Ok(Client { inner: ClientInner::new(name, requests, replies) })
    }
}

impl<S: ServiceType> Service<S> {
    /// Answers every request queued now; returns how many.
    ///
    /// A request that cannot be taken or answered is an error; the requests
    /// after it wait for the next call.
    pub fn try_serve(&mut self) -> Result<usize, ServeError> {
        let mut answered = 0;
        while self.serve_one(Duration::ZERO)? {
            answered += 1;
        }
        Ok(answered)
    }

    /// Waits up to `timeout` for a request, then answers every request queued.
    pub fn serve(&mut self, timeout: Duration) -> Result<usize, ServeError> {
        if !self.serve_one(timeout)? {
            return Ok(0);
        }
        Ok(1 + self.try_serve()?)
    }

    /// Answers the next request, waiting up to `timeout` for one; whether
    /// one came.
    fn serve_one(&mut self, timeout: Duration) -> Result<bool, ServeError> {
        let Some((request, id)) = self.server.take_request(timeout)? else { return Ok(false) };
        let response = (self.callback)(request);
        self.server.send_response(id, response)?;
        Ok(true)
    }
}

/// Calls the service `S`.
///
/// ```no_run
/// use std::time::Duration;
/// use freight::{Context, ServiceType};
/// # freight::message! { pub struct AddRequest = "example_interfaces/srv/AddTwoInts_Request" { pub a: i64, pub b: i64 } }
/// # freight::message! { pub struct AddResponse = "example_interfaces/srv/AddTwoInts_Response" { pub sum: i64 } }
/// # pub struct AddTwoInts;
/// # impl ServiceType for AddTwoInts {
/// #     const TYPE_NAME: &'static str = "example_interfaces/srv/AddTwoInts";
/// #     type Request = AddRequest;
/// #     type Response = AddResponse;
/// # }
/// let node = Context::new()?.create_node("asker")?;
/// let client = node.create_client::<AddTwoInts>("add_two_ints")?;
/// if client.wait_for_service(Duration::from_secs(5)) {
///     let reply = client.call(AddRequest { a: 2, b: 3 }, Duration::from_secs(1))?;
///     assert_eq!(reply.sum, 5);
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Client<S: ServiceType> {
    inner: Arc<TypedClient<S>>,
}

/// A typed client's ends: requests out, replies in, each in its envelope.
type TypedRequests<S> = Publisher<Envelope<<S as ServiceType>::Request>>;
type TypedReplies<S> = Subscription<Envelope<<S as ServiceType>::Response>>;
type TypedClient<S> = ClientInner<TypedRequests<S>, TypedReplies<S>>;

impl<S: ServiceType> std::fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client<{}>({})", S::TYPE_NAME, self.inner.name)
    }
}

impl<S: ServiceType> Client<S> {
    /// The service, fully qualified.
    pub fn service_name(&self) -> &str {
        &self.inner.name
    }

    /// Servers of the service now: in any process of this host, and on the
    /// network. Servers whose process died are cleaned up first.
    pub fn server_count(&self) -> usize {
        self.inner.server_count()
    }

    /// What a wait-set waits on for this client: its replies.
    pub(crate) fn replies_receiver(&self) -> &crate::delivery::Receiver {
        &self.inner.replies.inner
    }

    /// Whether a server is there (rclcpp's `service_is_ready`).
    pub fn service_is_ready(&self) -> bool {
        self.server_count() > 0
    }

    /// Waits up to `timeout` for a server; returns whether one is there.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        self.inner.wait_for_service(timeout)
    }

    /// Sends `request` and waits up to `timeout` for its reply.
    ///
    /// Fails with [`CallError::NoServer`] at once when no server is there,
    /// with [`CallError::ServerGone`] as soon as every server went away
    /// before answering (its process ended), and with
    /// [`CallError::Timeout`] when servers are there but none answered in
    /// time.
    pub fn call(&self, request: S::Request, timeout: Duration) -> Result<Sample<S::Response>, CallError> {
        self.call_async(request)?.wait(timeout)
    }

    /// Sends `request` and returns at once; the [`PendingCall`] collects the
    /// reply. Several calls may be pending at a time, their replies come in
    /// any order.
    ///
    /// The replies queued before the call are taken first (filed for the
    /// pending calls, dropped if other clients'): with room for ten, the
    /// queue then holds this call's reply unless ten others come before it
    /// and it is not collected meanwhile.
    pub fn call_async(&self, request: S::Request) -> Result<PendingCall<S>, CallError> {
        let pending = self
            .inner
            .send(|requests, client, sequence| requests.publish_copy(&Envelope { client, sequence, body: request }))?;
        Ok(PendingCall { pending })
    }

    /// Lends memory for a request with one length per buffer field, in
    /// declaration order, to send with [`call_loaned`](Self::call_loaned):
    /// nothing is copied on the way to the servers.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use freight::{Context, ServiceType};
    /// # freight::message! { pub struct DetectRequest = "my_msgs/srv/Detect_Request" { pub width: u32, pub pixels: freight::Buffer<u8> } }
    /// # freight::message! { pub struct DetectResponse = "my_msgs/srv/Detect_Response" { pub count: u32 } }
    /// # pub struct Detect;
    /// # impl ServiceType for Detect {
    /// #     const TYPE_NAME: &'static str = "my_msgs/srv/Detect";
    /// #     type Request = DetectRequest;
    /// #     type Response = DetectResponse;
    /// # }
    /// let node = Context::new()?.create_node("camera")?;
    /// let client = node.create_client::<Detect>("detect")?;
    /// let mut request = client.loan_request(&[640 * 480])?.write_from_fn(|i| (i % 256) as u8);
    /// request.width = 640;
    /// let reply = client.call_loaned(request)?.wait(Duration::from_secs(1))?;
    /// println!("{} objects", reply.count);
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn loan_request(&self, lens: &[usize]) -> Result<LoanUninit<Envelope<S::Request>>, LoanError> {
        self.inner.requests.loan_buffers(lens)
    }

    /// Sends a written loan as a request; as [`call_async`](Self::call_async) otherwise.
    pub fn call_loaned(&self, mut request: Loan<Envelope<S::Request>>) -> Result<PendingCall<S>, CallError> {
        let pending = self.inner.send(|requests, client, sequence| {
            (request.client, request.sequence) = (client, sequence);
            requests.publish(request)
        })?;
        Ok(PendingCall { pending })
    }
}

/// The request publisher as its client sees it: how many servers read it.
pub(crate) trait Servers: Send + Sync {
    /// Servers as listed, without scanning for dead processes.
    fn listed(&self) -> usize;
    /// Servers alive now (those of dead processes cleaned up first).
    fn alive(&self) -> usize;
}

impl<M: Message> Servers for Publisher<M> {
    fn listed(&self) -> usize {
        self.listed_subscription_count() + self.network_subscription_count()
    }
    fn alive(&self) -> usize {
        self.subscription_count() + self.network_subscription_count()
    }
}

/// The reply subscription as its client sees it: replies and the call each
/// answers.
pub(crate) trait Replies: Send + Sync {
    type Reply: Send;
    /// The next reply, waiting up to `timeout` (zero: only one queued now).
    fn take_reply(&self, timeout: Duration) -> Result<Option<(RequestId, Self::Reply)>, TakeError>;
}

impl<M: Message> Replies for Subscription<Envelope<M>> {
    type Reply = Sample<M>;
    fn take_reply(&self, timeout: Duration) -> Result<Option<(RequestId, Sample<M>)>, TakeError> {
        let taken = if timeout.is_zero() { self.try_take()? } else { self.take(timeout)? };
        Ok(taken.map(|Sample { msg: Envelope { client, sequence, body }, info }| {
            (RequestId { client, sequence }, Sample { msg: body, info })
        }))
    }
}

/// A client's state, typed or generic: its ends, its id, and its pending calls.
pub(crate) struct ClientInner<Q, P: Replies> {
    pub(crate) name: String,
    /// This client's id in request headers: servers answer with it, and the
    /// client keeps only the replies that carry it.
    id: u64,
    next_sequence: AtomicI64,
    pub(crate) requests: Q,
    pub(crate) replies: P,
    /// The calls waiting for their reply, by sequence number; `Some` once
    /// the reply came and before the call collected it.
    calls: Mutex<HashMap<i64, Option<P::Reply>>>,
}

/// How long a waiting call blocks in one take before it looks again at its
/// servers: a server that went away ends the call within this time.
const LIVENESS_SLICE: Duration = Duration::from_millis(50);

impl<Q: Servers, P: Replies> ClientInner<Q, P> {
    pub(crate) fn new(name: String, requests: Q, replies: P) -> Arc<Self> {
        Arc::new(ClientInner {
            name,
            id: client_id(),
            next_sequence: AtomicI64::new(1),
            requests,
            replies,
            calls: Mutex::default(),
        })
    }

    pub(crate) fn server_count(&self) -> usize {
        self.requests.alive()
    }

    pub(crate) fn wait_for_service(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.server_count() > 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    /// Sends a request with `publish(requests, client id, sequence)` once a
    /// server is there, and files the call.
    pub(crate) fn send(
        self: &Arc<Self>,
        publish: impl FnOnce(&Q, u64, i64) -> Result<(), PublishError>,
    ) -> Result<Pending<Q, P>, CallError> {
        // Servers as listed, without scanning for dead processes (that costs
        // a directory walk per call): a call to a server that died unnoticed
        // ends with `ServerGone` within a liveness slice.
        if self.requests.listed() == 0 {
            return Err(CallError::NoServer { service: self.name.clone() });
        }
        self.collect(Duration::ZERO)?;
        let sequence = self.next_sequence.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).insert(sequence, None);
        let pending = Pending { client: self.clone(), sequence };
        publish(&self.requests, self.id, sequence)?;
        Ok(pending)
    }

    /// Takes the replies queued now, or waits up to `timeout` for one, and
    /// files those of this client's pending calls; others' are dropped.
    fn collect(&self, timeout: Duration) -> Result<(), CallError> {
        let mut next = self.replies.take_reply(timeout)?;
        while let Some((id, reply)) = next {
            if id.client == self.id {
                if let Some(slot @ None) = lock(&self.calls).get_mut(&id.sequence) {
                    *slot = Some(reply);
                }
            }
            next = self.replies.take_reply(Duration::ZERO)?;
        }
        Ok(())
    }
}

/// A call waiting for its reply, of a typed or a generic client. Dropping
/// it forgets the call: a reply that comes later is dropped.
pub(crate) struct Pending<Q: Servers, P: Replies> {
    client: Arc<ClientInner<Q, P>>,
    sequence: i64,
}

impl<Q: Servers, P: Replies> Pending<Q, P> {
    pub(crate) fn sequence(&self) -> i64 {
        self.sequence
    }

    pub(crate) fn service_name(&self) -> &str {
        &self.client.name
    }

    pub(crate) fn try_get(&mut self) -> Result<Option<P::Reply>, CallError> {
        self.client.collect(Duration::ZERO)?;
        Ok(self.take_filed())
    }

    pub(crate) fn wait_for(&mut self, timeout: Duration) -> Result<P::Reply, CallError> {
        let deadline = Instant::now() + timeout;
        let mut looked = Instant::now();
        loop {
            if let Some(reply) = self.take_filed() {
                return Ok(reply);
            }
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(CallError::Timeout { service: self.client.name.clone(), timeout });
            }
            // A slice without the reply (other clients' replies may have
            // come): are the servers still there? Looking scans the host's
            // processes, so not once per reply.
            if now.duration_since(looked) >= LIVENESS_SLICE {
                looked = now;
                if self.client.server_count() == 0 {
                    // A reply may have come just before its server went away.
                    self.client.collect(Duration::ZERO)?;
                    return self
                        .take_filed()
                        .ok_or_else(|| CallError::ServerGone { service: self.client.name.clone() });
                }
            }
            self.client.collect(left.min(LIVENESS_SLICE))?;
        }
    }

    fn take_filed(&mut self) -> Option<P::Reply> {
        lock(&self.client.calls).get_mut(&self.sequence).and_then(Option::take)
    }
}

impl<Q: Servers, P: Replies> Drop for Pending<Q, P> {
    fn drop(&mut self) {
        lock(&self.client.calls).remove(&self.sequence);
    }
}

/// A call sent with [`Client::call_async`], waiting for its reply. Dropping
/// it forgets the call: a reply that comes later is dropped.
pub struct PendingCall<S: ServiceType> {
    pending: Pending<TypedRequests<S>, TypedReplies<S>>,
}

impl<S: ServiceType> std::fmt::Debug for PendingCall<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingCall<{}>({} #{})", S::TYPE_NAME, self.pending.service_name(), self.pending.sequence())
    }
}

impl<S: ServiceType> PendingCall<S> {
    /// The call's sequence number, as the request header carries it.
    pub fn sequence(&self) -> i64 {
        self.pending.sequence()
    }

    /// The reply, if it came.
    pub fn try_get(&mut self) -> Result<Option<Sample<S::Response>>, CallError> {
        self.pending.try_get()
    }

    /// Waits up to `timeout` for the reply (see [`Client::call`] for the errors).
    pub fn wait(mut self, timeout: Duration) -> Result<Sample<S::Response>, CallError> {
        self.wait_for(timeout)
    }

    /// As [`wait`](Self::wait), but the call stays pending after
    /// [`CallError::Timeout`]: wait for it again, or drop it to forget it
    /// (what the C ABI's `freight_pending_call_wait` needs).
    pub fn wait_for(&mut self, timeout: Duration) -> Result<Sample<S::Response>, CallError> {
        self.pending.wait_for(timeout)
    }
}

/// An id for a new client: random, so unique on a host and across hosts in
/// practice (process ids repeat across pid namespaces).
fn client_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // Each `RandomState` has fresh keys, seeded from the OS's randomness.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}
