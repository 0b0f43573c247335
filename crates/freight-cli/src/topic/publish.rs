//! `freight topic pub`: publishes generated messages of a built-in type, as
//! `ros2 topic pub` does, but aimed at large data: each message is written
//! straight into a loan (zero-copy to subscribers on this host). Given the
//! fields as YAML, it sends that message of any type instead, as
//! `ros2 topic pub /t std_msgs/msg/String "{data: hi}"` does: a built-in type
//! through a freight publisher, any other (a type of a ROS 2 install, or of a
//! user's package) as CDR over DDS, encoded by its `.msg` files.
//!
//! Message `k` (counted from 0) carries data byte `i` = `(k + i) % 251`, so a
//! receiver can check every byte it got; a `UInt8MultiArray` also carries `k`
//! in `layout.data_offset`, an `Image` the wall-clock time in `header.stamp`.
//!
//! Output (stdout, one line each, nothing else):
//!
//! ```text
//! waiting for 1 subscription(s) on /topic: 0 matched
//! published 0 1048576 bytes
//! published 1 1048576 bytes
//! ```
//!
//! Above [`SUMMARY_ABOVE_HZ`] one line per second, for the latest message, with
//! the count and rate since the previous line appended:
//! `published 241 1048576 bytes (100 messages in 1.00 s, 99.9 Hz)`. The last
//! message published always gets a line, so the last line names it.

use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use freight::msgs::builtin_interfaces::Time;
use freight::msgs::sensor_msgs::Image;
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{ContextError, CreateError, Loan, LoanError, Message, PublishError, Publisher, QoS};
use freight_bag::Schema;
use freight_msg::FieldValue;

use crate::dynamic::DynamicType;
use crate::raw::{self, RawTopics};
use crate::stop;

/// Above this rate (Hz) `published` lines come once per second, not per message.
pub const SUMMARY_ABOVE_HZ: f64 = 10.0;

/// Largest payload: the largest message a context takes by default.
const MAX_PAYLOAD: u64 = 4 << 30;

/// Default `UInt8MultiArray` payload.
const DEFAULT_SIZE: usize = 1 << 20;

/// Default `Image` size.
const DEFAULT_WIDTH: u32 = 640;
const DEFAULT_HEIGHT: u32 = 480;

/// How often waits look at the stop flag and the subscription count.
const POLL: Duration = Duration::from_millis(20);

/// The types `freight topic pub` can generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PubType {
    /// `std_msgs/msg/UInt8MultiArray`: `--size` bytes.
    UInt8MultiArray,
    /// `sensor_msgs/msg/Image`: `--width` x `--height` `bgra8` pixels.
    Image,
}

impl PubType {
    const ALL: [PubType; 2] = [PubType::UInt8MultiArray, PubType::Image];

    /// The ROS 2 type name.
    pub fn type_name(self) -> &'static str {
        match self {
            PubType::UInt8MultiArray => UInt8MultiArray::TYPE_NAME,
            PubType::Image => Image::TYPE_NAME,
        }
    }

    /// The generated type named `full` (`pkg/msg/Type`), if it is one.
    fn find(full: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.type_name() == full)
    }
}

/// `--qos` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QosArg {
    /// reliable, keep last 10 (ROS 2's default profile): a full subscription queue slows the
    /// publisher down by up to 100 ms per message.
    Default,
    /// best effort, keep last 5 (ROS 2's SensorDataQoS): never waits for a subscription.
    Sensor,
}

impl QosArg {
    fn qos(self) -> QoS {
        match self {
            QosArg::Default => QoS::default_profile(),
            QosArg::Sensor => QoS::sensor_data(),
        }
    }
}

/// Options of `freight topic pub`.
#[derive(Debug, Clone, Args)]
pub struct PubArgs {
    /// The topic.
    pub topic: String,
    /// The message type (pkg/Type works too): std_msgs/msg/UInt8MultiArray or
    /// sensor_msgs/msg/Image to generate, any type with VALUES.
    #[arg(value_name = "TYPE", value_parser = crate::ros_args::message_type)]
    pub type_name: String,
    /// The message's fields as YAML ("{data: hello}"), as `ros2 topic pub` takes them:
    /// this message is sent each time (copied, not generated); fields not named keep their
    /// defaults.
    #[arg(value_name = "VALUES")]
    pub values: Option<String>,
    /// UInt8MultiArray: bytes per message, as `freight bench` takes sizes (8B, 64KiB, 1MiB,
    /// 1MB) [default: 1MiB].
    #[arg(long, value_parser = parse_payload_size, value_name = "BYTES")]
    pub size: Option<usize>,
    /// Image: pixels per row [default: 640].
    #[arg(long, value_name = "W")]
    pub width: Option<u32>,
    /// Image: rows [default: 480].
    #[arg(long, value_name = "H")]
    pub height: Option<u32>,
    /// Messages per second.
    #[arg(long, default_value_t = 1.0, value_parser = crate::ros_args::rate, value_name = "HZ")]
    pub rate: f64,
    /// Publish this many messages and exit (default: run until Ctrl-C).
    #[arg(long, value_name = "N", conflicts_with = "once", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Publish one message and exit (--count 1).
    #[arg(long)]
    pub once: bool,
    /// Before the first message, wait until at least N subscriptions match (this host's and
    /// other hosts' together).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub wait_for_subscribers: usize,
    /// QoS of the publisher.
    #[arg(long, value_enum, default_value = "default")]
    pub qos: QosArg,
    /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "ID")]
    pub domain: Option<u32>,
    /// Seconds to let DDS discovery match subscriptions on other hosts and stock ROS 2 nodes
    /// before the first message; 0 starts at once (this host's freight subscriptions match
    /// at once).
    #[arg(long, default_value_t = 1.0, value_parser = parse_secs, value_name = "SECS")]
    pub spin_time: f64,
    /// Seconds to stay up after the last message (--count, --once). What reached a
    /// shared-memory subscription stays with it when the publisher goes; a message still on
    /// its way over DDS (a large one, to another host or a stock ROS 2 node) is lost then, as
    /// from a stock ROS 2 publisher, so this is the time it gets to arrive.
    #[arg(long, default_value_t = 1.0, value_parser = parse_secs, value_name = "SECS")]
    pub keep_alive: f64,
    #[command(flatten)]
    pub msg_paths: raw::MsgPaths,
}

/// What went wrong in `freight topic pub`. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PubError {
    /// Options that do not fit together or the type.
    #[error("{problem}; {fix}")]
    Args {
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: &'static str,
    },
    /// The context (domain, shared memory) could not be set up.
    #[error("cannot set up freight: {0}; check --domain / ROS_DOMAIN_ID and that /dev/shm is writable")]
    Context(#[from] ContextError),
    /// The publisher could not be created.
    #[error("cannot publish {type_name} on {topic}: {source}")]
    Create {
        /// The topic.
        topic: String,
        /// Its type.
        type_name: &'static str,
        /// Why.
        source: CreateError,
    },
    /// A type outside the built-in ones whose `.msg` files were not found (the
    /// error says where freight looked and what to set).
    #[error("not a built-in type, and {0}")]
    Definition(#[source] freight_bag::BagError),
    /// The DDS writer of a type outside the built-in ones could not be created.
    #[error("cannot publish {type_name} on {topic}: {why}")]
    CreateRaw {
        /// The topic.
        topic: String,
        /// Its type.
        type_name: String,
        /// Why.
        why: String,
    },
    /// No memory for a message.
    #[error("cannot lend {bytes} bytes for message {k}: {source}; try a smaller --size / --width / --height")]
    Loan {
        /// Payload bytes asked for.
        bytes: usize,
        /// The message.
        k: u64,
        /// Why.
        source: LoanError,
    },
    /// A message could not be published (other than a subscription missing it).
    #[error("publishing message {k} failed: {source}")]
    Publish {
        /// The message.
        k: u64,
        /// Why.
        source: PublishError,
    },
}

impl PubError {
    fn args(problem: impl Into<String>, fix: &'static str) -> Self {
        PubError::Args { problem: problem.into(), fix }
    }
}

/// What `freight topic pub` sends.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    /// Generated messages of this payload.
    Generated(Payload),
    /// The message these values set, of the type named.
    Values(FieldValue),
}

impl Plan {
    fn from_args(a: &PubArgs) -> Result<Self, PubError> {
        let Some(values) = &a.values else {
            let Some(generated) = PubType::find(&a.type_name) else {
                let known: Vec<&str> = PubType::ALL.iter().map(|t| t.type_name()).collect();
                return Err(PubError::args(
                    format!("{} needs VALUES, the fields to send; only {} are generated", a.type_name, known.join(", ")),
                    "give the fields as YAML after the type, as in: freight topic pub /chatter std_msgs/msg/String \"{data: hello}\"",
                ));
            };
            return Payload::from_args(a, generated).map(Plan::Generated);
        };
        if a.size.is_some() || a.width.is_some() || a.height.is_some() {
            return Err(PubError::args(
                "--size, --width and --height size generated data, and VALUES give the message as it is",
                "leave out VALUES to generate data, or the size options to send the values",
            ));
        }
        crate::values::parse(values)
            .map(Plan::Values)
            .map_err(|e| PubError::args(e, "write the fields as YAML, as in \"{data: hello}\""))
    }
}

/// The payload of every generated message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    Bytes(usize),
    Image { width: u32, height: u32 },
}

impl Payload {
    fn from_args(a: &PubArgs, generated: PubType) -> Result<Self, PubError> {
        match generated {
            PubType::UInt8MultiArray => {
                if a.width.is_some() || a.height.is_some() {
                    return Err(PubError::args(
                        "--width and --height apply to sensor_msgs/msg/Image only",
                        "give a UInt8MultiArray its size with --size",
                    ));
                }
                Ok(Payload::Bytes(a.size.unwrap_or(DEFAULT_SIZE)))
            }
            PubType::Image => {
                if a.size.is_some() {
                    return Err(PubError::args(
                        "--size applies to std_msgs/msg/UInt8MultiArray only",
                        "size an Image with --width and --height",
                    ));
                }
                let (width, height) = (a.width.unwrap_or(DEFAULT_WIDTH), a.height.unwrap_or(DEFAULT_HEIGHT));
                let bytes = u64::from(width) * u64::from(height) * 4;
                if width == 0 || height == 0 {
                    return Err(PubError::args(
                        format!("a {width}x{height} image is empty"),
                        "give --width and --height of at least 1",
                    ));
                }
                if width > u32::MAX / 4 || bytes > MAX_PAYLOAD {
                    return Err(PubError::args(
                        format!("a {width}x{height} bgra8 image is {bytes} bytes"),
                        "keep --width below 2^30 and width x height x 4 at most 4 GiB",
                    ));
                }
                Ok(Payload::Image { width, height })
            }
        }
    }

    /// Bytes of the one buffer.
    fn len(self) -> usize {
        match self {
            Payload::Bytes(n) => n,
            // Checked to be at most 4 GiB in `from_args`.
            Payload::Image { width, height } => width as usize * height as usize * 4,
        }
    }
}

/// Data byte `i` of message `k`.
pub fn pattern(k: u64, i: usize) -> u8 {
    ((k % 251 + (i % 251) as u64) % 251) as u8
}

/// [`pattern`] of message `k` as a `write_from_fn` writer: byte after byte it
/// counts instead of dividing (a 4K frame in less than half the time); an
/// index out of sequence is computed afresh.
fn pattern_writer(k: u64) -> impl FnMut(usize) -> u8 {
    let (mut at, mut value) = (0usize, pattern(k, 0));
    move |i| {
        if i != at {
            (at, value) = (i, pattern(k, i));
        }
        let byte = value;
        at = i.wrapping_add(1);
        value = if value == 250 { 0 } else { value + 1 };
        byte
    }
}

/// Runs `freight topic pub`.
pub fn run(args: &PubArgs) -> Result<(), PubError> {
    let job = Job { count: if args.once { Some(1) } else { args.count }, args };
    let payload = match Plan::from_args(args)? {
        Plan::Generated(payload) => payload,
        Plan::Values(values) => return send_values(&job, &values),
    };
    let node = start(args)?;
    match payload {
        Payload::Bytes(_) => job.generate(&create::<UInt8MultiArray>(&node, args)?, payload.len(), |m, k| {
            // Wraps after 2^32 messages.
            m.layout.data_offset = k as u32;
        }),
        Payload::Image { width, height } => job.generate(&create::<Image>(&node, args)?, payload.len(), |m, _| {
            m.header.stamp = Time::now();
            m.header.frame_id = "freight".into();
            m.width = width;
            m.height = height;
            m.encoding = "bgra8".into();
            m.step = width * 4;
        }),
    }
}

/// Sends the message `values` set, of the type the job names.
fn send_values(job: &Job<'_>, values: &FieldValue) -> Result<(), PubError> {
    let type_name = job.args.type_name.as_str();
    macro_rules! dispatch {
        ($($t:ty),* $(,)?) => {
            match type_name {
                $(name if name == <$t as Message>::TYPE_NAME => job.send_values::<$t>(values),)*
                _ => job.send_raw(values),
            }
        };
    }
    // Every built-in message type, generated by `build.rs`.
    include!(concat!(env!("OUT_DIR"), "/built_ins.rs"))
}

/// Ctrl-C handling, the context and the node.
fn start(args: &PubArgs) -> Result<freight::Node, PubError> {
    stop::install();
    let ctx = crate::ros_args::context(args.domain)?;
    Ok(ctx.create_node(&format!("freight_topic_pub_{}", std::process::id()))?)
}

fn create<M: Message>(node: &freight::Node, args: &PubArgs) -> Result<Publisher<M>, PubError> {
    node.create_publisher::<M>(&args.topic, args.qos.qos()).map_err(|source| PubError::Create {
        topic: args.topic.clone(),
        type_name: M::TYPE_NAME,
        source,
    })
}

struct Job<'a> {
    count: Option<u64>,
    args: &'a PubArgs,
}

/// What a job publishes through: what it waits for and names.
trait Outlet {
    fn topic_name(&self) -> &str;
    /// Subscriptions matched, on this host and over the network.
    fn matched(&self) -> usize;
}

impl<M: Message> Outlet for Publisher<M> {
    fn topic_name(&self) -> &str {
        Publisher::topic_name(self)
    }

    fn matched(&self) -> usize {
        self.subscription_count() + self.network_subscription_count()
    }
}

/// A DDS writer of a type outside the built-in ones, on a participant of its own.
struct RawOutlet {
    writer: freight_dds::Writer,
    topic: String,
    /// Holds the writer's participant; dropped after the writer.
    _topics: RawTopics,
}

impl Outlet for RawOutlet {
    fn topic_name(&self) -> &str {
        &self.topic
    }

    fn matched(&self) -> usize {
        self.writer.matched_readers().map_or(0, |r| r.len())
    }
}

impl Job<'_> {
    /// Publishes generated messages of `len` data bytes: each written into a
    /// loan with the data pattern, `fill` setting the small fields of message `k`.
    fn generate<M: Message>(
        &self,
        publisher: &Publisher<M>,
        len: usize,
        fill: impl Fn(&mut Loan<M>, u64),
    ) -> Result<(), PubError> {
        self.run(publisher, len, |k| {
            let mut loan = publisher
                .loan(len)
                .map_err(|source| PubError::Loan { bytes: len, k, source })?
                .write_from_fn(pattern_writer(k));
            fill(&mut loan, k);
            Ok(publisher.publish(loan))
        })
    }

    /// Publishes the message `values` set, the same one each time. The values
    /// are checked before anything starts.
    fn send_values<M: Message>(&self, values: &FieldValue) -> Result<(), PubError> {
        let mut message = M::default();
        message.set_from(values).map_err(|e| {
            PubError::args(format!("the values do not fit {}: {e}", M::TYPE_NAME), "write the fields the type has")
        })?;
        let node = start(self.args)?;
        let publisher = create::<M>(&node, self.args)?;
        self.run(&publisher, crate::topic::message_bytes(&message), |_| Ok(publisher.publish_copy(&message)))
    }

    /// Publishes the message `values` set, of a type outside the built-in
    /// ones, over DDS: encoded by the type's `.msg` files, checked before
    /// anything starts. Only DDS reaches it (freight subscriptions of such a
    /// type are programs' own, and take it from DDS too).
    fn send_raw(&self, values: &FieldValue) -> Result<(), PubError> {
        let a = self.args;
        let (schema, messages) =
            Schema::from_share_dirs_with_messages(&a.type_name, &a.msg_paths.dirs()).map_err(PubError::Definition)?;
        let ty = DynamicType::new(&a.type_name, messages)
            .map_err(|e| PubError::args(e.to_string(), "add the .msg files of the types it uses"))?;
        let cdr = ty.encode(values).map_err(|e| {
            PubError::args(format!("the values do not fit {}: {e}", a.type_name), "write the fields the type has")
        })?;
        let node = start(a)?;
        let topic =
            node.resolve_topic_name(&a.topic).map_err(|e| PubError::args(e.to_string(), "name a valid topic"))?;
        let raw_err = |why| PubError::CreateRaw { topic: topic.clone(), type_name: a.type_name.clone(), why };
        let mut topics = RawTopics::new(node.context().domain_id());
        let writer = topics
            .writer(&topic, &schema.type_name, &a.qos.qos().to_dds(node.context().limits().max_depth))
            .map_err(raw_err)?;
        let outlet = RawOutlet { writer, topic: topic.clone(), _topics: topics };
        self.run(&outlet, cdr.len(), |_| Ok(outlet.writer.write_cdr(&cdr).map_err(PublishError::Network)))
    }

    /// Publishes until `count` or a signal; `send` publishes message `k`.
    fn run(
        &self,
        publisher: &impl Outlet,
        bytes: usize,
        mut send: impl FnMut(u64) -> Result<Result<(), PublishError>, PubError>,
    ) -> Result<(), PubError> {
        if !stop::sleep(Duration::from_secs_f64(self.args.spin_time)) || !self.wait_for_subscribers(publisher) {
            return Ok(());
        }
        let period = Duration::from_secs_f64(1.0 / self.args.rate);
        let mut progress = Progress::new(self.args.rate, bytes);
        let mut next = Instant::now();
        let mut k = 0u64;
        while !stop::requested() {
            match send(k)? {
                Ok(()) => {}
                // Delivered to everyone else; the next message may reach them.
                Err(e @ (PublishError::QueueFull { .. } | PublishError::Network(_))) => {
                    eprintln!("warning: message {k}: {e}")
                }
                Err(source) => return Err(PubError::Publish { k, source }),
            }
            progress.published(k);
            k += 1;
            if self.count.is_some_and(|c| k >= c) {
                break;
            }
            next += period;
            let now = Instant::now();
            if next + period < now {
                // More than a period behind (a slow publish): carry on from now, no burst.
                next = now;
            }
            stop::sleep(next.saturating_duration_since(now));
        }
        progress.finish();
        if k > 0 {
            stop::sleep(Duration::from_secs_f64(self.args.keep_alive));
        }
        Ok(())
    }

    /// Waits for `--wait-for-subscribers`; false when a signal came first.
    fn wait_for_subscribers(&self, publisher: &impl Outlet) -> bool {
        let want = self.args.wait_for_subscribers;
        let mut shown = None;
        loop {
            let matched = publisher.matched();
            if matched >= want {
                return true;
            }
            if shown != Some(matched) {
                say(format_args!(
                    "waiting for {want} subscription(s) on {}: {matched} matched",
                    publisher.topic_name()
                ));
                shown = Some(matched);
            }
            if !stop::sleep(POLL) {
                return false;
            }
        }
    }
}

/// Prints a line on stdout; when stdout is gone (`| head`), stops the command
/// instead of panicking.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        stop::request();
    }
}

/// The `published` lines.
struct Progress {
    bytes: usize,
    per_message: bool,
    last: Option<u64>,
    printed: Option<u64>,
    since: Instant,
    since_count: u64,
}

impl Progress {
    fn new(rate: f64, bytes: usize) -> Self {
        Progress {
            bytes,
            per_message: rate <= SUMMARY_ABOVE_HZ,
            last: None,
            printed: None,
            since: Instant::now(),
            since_count: 0,
        }
    }

    fn published(&mut self, k: u64) {
        self.last = Some(k);
        self.since_count += 1;
        if self.per_message {
            self.print(k, false);
        } else if self.since.elapsed() >= Duration::from_secs(1) {
            self.print(k, true);
        }
    }

    /// The line for the last message, if it has none yet.
    fn finish(&mut self) {
        if let Some(k) = self.last.filter(|&k| self.printed != Some(k)) {
            self.print(k, true);
        }
    }

    fn print(&mut self, k: u64, summary: bool) {
        let bytes = self.bytes;
        if summary {
            let secs = self.since.elapsed().as_secs_f64();
            let hz = self.since_count as f64 / secs.max(f64::EPSILON);
            say(format_args!("published {k} {bytes} bytes ({} messages in {secs:.2} s, {hz:.1} Hz)", self.since_count));
        } else {
            say(format_args!("published {k} {bytes} bytes"));
        }
        self.printed = Some(k);
        self.since = Instant::now();
        self.since_count = 0;
    }
}

/// `--size`: the syntax of `freight bench --sizes` (1 byte to 4 GiB).
fn parse_payload_size(text: &str) -> Result<usize, String> {
    let bytes = crate::bench::parse_size(text)?;
    usize::try_from(bytes).map_err(|_| format!("`{text}` does not fit in memory on this machine"))
}

fn parse_secs(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!("`{text}` is not a number of seconds; write e.g. 0, 0.5 or 2 (at most 3600)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: PubArgs,
    }

    fn parse(argv: &[&str]) -> Result<PubArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("pub").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_are_a_one_mebibyte_array_once_a_second_reliably() {
        let a = parse(&["/t", "std_msgs/msg/UInt8MultiArray"]).unwrap();
        assert_eq!(Plan::from_args(&a).unwrap(), Plan::Generated(Payload::Bytes(1 << 20)));
        assert_eq!((a.rate, a.count, a.wait_for_subscribers, a.spin_time, a.keep_alive), (1.0, None, 0, 1.0, 1.0));
        assert_eq!(a.qos.qos(), QoS::keep_last(10));
        let a = parse(&["/t", "sensor_msgs/msg/Image", "--qos", "sensor"]).unwrap();
        let image = Payload::Image { width: 640, height: 480 };
        assert_eq!(Plan::from_args(&a).unwrap(), Plan::Generated(image));
        assert_eq!(image.len(), 640 * 480 * 4);
        assert_eq!(a.qos.qos(), QoS::sensor_data());
    }

    #[test]
    fn a_type_that_is_not_generated_needs_values() {
        assert_eq!(parse(&["/t", "sensor_msgs/Image"]).unwrap().type_name, "sensor_msgs/msg/Image");
        let a = parse(&["/t", "std_msgs/msg/String"]).unwrap();
        let err = Plan::from_args(&a).unwrap_err().to_string();
        assert!(err.contains("needs VALUES") && err.contains("std_msgs/msg/UInt8MultiArray, sensor_msgs/msg/Image"));
    }

    #[test]
    fn values_give_the_message_of_any_type_and_exclude_the_size_options() {
        let a = parse(&["/t", "std_msgs/String", "{data: hello}"]).unwrap();
        let expected = FieldValue::Map(vec![("data".into(), FieldValue::Str("hello".into()))]);
        assert_eq!(Plan::from_args(&a).unwrap(), Plan::Values(expected));
        let a = parse(&["/t", "std_msgs/msg/UInt8MultiArray", "{data: [1, 2]}", "--size", "1MiB"]).unwrap();
        assert!(Plan::from_args(&a).unwrap_err().to_string().contains("--size, --width and --height size generated"));
        let a = parse(&["/t", "std_msgs/msg/String", "{data: [hello"]).unwrap();
        assert!(Plan::from_args(&a).unwrap_err().to_string().contains("not YAML"));
    }

    /// A type outside the built-in ones whose `.msg` files are nowhere is
    /// refused before anything starts, saying where freight looked and what to
    /// set; so are values that do not fit a type it found.
    #[test]
    fn a_type_outside_the_built_in_ones_needs_its_msg_files_and_fitting_values() {
        let share = freight_testkit::PrivateDir::new("pub-msg-path");
        let err = run(&parse(&["/t", "nowhere_msgs/msg/Nope", "{}", "--msg-path", "/nonexistent"]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("not a built-in type, and nowhere_msgs/msg/Nope: no message definition"), "{err}");
        assert!(err.contains("/nonexistent"), "{err}");
        assert!(err.contains("--msg-path"), "{err}");
        let dir = share.path().join("mine_msgs/msg");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Tick.msg"), "uint8 count\n").unwrap();
        let msg_path = share.path().to_str().unwrap();
        let err = run(&parse(&["/t", "mine_msgs/msg/Tick", "{count: 300}", "--msg-path", msg_path]).unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the values do not fit mine_msgs/msg/Tick: field count: 300 does not fit a uint8; write the fields the type has"
        );
    }

    #[test]
    fn sizes_use_the_bench_syntax() {
        let a = parse(&["/t", "std_msgs/UInt8MultiArray", "--size", "64KiB"]).unwrap();
        assert_eq!(Plan::from_args(&a).unwrap(), Plan::Generated(Payload::Bytes(64 << 10)));
        assert_eq!(parse_payload_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_payload_size(" 8 mib "), Ok(8 << 20));
        for bad in ["", "0", "1.5MiB", "12XB", "5GiB"] {
            assert!(parse_payload_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_of_the_other_type_are_refused() {
        let a = parse(&["/t", "sensor_msgs/msg/Image", "--size", "1MiB"]).unwrap();
        assert!(Plan::from_args(&a).unwrap_err().to_string().contains("--size applies to"));
        let a = parse(&["/t", "std_msgs/msg/UInt8MultiArray", "--width", "8"]).unwrap();
        assert!(Plan::from_args(&a).unwrap_err().to_string().contains("--width and --height apply to"));
        let a = parse(&["/t", "sensor_msgs/msg/Image", "--width", "0"]).unwrap();
        assert!(Plan::from_args(&a).is_err());
        let a = parse(&["/t", "sensor_msgs/msg/Image", "--width", "65536", "--height", "65536"]).unwrap();
        assert!(Plan::from_args(&a).unwrap_err().to_string().contains("at most 4 GiB"));
    }

    #[test]
    fn bad_arguments_are_rejected_by_the_parser() {
        for argv in [
            &["/t", "String"][..],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--rate", "0"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--rate", "fast"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--count", "-1"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--count", "0"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--count", "2", "--once"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--qos", "fancy"],
            &["/t", "std_msgs/msg/UInt8MultiArray", "--spin-time", "-1"],
            &["/t"],
        ] {
            assert!(parse(argv).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn pattern_shifts_by_one_per_message_with_period_251() {
        assert_eq!(pattern(0, 0), 0);
        assert_eq!(pattern(0, 250), 250);
        assert_eq!(pattern(0, 251), 0);
        assert_eq!(pattern(3, 249), 1);
        assert_eq!(pattern(u64::MAX - 10, 5), ((u64::MAX - 5) % 251) as u8);
    }

    #[test]
    fn pattern_writer_agrees_with_pattern_in_and_out_of_order() {
        for k in [0, 1, 250, 251, 1000, u64::MAX] {
            let mut w = pattern_writer(k);
            for i in (0..2000).chain([5000, 5001, 7, 8, 251 * 9]) {
                assert_eq!(w(i), pattern(k, i), "k {k} i {i}");
            }
        }
    }
}
