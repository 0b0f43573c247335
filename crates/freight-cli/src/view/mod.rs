//! `freight view`: a live view of freight topics in the Foxglove app, through a
//! Foxglove WebSocket server (protocol `foxglove.sdk.v1`, formerly
//! `foxglove.websocket.v1`).
//!
//! The receiver (this thread) finds the topics, subscribes to each and hands
//! each message to its channel ([`forward`]); the server ([`server`]) runs on
//! the `foxglove` crate's own tokio threads and sends each client what it
//! subscribed to. Nothing between a freight publisher and a browser waits for
//! the browser: the subscriptions are best effort, keep last
//! [`SUBSCRIPTION_DEPTH`]; [`throttle`] skips what is over the byte budget; the
//! server drops a slow client's oldest messages.

mod forward;
mod server;
mod throttle;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use freight::{Executor, History, Node, QoS};
use freight_bag::Schema;
use freight_dds::ReceivedCdr;

use crate::raw::{self, RawTopics};
use crate::stop;
use crate::subscribe::{subscribe, Received};
use forward::{Budget, Forward, TopicStats};
use server::Server;

/// How often the receiver looks for new topics.
const DISCOVERY_PERIOD: Duration = Duration::from_millis(500);

/// How often the status line is refreshed (on a terminal; else every 5 s).
const STATUS_PERIOD: Duration = Duration::from_secs(1);

/// Messages each freight subscription keeps: while the viewer encodes one
/// large frame, newer ones replace older ones instead of queueing up.
const SUBSCRIPTION_DEPTH: usize = 2;

pub const VIEW_ABOUT: &str = "\
Serve freight topics to the Foxglove app, live: a Foxglove WebSocket server (subprotocol
foxglove.sdk.v1 or v1.1, what foxglove.websocket.v1 became; a client offering only the old
name is refused). In Foxglove: Open connection..., Foxglove WebSocket, and the URL the first
line prints (ws://127.0.0.1:8765 by default).

The first line on stdout is `freight view: serving N topics on ws://HOST:PORT ...` (with
--all: `serving all topics`); with --port 0 it gives the port picked. Each topic is one
channel: message encoding cdr, schema pkg/msg/Type in encoding ros2msg with the full
definition (as in a bag); each message is the CDR with its 4-byte header, its log time the
time freight view received it (nanoseconds since the epoch). Topics named that do not exist
yet are served when they appear, as are new topics with --all. Types outside freight's
built-in ones (a stock node's /rosout, nav_msgs/msg/Odometry, your own package) are read from
DDS as the CDR they travel as, with their definitions from a ROS 2 install's .msg files:
DIR/<package>/msg/<Type>.msg in each --msg-path DIR, then in the share directory of each prefix
of AMENT_PREFIX_PATH. A named topic whose type has no definition there is an error; with --all
it is skipped with a warning.

A message is encoded only while a client is subscribed to its channel. Nothing waits for a
client: the freight subscriptions are best effort, keep last 2, so a publisher never waits
for the viewer (reliable publishers included), and a message that comes while the viewer is
busy replaces an older one. --max-bandwidth is a byte budget shared by all topics (a token
bucket with a burst of 0.1 s that lends to one message at a time; a tenth of it is kept for
messages of at most 64 KiB, so that a camera frame does not hold back transforms and
odometry): a message that comes while it is spent is skipped, and counted. Every client gets
at most the budget (a client subscribed to fewer topics gets less). Each client has a queue of 32 messages in the
server; when a client does not keep up, its oldest messages are dropped, and a client that
stops reading its control messages is disconnected.

Copies per byte: one into the CDR buffer (from the subscriber's sample in shared memory),
then per client one into the server's frame and the kernel's into the socket.

Status on stderr: clients, and per topic messages sent, MB/s and messages skipped; the
summary on stdout at the end. Ctrl-C and SIGTERM end it.";

/// `freight view` arguments.
#[derive(Debug, Clone, Args)]
pub struct ViewArgs {
    /// Topics to serve.
    pub topics: Vec<String>,
    /// Serve every topic, including those that appear later.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// The address to listen on (0.0.0.0: every interface; the protocol has no authentication).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on (0: a free one, printed on the first line).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// Most bytes per second sent, all topics together (0: no limit). 20 MB/s is what a
    /// browser decodes and draws comfortably, e.g. a 1080p RGB camera at 3 Hz.
    #[arg(long, value_name = "BYTES_PER_S", default_value_t = 20_000_000)]
    pub max_bandwidth: u64,
    /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "ID")]
    pub domain: Option<u32>,
    #[command(flatten)]
    pub msg_paths: raw::MsgPaths,
}

/// What can stop `freight view`.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("name the topics to view, or --all")]
    NoTopics,
    #[error(
        "cannot listen on {host}:{port}: {source}; another `freight view` or Foxglove bridge may \
         use it: pick another --port (0: a free one)"
    )]
    Bind {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the Foxglove server: {0}")]
    Server(#[source] foxglove::FoxgloveError),
    #[error("{topic}: {source}")]
    UnknownType {
        topic: String,
        #[source]
        source: freight_bag::BagError,
    },
    #[error("{topic}: advertising its channel: {source}")]
    Channel {
        topic: String,
        #[source]
        source: foxglove::FoxgloveError,
    },
    /// freight's own errors (context, node, graph, subscription), worded by freight.
    #[error("{0}")]
    Freight(String),
}

/// A topic seen in the graph.
struct Topic {
    name: String,
    /// `None` for a topic not served (no definition of its type, with --all).
    stats: Option<Arc<TopicStats>>,
    /// Subscribed through the executor (a built-in type), not raw from DDS.
    typed: bool,
}

/// Runs `freight view` until Ctrl-C or SIGTERM.
pub fn run(args: &ViewArgs) -> Result<ExitCode, String> {
    serve(args).map_err(|e| e.to_string())
}

fn serve(args: &ViewArgs) -> Result<ExitCode, ViewError> {
    if args.topics.is_empty() && !args.all {
        return Err(ViewError::NoTopics);
    }
    stop::install();
    let ctx = crate::ros_args::context(args.domain).map_err(|e| ViewError::Freight(e.to_string()))?;
    let node = ctx
        .create_node(&format!("freight_view_{}", std::process::id()))
        .map_err(|e| ViewError::Freight(e.to_string()))?;
    let wanted: Vec<String> = args
        .topics
        .iter()
        .map(|t| node.resolve_topic_name(t).map_err(|e| ViewError::Freight(e.to_string())))
        .collect::<Result<_, _>>()?;
    let server = Server::start(&args.host, args.port)?;
    let what = if args.all { "all".to_string() } else { wanted.len().to_string() };
    println!(
        "freight view: serving {what} topics on {url} (Foxglove: Open connection..., Foxglove WebSocket, {url})",
        url = url(&args.host, server.port())
    );
    let budget = forward::budget(args.max_bandwidth);
    let received = receive(args, &node, &wanted, &server, &budget);
    server.stop();
    let topics = received?;
    summary(&topics);
    Ok(ExitCode::SUCCESS)
}

/// `ws://host:port`, an IPv6 address in brackets.
fn url(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("ws://[{host}]:{port}")
    } else {
        format!("ws://{host}:{port}")
    }
}

/// Subscribes and forwards until a signal comes.
fn receive(
    args: &ViewArgs,
    node: &Node,
    wanted: &[String],
    server: &Server,
    budget: &Budget,
) -> Result<Vec<Topic>, ViewError> {
    let mut exec = Executor::new();
    exec.on_take_error(|e| eprintln!("warning: a message could not be taken and was not sent: {e}"));
    let mut topics: Vec<Topic> = Vec::new();
    let mut next_discovery = Instant::now();
    let mut status = Status::new();
    let mut to = Serving {
        server,
        budget,
        raw: RawTopics::new(node.context().domain_id()),
        definition_dirs: args.msg_paths.dirs(),
    };
    while !stop::requested() {
        let now = Instant::now();
        if now >= next_discovery {
            next_discovery = now + DISCOVERY_PERIOD;
            discover(node, wanted, args.all, &mut exec, &mut topics, &mut to)?;
        }
        let wait = Duration::from_millis(100);
        // An executor without subscriptions cannot wait; raw topics take
        // their messages on DDS threads.
        if topics.iter().any(|t| t.typed) {
            exec.spin_once(wait).map_err(|e| ViewError::Freight(e.to_string()))?;
        } else {
            stop::sleep(wait);
        }
        status.maybe_print(&topics, server);
    }
    status.clear();
    Ok(topics)
}

/// Where discovered topics are served: the server, the budget they share,
/// the raw topics, and where definitions of types outside the built-in ones
/// are looked for.
struct Serving<'a> {
    server: &'a Server,
    budget: &'a Budget,
    raw: RawTopics,
    definition_dirs: Vec<PathBuf>,
}

/// Subscribes to the wanted topics that exist and are not served yet, each
/// with a channel of its own.
fn discover(
    node: &Node,
    wanted: &[String],
    all: bool,
    exec: &mut Executor,
    topics: &mut Vec<Topic>,
    to: &mut Serving<'_>,
) -> Result<(), ViewError> {
    let present = node.topic_names_and_types().map_err(|e| ViewError::Freight(e.to_string()))?;
    for t in present {
        if topics.iter().any(|x| x.name == t.name) || !(all || wanted.contains(&t.name)) {
            continue;
        }
        // A type freight has no Rust type for is read raw from DDS, its
        // definition taken from a ROS 2 install's .msg files.
        let built_in = Schema::built_in(&t.type_name);
        let typed = built_in.is_some();
        let schema = match built_in.map_or_else(|| Schema::from_share_dirs(&t.type_name, &to.definition_dirs), Ok) {
            Ok(schema) => schema,
            Err(source) => {
                let error = ViewError::UnknownType { topic: t.name.clone(), source };
                if !all {
                    return Err(error);
                }
                eprintln!("warning: not serving {error}");
                topics.push(Topic { name: t.name, stats: None, typed: false });
                continue;
            }
        };
        let stats: Arc<TopicStats> = Arc::default();
        let mut forward = Forward {
            channel: to.server.channel(&t.name, &schema)?,
            budget: to.budget.clone(),
            stats: stats.clone(),
            buf: Vec::new(),
        };
        let qos = QoS { history: History::KeepLast(SUBSCRIPTION_DEPTH), ..QoS::sensor_data() };
        if typed {
            // A viewer skips what it cannot send anyway: its losses are not counted.
            let _losses = subscribe(
                node,
                exec,
                &t.name,
                &t.type_name,
                qos,
                Box::new(move |s: &dyn Received| forward.on_sample(s)),
            )
            .map_err(ViewError::Freight)?;
            eprintln!("serving {} [{}]", crate::topic::shown(&t.name), t.type_name);
        } else {
            let qos = qos.to_dds(node.context().limits().max_depth);
            let forward = Mutex::new(forward);
            let on_cdr = move |s: &ReceivedCdr| forward.lock().unwrap_or_else(|p| p.into_inner()).on_cdr(s);
            let _losses = to.raw.subscribe(&t.name, &schema, &qos, Box::new(on_cdr)).map_err(ViewError::Freight)?;
            eprintln!("serving {} [{}] (from DDS, as CDR)", crate::topic::shown(&t.name), t.type_name);
        }
        topics.push(Topic { name: t.name, stats: Some(stats), typed });
    }
    Ok(())
}

/// The live status line.
struct Status {
    tty: bool,
    last: Instant,
    /// Per topic, bytes sent at the last line.
    previous: Vec<u64>,
    printed: bool,
}

impl Status {
    fn new() -> Self {
        Status { tty: std::io::stderr().is_terminal(), last: Instant::now(), previous: Vec::new(), printed: false }
    }

    fn maybe_print(&mut self, topics: &[Topic], server: &Server) {
        let period = if self.tty { STATUS_PERIOD } else { STATUS_PERIOD * 5 };
        let elapsed = self.last.elapsed();
        if elapsed < period || topics.is_empty() {
            return;
        }
        self.last = Instant::now();
        self.previous.resize(topics.len(), 0);
        let mut parts = Vec::new();
        for (t, previous) in topics.iter().zip(self.previous.iter_mut()) {
            let Some(s) = &t.stats else { continue };
            let bytes = s.bytes.load(Relaxed);
            parts.push(format!(
                "{} {} sent {:.1} MB/s skipped {}",
                crate::topic::shown(&t.name),
                s.sent.load(Relaxed),
                bytes.saturating_sub(*previous) as f64 / elapsed.as_secs_f64() / 1e6,
                s.skipped.load(Relaxed)
            ));
            *previous = bytes;
        }
        let clients = server.clients();
        let line = format!("[{clients} client{}] {}", if clients == 1 { "" } else { "s" }, parts.join(" | "));
        if self.tty {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
        self.printed = true;
    }

    fn clear(&self) {
        if self.tty && self.printed {
            eprintln!();
        }
    }
}

/// Prints per topic what was received, sent and skipped (stdout).
fn summary(topics: &[Topic]) {
    let served: Vec<_> = topics.iter().filter_map(|t| Some((t, t.stats.as_ref()?))).collect();
    println!("freight view: served {} topics", served.len());
    for (t, s) in served {
        println!(
            "  {}: {} received, {} sent ({} bytes), {} skipped over --max-bandwidth, {} not encodable",
            crate::topic::shown(&t.name),
            s.received.load(Relaxed),
            s.sent.load(Relaxed),
            s.bytes.load(Relaxed),
            s.skipped.load(Relaxed),
            s.failed.load(Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_puts_an_ipv6_host_in_brackets() {
        assert_eq!(url("127.0.0.1", 8765), "ws://127.0.0.1:8765");
        assert_eq!(url("::1", 9000), "ws://[::1]:9000");
    }
}
