//! `freight topic`: `list`, `info`, `echo`, `hz`, `bw`, `pub`, as `ros2 topic` does:
//! this host's shared-memory plane and, over DDS, every other ROS 2 endpoint
//! of the domain (freight on other hosts, stock ROS 2 nodes). `pub` lives in
//! [`publish`].

mod publish;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use freight::graph::{Endpoint, EndpointKind, Pairing, TopicGraph};
use freight::{Message, MessageInfo, Node, QoS, Transport};
use freight_bag::Schema;
use freight_dds::ReceivedCdr;
use freight_msg::yaml::{self, YamlOptions};
use freight_msg::RawBuffer;

use crate::dynamic::DynamicType;
use crate::raw::{self, RawTopics};

/// `freight topic ...`
#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// List the topics of the domain.
    List {
        /// Show each topic's type.
        #[arg(short = 't', long)]
        show_types: bool,
        #[command(flatten)]
        domain: DomainArg,
    },
    /// Show a topic's type and endpoints; -v adds each endpoint and what each
    /// publisher/subscription pair exchanges buffers in.
    Info {
        /// The topic.
        topic: String,
        /// Every endpoint and pairing.
        #[arg(short, long)]
        verbose: bool,
        #[command(flatten)]
        domain: DomainArg,
    },
    /// Print the messages of a topic as YAML, as `ros2 topic echo` does; long
    /// arrays are truncated.
    #[command(long_about = ECHO_ABOUT)]
    Echo {
        /// The topic.
        topic: String,
        /// Print one message and exit.
        #[arg(long)]
        once: bool,
        /// Print this many messages and exit.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Print every element of arrays and every character of strings
        /// longer than --truncate-length.
        #[arg(short, long)]
        full_length: bool,
        /// The length arrays and strings are truncated to.
        #[arg(short = 'l', long, value_name = "N", default_value_t = yaml::DEFAULT_TRUNCATE_LENGTH)]
        truncate_length: usize,
        /// Print a summary of each array field instead of its elements
        /// (`'<sequence type: uint8, length: 12288>'`).
        #[arg(long)]
        no_arr: bool,
        /// Print a summary of each string instead of its text (`'<string length: <5>>'`).
        #[arg(long)]
        no_str: bool,
        #[command(flatten)]
        common: ReceiveArgs,
    },
    /// Print the rate messages arrive at.
    Hz {
        /// The topic.
        topic: String,
        #[command(flatten)]
        common: ReceiveArgs,
    },
    /// Print the bandwidth a topic uses.
    Bw {
        /// The topic.
        topic: String,
        #[command(flatten)]
        common: ReceiveArgs,
    },
    /// Publish generated messages (a UInt8MultiArray or an Image of any size), written
    /// straight into shared memory, or a message of any type given as YAML.
    #[command(long_about = PUB_ABOUT)]
    Pub(publish::PubArgs),
}

const ECHO_ABOUT: &str = "\
Print the messages of a topic as `ros2 topic echo` does: each one as YAML, field names from
its definition, followed by a line `---`. Every type can be printed; `hz` and `bw` take the
same types. The built-in ones (builtin_interfaces, std_msgs, geometry_msgs, sensor_msgs,
tensor_msgs) come through freight's typed subscription. Any other (a stock node's /rosout,
nav_msgs/msg/Odometry, your own package) is read from DDS as CDR and decoded by its type's .msg
files, found as `freight bag record` finds them: DIR/<package>/msg/<Type>.msg in each
--msg-path DIR, then in the share directory of each prefix of AMENT_PREFIX_PATH.

Arrays and strings longer than --truncate-length (128) keep their first elements and end with
'...', as in ROS 2. A truncated buffer field (the large data: pixels, points) also says its
length, element type and memory in a comment on its line:
`data:  # 33177600 elements (uint8) in shm`. --full-length prints everything; --no-arr and
--no-str print summaries instead.

Before each message, a comment line says where it came from and how its buffers arrived:
`# from publisher <id>, sequence <n>, via <path>, buffers in <backend>` (`no buffers` for a
message without buffer fields). Path (intra, shm, network) and backend are those `freight topic
info -v` shows for the pair. A message of another type says `# from publisher <DDS handle>,
via network, as CDR decoded by its .msg definition`. The output stays valid YAML: a stream of
documents.

It subscribes with sensor-data QoS (best effort, which matches reliable publishers too).";

const PUB_ABOUT: &str = "\
Publish generated messages (a UInt8MultiArray or an Image of any size), written straight
into shared memory, as `ros2 topic pub` does for large data.

Message k (counted from 0) has data byte i = (k + i) % 251, so receivers can check every
byte. A std_msgs/msg/UInt8MultiArray has --size bytes and layout.data_offset = k; a
sensor_msgs/msg/Image is --width x --height bgra8 (step width*4), frame_id `freight`,
stamped with the wall clock.

With VALUES, the fields as YAML (`freight topic pub /chatter std_msgs/msg/String \"{data:
hello}\"`), it sends that message each time, copied; fields not named keep their defaults,
and a field the type does not have or a value that does not fit it is an error before
anything starts. A type outside the built-in ones (rcl_interfaces/msg/Log, nav_msgs, your own
package) is encoded by its .msg files, found as `freight topic echo` finds them (--msg-path,
then AMENT_PREFIX_PATH), and sent over DDS as CDR.

stdout has one line per message, `published <k> <bytes> bytes`; above 10 Hz one line per
second for the latest message, with `(<n> messages in <secs> s, <rate> Hz)` appended. The
last message always gets a line. While --wait-for-subscribers holds it back:
`waiting for <N> subscription(s) on <topic>: <m> matched`. Warnings go to stderr.

It runs until --count messages are out or until Ctrl-C / SIGTERM (a clean exit, status 0).";

/// The ROS domain to look at.
#[derive(Debug, Clone, Args)]
pub struct DomainArg {
    /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "ID")]
    domain: Option<u32>,
    /// Seconds to listen to DDS discovery before answering (endpoints on other
    /// hosts and stock ROS 2 nodes); 0 shows this host's freight endpoints only.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    spin_time: f64,
}

/// Options of the commands that subscribe.
#[derive(Debug, Clone, Args)]
pub struct ReceiveArgs {
    #[command(flatten)]
    domain: DomainArg,
    /// Statistics over the last N messages (hz, bw).
    #[arg(long, default_value_t = 100, value_name = "N")]
    window: usize,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    #[command(flatten)]
    msg_paths: raw::MsgPaths,
}

/// Runs one `freight topic` command.
pub fn run(cmd: TopicCommand) -> Result<(), String> {
    match cmd {
        TopicCommand::List { show_types, domain } => {
            for t in inspector(&domain)?.topic_names_and_types().map_err(|e| e.to_string())? {
                if show_types {
                    println!("{} [{}]", shown(&t.name), shown(&t.type_name));
                } else {
                    println!("{}", shown(&t.name));
                }
            }
            Ok(())
        }
        TopicCommand::Info { topic, verbose, domain } => {
            let graph = graph_of(&inspector(&domain)?, &topic)?;
            print_info(&graph, verbose);
            Ok(())
        }
        TopicCommand::Echo { topic, once, count, full_length, truncate_length, no_arr, no_str, common } => {
            let limit = if once { Some(1) } else { count };
            let mut format = YamlOptions::default();
            format.truncate_length = (!full_length).then_some(truncate_length);
            format.no_arr = no_arr;
            format.no_str = no_str;
            receive(&topic, &common, &Mode::Echo { limit, format })
        }
        TopicCommand::Hz { topic, common } => receive(&topic, &common, &Mode::Hz),
        TopicCommand::Bw { topic, common } => receive(&topic, &common, &Mode::Bw),
        TopicCommand::Pub(args) => publish::run(&args).map_err(|e| e.to_string()),
    }
}

pub(crate) fn inspector(domain: &DomainArg) -> Result<Node, String> {
    let ctx = crate::ros_args::context(domain.domain).map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("freight_topic_{}", std::process::id())).map_err(|e| e.to_string())?;
    if domain.spin_time > 0.0 {
        node.wait_for_discovery(Duration::from_secs_f64(domain.spin_time)).map_err(|e| e.to_string())?;
    }
    Ok(node)
}

fn graph_of(node: &Node, topic: &str) -> Result<TopicGraph, String> {
    let topic = node.resolve_topic_name(topic).map_err(|e| e.to_string())?;
    node.topic_graph(&topic)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("topic {topic} does not exist in this domain; see `freight topic list`"))
}

/// `text` with its control characters escaped (`\u{1b}`): topic, type, node
/// and host names come from other processes and the network, and a terminal
/// would act on an escape sequence in them.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
}

fn print_info(g: &TopicGraph, verbose: bool) {
    let count = |k| g.endpoints.iter().filter(|e| e.kind == k).count();
    println!("Type: {}", shown(&g.topic.type_name));
    println!("Publisher count: {}", count(EndpointKind::Publisher));
    println!("Subscription count: {}", count(EndpointKind::Subscription));
    if !verbose {
        return;
    }
    for (i, e) in g.endpoints.iter().enumerate() {
        println!();
        print_endpoint(i, e);
    }
    if !g.pairings.is_empty() {
        println!();
        println!("Pairings (publisher -> subscription: path, buffers received in (copies on the way)):");
        for p in &g.pairings {
            println!("  {}", pairing_line(p));
        }
    }
    let plane = freight::local_plane();
    if let Some(owner) = plane.shared_root_owner {
        println!();
        println!(
            "Local plane: {} (the shared iceoryx2 directory belongs to uid {owner}): nodes of other users are reached over DDS",
            plane.root.display()
        );
    }
}

/// `[0] -> [2]: shm, cuda (zero-copy, GPU-3f2a0102…)`.
fn pairing_line(p: &Pairing) -> String {
    format!("[{}] -> [{}]: {}, {} ({})", p.publisher, p.subscription, path(p.transport), p.backend, p.explain())
}

/// The word for a path, in `topic info -v` and `topic echo` alike.
fn path(t: Transport) -> &'static str {
    match t {
        Transport::Intra => "intra",
        Transport::Shm => "shm",
        Transport::Network => "network",
    }
}

/// The comment `topic echo` prints before a message: where it came from, by
/// which path, and the memory its buffers arrived in.
fn echo_header(info: &MessageInfo, buffers: usize) -> String {
    let mut line = format!(
        "# from publisher {:016x}, sequence {}, via {}",
        info.publisher_id,
        info.sequence,
        path(info.transport)
    );
    if buffers == 0 {
        line.push_str(", no buffers");
    } else {
        line.push_str(&format!(", buffers in {}", info.backend));
    }
    line
}

fn print_endpoint(i: usize, e: &Endpoint) {
    let kind = if e.kind == EndpointKind::Publisher { "PUBLISHER" } else { "SUBSCRIPTION" };
    println!("[{i}] Node name: {}", shown(&e.node));
    println!("    Endpoint type: {kind}");
    println!("    Host: {}  Process id: {}", shown(&e.host), e.pid);
    match (e.over_network, e.freight) {
        (false, _) => println!("    Reached by: this host's shared memory"),
        (true, true) if e.spill => println!(
            "    Reached by: DDS, for the frames /dev/shm has no room for (the spill writer of the publisher of \
             process {}; its QoS asks more than /dev/shm holds)",
            e.pid
        ),
        (true, true) => println!("    Reached by: DDS (freight on another host)"),
        (true, false) => println!("    Reached by: DDS (a stock DDS / ROS 2 endpoint)"),
    }
    println!("    QoS: {:?}, {:?}", e.reliability, e.durability);
    if let Some(b) = e.backend {
        println!("    Buffers live in: {b}");
    }
    if let Some(a) = e.accepts {
        println!("    Accepted backends: {a}");
    }
    for (kind, tag) in e.devices.iter() {
        println!("    Device of {kind}: {} ({tag})", tag.short());
    }
    if let Some(w) = e.wait {
        println!("    Waits by: {w:?}");
    }
}

#[derive(Debug, Clone)]
enum Mode {
    Echo { limit: Option<u64>, format: YamlOptions },
    Hz,
    Bw,
}

/// Subscribes with the topic's type and runs `mode`: typed for a built-in
/// type, else as CDR from DDS decoded by the type's `.msg` files.
fn receive(topic: &str, args: &ReceiveArgs, mode: &Mode) -> Result<(), String> {
    let node = inspector(&args.domain)?;
    let graph = graph_of(&node, topic)?;
    let topic = graph.topic.name.as_str();
    macro_rules! dispatch {
        ($($t:ty),* $(,)?) => {
            match graph.topic.type_name.as_str() {
                $(name if name == <$t as Message>::TYPE_NAME => receive_as::<$t>(&node, topic, args, mode),)*
                other => receive_raw(&node, topic, other, args, mode),
            }
        };
    }
    // Every built-in message type, generated by `build.rs`.
    include!(concat!(env!("OUT_DIR"), "/built_ins.rs"))
}

fn receive_as<M: Message>(node: &Node, topic: &str, args: &ReceiveArgs, mode: &Mode) -> Result<(), String> {
    // Sensor-data QoS: never slows a publisher down, matches reliable ones too.
    let sub = node.create_subscription::<M>(topic, QoS::sensor_data()).map_err(|e| e.to_string())?;
    run_mode(topic, args, mode, |wait| sub.take(wait).map_err(|e| e.to_string()))
}

/// A topic of a type outside the built-in ones: read from DDS as CDR, with
/// the QoS typed topics get, and decoded by the type's `.msg` files for `echo`.
fn receive_raw(node: &Node, topic: &str, type_name: &str, args: &ReceiveArgs, mode: &Mode) -> Result<(), String> {
    let dirs = args.msg_paths.dirs();
    let (schema, messages) = Schema::from_share_dirs_with_messages(type_name, &dirs)
        .map_err(|e| format!("{topic} carries {type_name}, which is not a built-in type: {e}"))?;
    let ty = DynamicType::new(type_name, messages).map_err(|e| format!("{topic}: {e}"))?;
    let (tx, rx) = mpsc::sync_channel(RAW_QUEUE);
    let mut raw = RawTopics::new(node.context().domain_id());
    let qos = QoS::sensor_data().to_dds(node.context().limits().max_depth);
    // On a DDS thread, which must not wait for the printing.
    let on_cdr = Box::new(move |s: &ReceivedCdr| {
        let _ =
            tx.try_send(RawArrival { at: Instant::now(), cdr: s.bytes().to_vec(), publisher: s.publication_handle() });
    });
    // What DDS misses goes unsaid, as `ros2 topic echo` leaves it.
    let _missed = raw.subscribe(topic, &schema, &qos, on_cdr)?;
    run_mode(topic, args, mode, |wait| Ok(rx.recv_timeout(wait).ok().map(|raw| (raw, &ty))))
}

/// Messages of a raw topic waiting for the main thread; more are dropped,
/// as the best-effort QoS would drop them.
const RAW_QUEUE: usize = 64;

/// What `echo`, `hz` and `bw` need of a message.
trait Arrived {
    /// When it arrived (`hz`).
    fn at(&self) -> Instant;
    /// Bytes it occupies (`bw`).
    fn size(&self) -> usize;
    /// What `echo` prints: a comment line on where it came from, then the
    /// message as YAML.
    fn echo(&self, format: &YamlOptions) -> Result<String, String>;
}

impl<M: Message> Arrived for freight::Sample<M> {
    /// Taken as it arrived: the subscription's queue holds no time.
    fn at(&self) -> Instant {
        Instant::now()
    }

    fn size(&self) -> usize {
        message_bytes(&**self)
    }

    fn echo(&self, format: &YamlOptions) -> Result<String, String> {
        Ok(format!("{}\n{}", echo_header(self.info(), self.buffer_count()), self.to_yaml(format)))
    }
}

/// A message of a raw topic as its DDS reader's callback took it: when, its
/// CDR, and the DDS instance handle of its writer.
struct RawArrival {
    at: Instant,
    cdr: Vec<u8>,
    publisher: u64,
}

/// A raw message with the type that decodes it.
impl Arrived for (RawArrival, &DynamicType) {
    fn at(&self) -> Instant {
        self.0.at
    }

    fn size(&self) -> usize {
        self.0.cdr.len()
    }

    fn echo(&self, format: &YamlOptions) -> Result<String, String> {
        let (raw, ty) = self;
        let value = ty.decode(&raw.cdr).map_err(|e| format!("a message does not decode by its definition: {e}"))?;
        Ok(format!(
            "# from publisher {:016x}, via network, as CDR decoded by its .msg definition\n{}",
            raw.publisher,
            value.to_yaml(format)
        ))
    }
}

/// Runs `mode` on what `take` hands over (waiting at most its argument).
fn run_mode<A: Arrived>(
    topic: &str,
    args: &ReceiveArgs,
    mode: &Mode,
    mut take: impl FnMut(Duration) -> Result<Option<A>, String>,
) -> Result<(), String> {
    let deadline = args.duration.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let mut stats = Window::new(args.window.max(2));
    let mut last_report = Instant::now();
    let mut printed = 0u64;
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        let wait = deadline.map_or(Duration::from_millis(200), |d| (d - now).min(Duration::from_millis(200)));
        let arrived = match take(wait) {
            Ok(a) => a,
            // A malformed message is reported and skipped, as any subscriber would.
            Err(e) => {
                eprintln!("warning: {e}");
                continue;
            }
        };
        if let Some(a) = arrived {
            match mode {
                Mode::Echo { limit, format } => match a.echo(format) {
                    Ok(text) => {
                        println!("{text}---");
                        printed += 1;
                        if limit.is_some_and(|l| printed >= l) {
                            return Ok(());
                        }
                    }
                    Err(e) => eprintln!("warning: {topic}: {e}"),
                },
                Mode::Hz | Mode::Bw => stats.push(a.at(), a.size()),
            }
        }
        if !matches!(mode, Mode::Echo { .. }) && last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            report(&stats, mode);
        }
    }
    match mode {
        Mode::Echo { limit: Some(l), .. } if printed < *l => {
            Err(format!("received {printed} of {l} messages before the time ran out; is anyone publishing on {topic}?"))
        }
        Mode::Hz | Mode::Bw => {
            report(&stats, mode);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Bytes a message occupies: its small fields as CDR plus its buffers.
pub(crate) fn message_bytes<M: Message>(m: &M) -> usize {
    struct Sizes(usize);
    impl freight_msg::BufferEncoder for Sizes {
        fn write_buffer(
            &mut self,
            w: &mut freight_msg::CdrWriter,
            buf: &RawBuffer,
            _: freight_msg::ElementInfo,
        ) -> Result<(), freight_msg::EncodeError> {
            w.write_u32(0);
            self.0 += buf.len_bytes();
            Ok(())
        }
    }
    let mut sizes = Sizes(0);
    let mut w = freight_msg::CdrWriter::new();
    match m.write(&mut w, &mut sizes) {
        Ok(()) => w.len() + sizes.0,
        Err(_) => sizes.0,
    }
}

/// The last N arrivals.
struct Window {
    cap: usize,
    arrivals: std::collections::VecDeque<(Instant, usize)>,
}

impl Window {
    fn new(cap: usize) -> Self {
        Window { cap, arrivals: std::collections::VecDeque::with_capacity(cap) }
    }

    fn push(&mut self, at: Instant, bytes: usize) {
        if self.arrivals.len() == self.cap {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back((at, bytes));
    }

    fn gaps(&self) -> Vec<f64> {
        self.arrivals.iter().zip(self.arrivals.iter().skip(1)).map(|(a, b)| (b.0 - a.0).as_secs_f64()).collect()
    }
}

fn report(w: &Window, mode: &Mode) {
    let gaps = w.gaps();
    if gaps.is_empty() {
        println!("no new messages");
        return;
    }
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    match mode {
        Mode::Hz => {
            let min = gaps.iter().copied().fold(f64::INFINITY, f64::min);
            let max = gaps.iter().copied().fold(0.0, f64::max);
            let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
            println!("average rate: {:.3}", 1.0 / mean);
            println!("\tmin: {min:.3}s max: {max:.3}s std dev: {sd:.5}s window: {}", gaps.len() + 1);
        }
        Mode::Bw => {
            let sizes: Vec<usize> = w.arrivals.iter().map(|a| a.1).collect();
            let total: usize = sizes.iter().sum();
            let span = (w.arrivals.back().map(|a| a.0).unwrap_or_else(Instant::now)
                - w.arrivals.front().map(|a| a.0).unwrap_or_else(Instant::now))
            .as_secs_f64()
            .max(f64::EPSILON);
            let mean_size = total / sizes.len();
            let (min, max) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
            println!("{} from {} messages", per_second(total.saturating_sub(sizes[0]) as f64 / span), sizes.len());
            println!("\tMessage size mean: {} min: {} max: {}", bytes(mean_size), bytes(min), bytes(max));
        }
        Mode::Echo { .. } => {}
    }
}

fn bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.2} MB", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.2} KB", n as f64 / (1 << 10) as f64),
        n => format!("{n} B"),
    }
}

fn per_second(bytes_per_s: f64) -> String {
    format!("{}/s", bytes(bytes_per_s as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight::msgs::sensor_msgs::Image;

    #[test]
    fn names_from_peers_cannot_drive_the_terminal() {
        assert_eq!(shown("/camera/image"), "/camera/image");
        assert_eq!(shown("node\u{1b}[2J\n"), "node\\u{1b}[2J\\n");
    }

    #[test]
    fn message_size_counts_small_fields_and_buffers() {
        let img = Image { data: freight::Buffer::from(vec![0u8; 1000]), ..Default::default() };
        let small = Image::default().to_cdr().unwrap().len();
        assert_eq!(message_bytes(&img), small + 1000);
    }

    #[test]
    fn window_keeps_the_last_n() {
        let mut w = Window::new(3);
        let t = Instant::now();
        for i in 0..5u64 {
            w.push(t + Duration::from_millis(10 * i), 1);
        }
        assert_eq!(w.gaps().len(), 2);
        assert!(w.gaps().iter().all(|g| (*g - 0.01).abs() < 1e-6));
    }

    #[test]
    fn pairings_name_the_path_the_backend_and_the_device_rule() {
        use freight::graph::Copies;
        use freight::{BackendKind, DeviceTag};
        let pair = |transport, backend, copies, device, other_device| Pairing {
            publisher: 0,
            subscription: 2,
            transport,
            backend,
            copies,
            device,
            other_device,
        };
        let gpu = Some(DeviceTag([0x3f, 0x2a, 1, 2, 3, 4, 5, 6]));
        let cases = [
            (
                pair(Transport::Shm, BackendKind::Cuda, Copies::ZeroCopy, gpu, false),
                "[0] -> [2]: shm, cuda (zero-copy, GPU-3f2a0102\u{2026})",
            ),
            (
                pair(Transport::Shm, BackendKind::Shm, Copies::HostCopy, None, true),
                "[0] -> [2]: shm, shm (device\u{2192}host copy once per message; on another device)",
            ),
            (
                pair(Transport::Intra, BackendKind::Cpu, Copies::HostCopy, None, false),
                "[0] -> [2]: intra, cpu (device\u{2192}host copy once per message)",
            ),
            (
                pair(Transport::Shm, BackendKind::CudaHost, Copies::ZeroCopy, None, false),
                "[0] -> [2]: shm, cuda-host (zero-copy, mapped shm)",
            ),
            (
                pair(Transport::Network, BackendKind::Cpu, Copies::Serialized, None, false),
                "[0] -> [2]: network, cpu (serialized once per message)",
            ),
        ];
        for (p, line) in cases {
            assert_eq!(pairing_line(&p), line);
        }
    }

    #[test]
    fn echo_header_names_path_and_backend_in_the_words_of_topic_info() {
        use freight::BackendKind;
        let info = |transport, backend| MessageInfo {
            publisher_id: 0x2a,
            sequence: 7,
            publish_time_ns: 0,
            transport,
            backend,
        };
        let shm = info(Transport::Shm, BackendKind::Shm);
        assert_eq!(echo_header(&shm, 1), "# from publisher 000000000000002a, sequence 7, via shm, buffers in shm");
        let cuda = info(Transport::Intra, BackendKind::CudaHost);
        assert_eq!(
            echo_header(&cuda, 2),
            "# from publisher 000000000000002a, sequence 7, via intra, buffers in cuda-host"
        );
        // A message without buffer fields has no backend to name.
        let net = info(Transport::Network, BackendKind::Cpu);
        assert_eq!(echo_header(&net, 0), "# from publisher 000000000000002a, sequence 7, via network, no buffers");
    }

    #[test]
    fn sizes_are_printed_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(2048), "2.00 KB");
        assert_eq!(bytes(3 << 20), "3.00 MB");
    }
}
