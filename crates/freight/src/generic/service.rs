//! Services of a type known at run time: a server and a client whose
//! request and response are [`MessageLayout`]s. On the wire and in shared
//! memory they are what typed services are (`rq/<name>Request`,
//! `rr/<name>Reply`, the request header before the message), so a generic
//! end calls or serves a typed one of the same `.srv` file.

use std::sync::Arc;
use std::time::Duration;

use freight_msg::cdr::DecodeErrorKind;
use freight_msg::{CdrWriter, DecodeError};

use super::{
    unmade, GenericLoan, GenericLoanUninit, GenericMessage, GenericPublisher, GenericSample, GenericSubscription,
    MessageLayout,
};
use crate::delivery::FullQueues;
use crate::error::{CallError, CreateError, LoanError, PublishError, TakeError};
use crate::node::Node;
use crate::qos::QoS;
use crate::service::{service_topics, ClientInner, Pending, Replies, RequestId, Servers, ServiceOptions};

/// Bytes of the request header (client id, sequence number) before a
/// request's or reply's fields, after the CDR encapsulation header. A
/// multiple of 8, so the message's fields keep their alignment.
const HEADER: usize = 16;
/// The CDR encapsulation header.
const ENCAPSULATION: usize = 4;

/// A message's layout with the request header before its fields.
fn enveloped(layout: &MessageLayout) -> Arc<MessageLayout> {
    use super::{FieldKind, Item, Number};
    let u64_field = || FieldKind::Single(Item::Number(Number::Eight));
    Arc::new(layout.prefixed(vec![("client_id".into(), u64_field()), ("sequence_number".into(), u64_field())]))
}

/// `message`'s small fields with `id` written before them.
fn with_header(id: RequestId, fields: &[u8]) -> Result<Vec<u8>, PublishError> {
    let body = fields.get(ENCAPSULATION..).ok_or(PublishError::Fields {
        type_name: "a service message",
        reason: format!("{} bytes of small fields, fewer than CDR's 4-byte header", fields.len()),
    })?;
    let mut w = CdrWriter::with_capacity(ENCAPSULATION + HEADER + body.len());
    w.write_u64(id.client);
    w.write_i64(id.sequence);
    let mut out = w.finish();
    out.extend_from_slice(body);
    Ok(out)
}

/// Fails unless `message` is of the type `layout`.
fn of_type(message: &GenericMessage, layout: &MessageLayout) -> Result<(), PublishError> {
    if message.layout().hash() == layout.hash() {
        return Ok(());
    }
    Err(PublishError::Fields {
        type_name: "the service's message",
        reason: format!("a {} where a {} goes", message.layout().type_name(), layout.type_name()),
    })
}

/// A taken envelope as its message and the call it belongs to.
fn without_header(layout: &Arc<MessageLayout>, sample: GenericSample) -> Result<(RequestId, GenericSample), TakeError> {
    let (fields, buffers) = sample.message.into_parts();
    let header = |at: usize| fields.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let (Some(client), Some(sequence)) = (header(ENCAPSULATION), header(ENCAPSULATION + 8)) else {
        // The envelope's layout starts with the header: a decoded one has it.
        let kind = DecodeErrorKind::UnexpectedEnd { needed: ENCAPSULATION + HEADER, remaining: fields.len() };
        return Err(TakeError::MalformedCdr(DecodeError { offset: 0, kind }));
    };
    let mut body = fields[..ENCAPSULATION].to_vec();
    body.extend_from_slice(&fields[ENCAPSULATION + HEADER..]);
    let message = GenericMessage::received(layout.clone(), body, buffers).map_err(TakeError::MalformedCdr)?;
    let id = RequestId { client, sequence: sequence as i64 };
    Ok((id, GenericSample { message, info: sample.info }))
}

/// The requests of a service of a run-time type and the way back to each
/// caller, as [`ServiceServer`](crate::ServiceServer).
pub struct GenericServiceServer {
    name: String,
    request: Arc<MessageLayout>,
    response: Arc<MessageLayout>,
    pub(crate) requests: GenericSubscription,
    replies: GenericPublisher,
}

impl std::fmt::Debug for GenericServiceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericServiceServer<{}>({})", self.request.type_name(), self.name)
    }
}

/// Calls a service of a run-time type, as [`Client`](crate::Client).
pub struct GenericClient {
    inner: Arc<ClientInner<GenericPublisher, GenericReplies>>,
    request: Arc<MessageLayout>,
}

impl std::fmt::Debug for GenericClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericClient<{}>({})", self.request.type_name(), self.inner.name)
    }
}

/// A generic client's replies: the envelopes, and the response's layout
/// that each one's message is read back as.
pub(crate) struct GenericReplies {
    pub(crate) subscription: GenericSubscription,
    response: Arc<MessageLayout>,
}

impl Servers for GenericPublisher {
    fn listed(&self) -> usize {
        self.listed_subscription_count() + self.network_subscription_count()
    }
    fn alive(&self) -> usize {
        self.subscription_count() + self.network_subscription_count()
    }
}

impl Replies for GenericReplies {
    type Reply = GenericSample;
    fn take_reply(&self, timeout: Duration) -> Result<Option<(RequestId, GenericSample)>, TakeError> {
        let s = &self.subscription;
        let taken = if timeout.is_zero() { s.try_take()? } else { s.take(timeout)? };
        taken.map(|sample| without_header(&self.response, sample)).transpose()
    }
}

impl Node {
    /// Creates a server of the service `name` whose requests are of the
    /// type `request` describes and replies of `response` (a `.srv` file's
    /// two halves, `pkg/srv/Name_Request` and `pkg/srv/Name_Response`).
    pub fn create_generic_service_server(
        &self,
        name: &str,
        request: Arc<MessageLayout>,
        response: Arc<MessageLayout>,
        options: ServiceOptions,
    ) -> Result<GenericServiceServer, CreateError> {
        let name = self.resolve_topic_name(name)?;
        let (rq, rr) = service_topics(&name);
        let qos = QoS::services_default();
        // The reply publisher first, as a typed server makes it.
        let replies =
            GenericPublisher::create(self, &rr, enveloped(&response), qos, options.sending(), FullQueues::SkipNew)?;
        let requests = GenericSubscription::create(self, &rq, enveloped(&request), qos, options.receiving())?;
        Ok(GenericServiceServer { name, request, response, requests, replies })
    }

    /// Creates a client of the service `name` of the run-time type
    /// `request` / `response`.
    pub fn create_generic_client(
        &self,
        name: &str,
        request: Arc<MessageLayout>,
        response: Arc<MessageLayout>,
        options: ServiceOptions,
    ) -> Result<GenericClient, CreateError> {
        let name = self.resolve_topic_name(name)?;
        let (rq, rr) = service_topics(&name);
        let qos = QoS::services_default();
        // The reply subscription first, as a typed client makes it.
        let subscription = GenericSubscription::create(self, &rr, enveloped(&response), qos, options.receiving())?;
        let requests =
            GenericPublisher::create(self, &rq, enveloped(&request), qos, options.sending(), FullQueues::ByQos)?;
        let replies = GenericReplies { subscription, response };
        Ok(GenericClient { inner: ClientInner::new(name, requests, replies), request })
    }
}

impl GenericServiceServer {
    /// The service, fully qualified.
    pub fn service_name(&self) -> &str {
        &self.name
    }

    /// The type of its responses.
    pub fn response_layout(&self) -> &Arc<MessageLayout> {
        &self.response
    }

    /// The next request, waiting up to `timeout` for one (zero: only one
    /// queued now), with the id to answer it with.
    pub fn take_request(&self, timeout: Duration) -> Result<Option<(GenericSample, RequestId)>, TakeError> {
        let s = &self.requests;
        let taken = if timeout.is_zero() { s.try_take()? } else { s.take(timeout)? };
        let Some(sample) = taken else { return Ok(None) };
        let (id, request) = without_header(&self.request, sample)?;
        Ok(Some((request, id)))
    }

    /// Sends `response` to the call `id` (see
    /// [`ServiceServer::send_response`](crate::ServiceServer::send_response)).
    pub fn send_response(&self, id: RequestId, response: &GenericMessage) -> Result<(), PublishError> {
        of_type(response, &self.response)?;
        let fields = with_header(id, response.fields())?;
        let envelope = GenericMessage::new(self.replies.layout().clone(), fields, response.buffers().to_vec())
            .map_err(|e| unmade("the response", e))?;
        self.replies.publish_copy(&envelope)
    }

    /// Lends memory for a response with one length per buffer field outside
    /// its sequences, to send with [`send_loaned_response`](Self::send_loaned_response).
    pub fn loan_response(&self, lens: &[usize]) -> Result<GenericLoanUninit, LoanError> {
        self.replies.loan_buffers(lens)
    }

    /// Sends a written loan with the small fields `fields` (the response's,
    /// its buffers named by their ordinals) as the response to the call `id`.
    pub fn send_loaned_response(&self, id: RequestId, loan: GenericLoan, fields: &[u8]) -> Result<(), PublishError> {
        self.replies.publish(loan, with_header(id, fields)?)
    }
}

impl GenericClient {
    /// The service, fully qualified.
    pub fn service_name(&self) -> &str {
        &self.inner.name
    }

    /// The type of its requests.
    pub fn request_layout(&self) -> &Arc<MessageLayout> {
        &self.request
    }

    /// Servers of the service now (see [`Client::server_count`](crate::Client::server_count)).
    pub fn server_count(&self) -> usize {
        self.inner.server_count()
    }

    /// What a wait-set waits on for this client: its replies.
    pub(crate) fn replies_receiver(&self) -> &crate::delivery::Receiver {
        &self.inner.replies.subscription.inner
    }

    /// Waits up to `timeout` for a server; returns whether one is there.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        self.inner.wait_for_service(timeout)
    }

    /// Sends `request` and returns at once (see
    /// [`Client::call_async`](crate::Client::call_async)).
    pub fn call_async(&self, request: &GenericMessage) -> Result<GenericPendingCall, CallError> {
        of_type(request, &self.request)?;
        let pending = self.inner.send(|requests, client, sequence| {
            let fields = with_header(RequestId { client, sequence }, request.fields())?;
            let envelope = GenericMessage::new(requests.layout().clone(), fields, request.buffers().to_vec())
                .map_err(|e| unmade("the request", e))?;
            requests.publish_copy(&envelope)
        })?;
        Ok(GenericPendingCall { pending })
    }

    /// Sends `request` and waits up to `timeout` for its reply.
    pub fn call(&self, request: &GenericMessage, timeout: Duration) -> Result<GenericSample, CallError> {
        self.call_async(request)?.wait(timeout)
    }

    /// Lends memory for a request, to send with [`call_loaned`](Self::call_loaned).
    pub fn loan_request(&self, lens: &[usize]) -> Result<GenericLoanUninit, LoanError> {
        self.inner.requests.loan_buffers(lens)
    }

    /// Sends a written loan with the request's small fields `fields`; as
    /// [`call_async`](Self::call_async) otherwise.
    pub fn call_loaned(&self, loan: GenericLoan, fields: &[u8]) -> Result<GenericPendingCall, CallError> {
        let pending = self.inner.send(|requests, client, sequence| {
            requests.publish(loan, with_header(RequestId { client, sequence }, fields)?)
        })?;
        Ok(GenericPendingCall { pending })
    }
}

/// A call of a [`GenericClient`] waiting for its reply, as
/// [`PendingCall`](crate::PendingCall).
pub struct GenericPendingCall {
    pending: Pending<GenericPublisher, GenericReplies>,
}

impl std::fmt::Debug for GenericPendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericPendingCall({} #{})", self.pending.service_name(), self.pending.sequence())
    }
}

impl GenericPendingCall {
    /// The call's sequence number, as the request header carries it.
    pub fn sequence(&self) -> i64 {
        self.pending.sequence()
    }

    /// The reply, if it came.
    pub fn try_get(&mut self) -> Result<Option<GenericSample>, CallError> {
        self.pending.try_get()
    }

    /// Waits up to `timeout` for the reply.
    pub fn wait(mut self, timeout: Duration) -> Result<GenericSample, CallError> {
        self.wait_for(timeout)
    }

    /// As [`wait`](Self::wait), the call staying pending after a timeout.
    pub fn wait_for(&mut self, timeout: Duration) -> Result<GenericSample, CallError> {
        self.pending.wait_for(timeout)
    }
}
