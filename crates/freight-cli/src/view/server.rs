//! The Foxglove side of `freight view`: the WebSocket server (protocol
//! `foxglove.sdk.v1` and `v1.1`, from the `foxglove` crate) and one channel per topic.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use foxglove::websocket::{ChannelView, Client, ServerListener};
use foxglove::{Context, FoxgloveError, RawChannel, Schema, WebSocketServer, WebSocketServerHandle};

use super::ViewError;

/// Messages each client's queue holds (the crate's default is 1024). The queue
/// counts messages, not bytes, and a client that does not read keeps it full:
/// 32 of 33 MB frames are 1 GB per stalled client, 1024 would be 34 GB. When it
/// is full the oldest message is dropped. The same bound applies to the
/// client's control queue (advertisements, status); a client that lets that
/// one fill is disconnected.
const CLIENT_BACKLOG: usize = 32;

/// How long a stopping server may take to close its connections.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The server and the context its channels live in.
pub struct Server {
    context: Arc<Context>,
    handle: WebSocketServerHandle,
}

impl Server {
    /// Listens on `host:port` (0: a free port).
    pub fn start(host: &str, port: u16) -> Result<Self, ViewError> {
        let context = Context::new();
        let handle = WebSocketServer::new()
            .name("freight view")
            .bind(host, port)
            .context(&context)
            .message_backlog_size(CLIENT_BACKLOG)
            .listener(Arc::new(Announcer))
            .start_blocking()
            .map_err(|e| match e {
                FoxgloveError::Bind(source) => ViewError::Bind { host: host.to_string(), port, source },
                other => ViewError::Server(other),
            })?;
        Ok(Server { context, handle })
    }

    /// The port it listens on (the one picked, for `--port 0`).
    pub fn port(&self) -> u16 {
        self.handle.port()
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.handle.client_count()
    }

    /// Advertises `topic` to every client, now and later: message encoding
    /// `cdr`, schema `type_name` in encoding `ros2msg` with the full definition.
    pub fn channel(&self, topic: &str, schema: &freight_bag::Schema) -> Result<Arc<RawChannel>, ViewError> {
        self.context
            .channel_builder(topic)
            .message_encoding("cdr")
            .schema(Schema::new(schema.type_name.to_string(), "ros2msg", schema.ros2msg.as_bytes().to_vec()))
            .build_raw()
            .map_err(|source| ViewError::Channel { topic: topic.to_string(), source })
    }

    /// Closes every connection, waiting at most [`SHUTDOWN_GRACE`]: a client
    /// that stopped reading must not hold the process up.
    pub fn stop(self) {
        let stopping = self.handle.stop();
        let (done, waited) = mpsc::channel();
        let waiter = thread::Builder::new().name("freight-view-stop".into()).spawn(move || {
            stopping.wait_blocking();
            let _ = done.send(());
        });
        if waiter.is_ok() {
            let _ = waited.recv_timeout(SHUTDOWN_GRACE);
        }
    }
}

/// Says on stderr when clients come, go, subscribe and unsubscribe. The
/// crate calls it from a client's poll loop, which must not block: it only prints.
struct Announcer;

impl ServerListener for Announcer {
    fn on_subscribe(&self, client: Client, channel: ChannelView) {
        eprintln!("client {} subscribed to {}", u32::from(client.id()), crate::topic::shown(channel.topic()));
    }

    fn on_unsubscribe(&self, client: Client, channel: ChannelView) {
        eprintln!("client {} unsubscribed from {}", u32::from(client.id()), crate::topic::shown(channel.topic()));
    }

    fn on_client_connect(&self) {
        eprintln!("a client connected");
    }

    fn on_client_disconnect(&self) {
        eprintln!("a client disconnected");
    }
}
