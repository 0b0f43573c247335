//! `freight bag record`: subscribes to topics and writes what arrives into a
//! bag, with the publishers' QoS.
//!
//! Three parts, one thread each where it matters:
//! - the **receiver** (this thread) finds the topics, subscribes to each
//!   with the QoS its publishers offer, and turns each message into CDR;
//! - the **cache**, a queue bounded in bytes (`--max-cache-size`) between
//!   receiver and writer: when it is full the receiver waits, so the
//!   subscriptions' queues fill and the QoS decides (a reliable keep-all
//!   publisher waits, every other one's messages are missed and counted);
//! - the **writer** thread, which writes the cache to the bag.
//!
//! Losses are counted from each publisher's sequence numbers, not guessed: a
//! gap between two messages of one publisher is that many messages lost.

use std::collections::{HashMap, VecDeque};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use freight::clock::monotonic_ns;
use freight::{Durability, Executor, History, Node, QoS, Reliability, Transport};
use freight_bag::{Compression, OfferedQos, Record, Schema, TopicId, Writer, WriterOptions};
use freight_dds::ReceivedCdr;

use crate::raw::{self, RawTopics};
use crate::resources;
use crate::stop;
use crate::subscribe::{realtime_ns, subscribe, Received};

/// How often the receiver looks for new topics.
const DISCOVERY_PERIOD: Duration = Duration::from_millis(500);

/// How often the writer ends its chunk and hands it to the system.
const FLUSH_PERIOD: Duration = Duration::from_secs(1);

/// Most spare buffers the cache keeps for reuse.
const MAX_SPARE: usize = 8;

/// How long the recorder goes on taking what is queued once it is told to stop.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How often the status line is refreshed (on a terminal; else every 5 s).
const STATUS_PERIOD: Duration = Duration::from_secs(1);

pub const RECORD_ABOUT: &str = "\
Record topics into a bag: a new directory with metadata.yaml and NAME_0.mcap, NAME_1.mcap, ...
(MCAP, profile ros2, rosbag2's format version 8) that `ros2 bag`, rosbags, the mcap tools and
Foxglove read.

Each topic is subscribed with the QoS its publishers offer (reliable only if all are, transient
local only if all are), keeping all messages the queue allows, and its QoS is written into the
bag. Topics named that do not exist yet are picked up when they appear, as are new topics with
--all.

Types outside freight's built-in ones (a stock node's /rosout, nav_msgs/msg/Odometry, your own
package) are read from DDS as the CDR they travel as, and their definitions from a ROS 2
install's .msg files: DIR/<package>/msg/<Type>.msg in each --msg-path DIR, then in the share
directory of each prefix of AMENT_PREFIX_PATH. A topic whose definition is not found is not
recorded, with a warning that says where freight looked.

Copies per byte, none of them by the kernel: one for messages of 1 MiB and more (camera frames,
point clouds): from the subscriber's sample (shared memory) into the CDR the bag holds, which goes
to the disk from where it is, with O_DIRECT past the page cache (each such message starts a chunk,
after a padding record that places it at its memory's alignment). Two for smaller messages: into
the CDR, then into the file's block buffer. Where the file system refuses O_DIRECT, and with
--no-direct-io, every message takes the two and the kernel copies once more, into the page cache.
With --compression zstd or lz4, the compressor reads the CDR and fills the block buffer.

Never silent: a status line shows per topic the messages, rate, MB/s and messages lost; losses
are counted from each publisher's sequence numbers, and for messages that reached freight over
DDS (which have none) from what DDS knows its reader missed: messages of a best-effort topic
that found the reader's queue full (a datagram the kernel dropped stays unseen). When the disk
is slower than the publishers, the cache (--max-cache-size) fills, then the subscriptions'
queues: a reliable keep-all publisher waits for room (its QoS), every other publisher's
messages are missed and counted. The summary at the end lists them, and the exit status is 2 if
any message was lost.

metadata.yaml is written at the start and rewritten atomically at every split and at the end;
Ctrl-C and SIGTERM finish the files cleanly. After a crash, `freight bag reindex DIR` recovers
every complete chunk.";

/// Chunk compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    /// None: frames go to the file as they are.
    None,
    /// zstd (level 1, as rosbag2's zstd_fast preset).
    Zstd,
    /// lz4.
    Lz4,
}

/// `freight bag record` arguments.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// Topics to record (names as `ros2 bag record` takes them).
    pub topics: Vec<String>,
    /// Record every topic, including those that appear while recording.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// The bag directory to create; it must not exist (default: rosbag2_YYYY_MM_DD-HH_MM_SS).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Start a new file when the current one reaches this many bytes.
    #[arg(short = 'b', long, value_name = "BYTES")]
    pub max_bag_size: Option<u64>,
    /// Start a new file when the current one spans this many seconds.
    #[arg(short = 'd', long, value_name = "SECS")]
    pub max_bag_duration: Option<f64>,
    /// Chunk compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Write through the page cache instead of with O_DIRECT (for a bag read again right away).
    #[arg(long)]
    pub no_direct_io: bool,
    /// Most bytes of messages received but not yet written.
    #[arg(long, value_name = "BYTES", default_value_t = 512 << 20)]
    pub max_cache_size: u64,
    /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "ID")]
    pub domain: Option<u32>,
    #[command(flatten)]
    pub msg_paths: raw::MsgPaths,
}

/// One message on its way to the writer.
struct Cached {
    topic: TopicId,
    data: Vec<u8>,
    log_time_ns: u64,
    publish_time_ns: u64,
    sequence: u32,
}

/// The queue between receiver and writer, bounded in bytes.
struct Cache {
    state: Mutex<CacheState>,
    changed: Condvar,
    max_bytes: u64,
    /// When the first message came: the start of the recording's write rate.
    first: std::sync::OnceLock<Instant>,
}

struct CacheState {
    queue: VecDeque<Cached>,
    bytes: u64,
    /// Buffers the writer is done with, for the receiver's next messages:
    /// a 33 MB frame encoded into a fresh allocation would first fault in
    /// every page of it.
    spare: Vec<Vec<u8>>,
    /// No more messages will come.
    closed: bool,
    /// The writer failed; the receiver stops.
    failed: Option<String>,
    /// Messages refused after the writer failed.
    refused: u64,
}

impl Cache {
    fn new(max_bytes: u64) -> Self {
        Cache {
            state: Mutex::new(CacheState {
                queue: VecDeque::new(),
                bytes: 0,
                spare: Vec::new(),
                closed: false,
                failed: None,
                refused: 0,
            }),
            changed: Condvar::new(),
            max_bytes: max_bytes.max(1),
            first: std::sync::OnceLock::new(),
        }
    }

    /// Queues `m`, waiting while the cache is full (a message larger than the
    /// whole cache goes in when the cache is empty). False if the writer failed.
    fn push(&self, m: Cached) -> bool {
        let len = m.data.len() as u64;
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.failed.is_none() && !s.queue.is_empty() && s.bytes + len > self.max_bytes {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.failed.is_some() {
            s.refused += 1;
            return false;
        }
        self.first.get_or_init(Instant::now);
        s.bytes += len;
        s.queue.push_back(m);
        self.changed.notify_all();
        true
    }

    /// The next message, waiting at most `timeout`: `Err(true)` once closed
    /// and empty, `Err(false)` when the time ran out.
    fn pop(&self, timeout: Duration) -> Result<Cached, bool> {
        let deadline = Instant::now() + timeout;
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(m) = s.queue.pop_front() {
                s.bytes -= m.data.len() as u64;
                self.changed.notify_all();
                return Ok(m);
            }
            if s.closed {
                return Err(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(false);
            }
            s = self.changed.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// A buffer for the next message (empty; its capacity reused when one is spare).
    fn buffer(&self) -> Vec<u8> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).spare.pop().unwrap_or_default()
    }

    /// Takes back a written message's buffer, keeping as many spare as fit in
    /// the cache's bound.
    fn recycle(&self, mut buf: Vec<u8>) {
        buf.clear();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let held: u64 = s.spare.iter().map(|b| b.capacity() as u64).sum();
        if s.bytes + held + buf.capacity() as u64 <= self.max_bytes && s.spare.len() < MAX_SPARE {
            s.spare.push(buf);
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.changed.notify_all();
    }

    fn fail(&self, why: String) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).failed = Some(why);
        self.changed.notify_all();
    }

    /// Messages that were received but never written: left in the queue or
    /// refused after the writer failed.
    fn unwritten(&self) -> u64 {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.queue.len() as u64 + s.refused
    }

    fn failure(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).failed.clone()
    }
}

/// Counters of one topic, shared by its callback and the status line.
#[derive(Debug, Default)]
struct TopicStats {
    messages: u64,
    bytes: u64,
    lost: u64,
    /// Last sequence number seen per publisher.
    last_sequence: HashMap<u64, u64>,
}

impl TopicStats {
    fn count(&mut self, publisher: u64, sequence: u64, transport: Transport, bytes: usize) {
        self.messages += 1;
        self.bytes += bytes as u64;
        // DDS does not report sequence numbers: those messages count, gaps cannot.
        if transport == Transport::Network {
            return;
        }
        if let Some(last) = self.last_sequence.insert(publisher, sequence) {
            self.lost += sequence.saturating_sub(last).saturating_sub(1);
        }
    }
}

struct Topic {
    name: String,
    stats: Arc<Mutex<TopicStats>>,
    /// False for a topic seen but not recorded (no definition of its type).
    subscribed: bool,
    /// Subscribed through the executor (a built-in type), not raw from DDS.
    typed: bool,
    /// Messages DDS knows the topic's reader missed (0 where they would not
    /// be losses: see `discover`).
    missed: Box<dyn Fn() -> u64>,
}

impl Topic {
    /// Messages lost: gaps in the publishers' sequence numbers, and what DDS missed.
    fn lost(&self, stats: &TopicStats) -> u64 {
        stats.lost + (self.missed)()
    }
}

/// Runs `freight bag record`; the exit status is 2 when messages were lost.
pub fn run(args: &RecordArgs) -> Result<ExitCode, String> {
    if args.topics.is_empty() && !args.all {
        return Err("name the topics to record, or --all".into());
    }
    stop::install();
    let output = args.output.clone().unwrap_or_else(default_name);
    let options = WriterOptions {
        compression: match args.compression {
            CompressionArg::None => Compression::None,
            CompressionArg::Zstd => Compression::Zstd,
            CompressionArg::Lz4 => Compression::Lz4,
        },
        max_file_size: args.max_bag_size,
        max_file_duration: args.max_bag_duration.map(|s| Duration::from_secs_f64(s.max(0.0))),
        direct_io: !args.no_direct_io,
        ..WriterOptions::default()
    };
    let writer = Arc::new(Mutex::new(Writer::create(&output, options).map_err(|e| e.to_string())?));
    let cache = Arc::new(Cache::new(args.max_cache_size));
    let writing = {
        let (writer, cache) = (writer.clone(), cache.clone());
        thread::Builder::new()
            .name("freight-bag-writer".into())
            .spawn(move || write_loop(&writer, &cache))
            .map_err(|e| format!("starting the writer thread: {e}"))?
    };
    eprintln!("recording into {} (Ctrl-C to stop)", output.display());
    let received = receive(args, &writer, &cache);
    cache.close();
    let _ = writing.join();
    let writer = Arc::try_unwrap(writer)
        .map_err(|_| "the writer is still shared".to_string())?
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let passed_through = writer.passed_through();
    let finished = writer.finish();
    let (topics, memory) = received?;
    if let Some(why) = cache.failure() {
        // The write that failed comes first: finishing on a full disk fails too.
        let mut text = format!("{why}; the recording stopped there");
        if let Err(e) = &finished {
            text.push_str(&format!("; finishing the bag failed too: {e}"));
        }
        text.push_str(&format!(
            "; {} messages received were not written. What was written stays readable: `freight bag reindex {}` \
             recovers the file that could not be finished",
            cache.unwritten(),
            output.display()
        ));
        return Err(text);
    }
    let metadata = finished.map_err(|e| e.to_string())?;
    let written = cache.first.get().map(Instant::elapsed);
    Ok(summary(&topics, &metadata, &output, written, passed_through, &memory))
}

/// Writes what the cache holds until it is closed and empty, ending a chunk
/// and handing it to the system every [`FLUSH_PERIOD`] so that a killed
/// recorder loses at most that much.
fn write_loop(writer: &Mutex<Writer>, cache: &Cache) {
    let mut last_flush = Instant::now();
    let mut unflushed = false;
    loop {
        let result = match cache.pop(FLUSH_PERIOD) {
            Ok(m) => {
                let record = Record {
                    data: &m.data,
                    log_time_ns: m.log_time_ns,
                    publish_time_ns: m.publish_time_ns,
                    sequence: m.sequence,
                };
                // Held for this write only: the flush below and the status
                // line take the lock too.
                let written = writer.lock().unwrap_or_else(|p| p.into_inner()).write(m.topic, &record);
                cache.recycle(m.data);
                unflushed = true;
                written
            }
            Err(true) => return,
            Err(false) => Ok(()),
        };
        if let Err(e) = result {
            cache.fail(e.to_string());
            return;
        }
        if unflushed && last_flush.elapsed() >= FLUSH_PERIOD {
            last_flush = Instant::now();
            unflushed = false;
            if let Err(e) = writer.lock().unwrap_or_else(|p| p.into_inner()).flush() {
                cache.fail(e.to_string());
                return;
            }
        }
    }
}

/// Subscribes and receives until the time is up, a signal comes or the writer fails.
fn receive(
    args: &RecordArgs,
    writer: &Arc<Mutex<Writer>>,
    cache: &Arc<Cache>,
) -> Result<(Vec<Topic>, MemoryPeak), String> {
    let ctx = crate::ros_args::context(args.domain).map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("freight_bag_record_{}", std::process::id())).map_err(|e| e.to_string())?;
    let wanted: Vec<String> =
        args.topics.iter().map(|t| node.resolve_topic_name(t).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let mut exec = Executor::new();
    exec.on_take_error(|e| eprintln!("warning: a message could not be taken and was not recorded: {e}"));
    let mut topics: Vec<Topic> = Vec::new();
    let mut into = Targets {
        writer: writer.clone(),
        cache: cache.clone(),
        raw: RawTopics::new(node.context().domain_id()),
        share_dirs: args.msg_paths.dirs(),
    };
    let start = Instant::now();
    let deadline = args.duration.map(|s| start + Duration::from_secs_f64(s.max(0.0)));
    let mut next_discovery = start;
    let mut status = Status::new();
    let mut memory = MemoryPeak::default();
    loop {
        let now = Instant::now();
        if stop::requested() || deadline.is_some_and(|d| now >= d) || cache.failure().is_some() {
            break;
        }
        if now >= next_discovery {
            next_discovery = now + DISCOVERY_PERIOD;
            discover(&node, &wanted, args.all, &mut exec, &mut topics, &mut into)?;
        }
        let wait = deadline.map_or(Duration::from_millis(100), |d| (d - now).min(Duration::from_millis(100)));
        // An executor without subscriptions cannot wait; raw topics take
        // their messages on DDS threads.
        if topics.iter().any(|t| t.typed) {
            exec.spin_once(wait).map_err(|e| e.to_string())?;
        } else {
            stop::sleep(wait);
        }
        status.maybe_print(&topics, writer);
        memory.maybe_sample();
    }
    if cache.failure().is_none() {
        if topics.iter().any(|t| t.typed) {
            drain(&mut exec, DRAIN_LIMIT).map_err(|e| e.to_string())?;
        }
        into.raw.drain();
    }
    status.clear();
    Ok((topics, memory))
}

/// Takes what the subscriptions still hold when the recording stops. A turn
/// of the executor takes every message of the subscriptions that were ready
/// when it began; one that became ready during the turn (its messages
/// arriving while another topic's callback waited for room in the cache)
/// waits for the next turn, and without this one its messages would be
/// neither written nor counted as lost. Turns until one takes nothing, for at
/// most `limit`, so that publishers that keep sending do not hold the
/// recorder. Returns the messages taken.
fn drain(exec: &mut Executor, limit: Duration) -> Result<usize, freight::WaitError> {
    let end = Instant::now() + limit;
    let mut taken = 0;
    while Instant::now() < end {
        match exec.spin_once(Duration::ZERO)? {
            0 => break,
            n => taken += n,
        }
    }
    Ok(taken)
}

/// Subscribes to the wanted topics that exist and are not recorded yet.
fn discover(
    node: &Node,
    wanted: &[String],
    all: bool,
    exec: &mut Executor,
    topics: &mut Vec<Topic>,
    into: &mut Targets,
) -> Result<(), String> {
    let present = node.topic_names_and_types().map_err(|e| e.to_string())?;
    for t in present {
        if topics.iter().any(|x| x.name == t.name) || !(all || wanted.contains(&t.name)) {
            continue;
        }
        let Some(graph) = node.topic_graph(&t.name).map_err(|e| e.to_string())? else { continue };
        let publishers: Vec<_> =
            graph.endpoints.iter().filter(|e| e.kind == freight::graph::EndpointKind::Publisher).collect();
        if publishers.is_empty() {
            // Nothing to learn the QoS from yet: look again at the next round.
            continue;
        }
        // A type freight has no Rust type for is read raw from DDS, its
        // definition taken from a ROS 2 install's .msg files.
        let built_in = Schema::built_in(&t.type_name);
        let typed = built_in.is_some();
        let schema = match built_in.map_or_else(|| Schema::from_share_dirs(&t.type_name, &into.share_dirs), Ok) {
            Ok(schema) => schema,
            Err(e) => {
                eprintln!("warning: not recording {}: {e}", t.name);
                let missed = Box::new(|| 0);
                topics.push(Topic {
                    name: t.name.clone(),
                    stats: Arc::default(),
                    subscribed: false,
                    typed: false,
                    missed,
                });
                continue;
            }
        };
        let reliable = publishers.iter().all(|p| p.reliability == Reliability::Reliable);
        let transient = publishers.iter().all(|p| p.durability == Durability::TransientLocal);
        let offered: Vec<OfferedQos> = publishers
            .iter()
            .map(|p| OfferedQos {
                reliability: match p.reliability {
                    Reliability::Reliable => freight_bag::Reliability::Reliable,
                    Reliability::BestEffort => freight_bag::Reliability::BestEffort,
                },
                durability: match p.durability {
                    Durability::TransientLocal => freight_bag::Durability::TransientLocal,
                    Durability::Volatile => freight_bag::Durability::Volatile,
                },
            })
            .collect();
        let qos = QoS {
            reliability: if reliable { Reliability::Reliable } else { Reliability::BestEffort },
            durability: if transient { Durability::TransientLocal } else { Durability::Volatile },
            history: History::KeepAll,
            ..QoS::keep_last(1)
        };
        let id = into
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add_topic(&t.name, schema.clone(), &offered)
            .map_err(|e| e.to_string())?;
        let stats: Arc<Mutex<TopicStats>> = Arc::default();
        let sink = Sink { topic: id, stats: stats.clone(), cache: into.cache.clone() };
        // What DDS missed is lost, unless a publisher is freight on this
        // host: its messages come by shared memory, and DDS may miss the
        // copies it also sends for readers elsewhere.
        let counted = publishers.iter().all(|p| p.over_network);
        let missed: Box<dyn Fn() -> u64> = if typed {
            let losses =
                subscribe(node, exec, &t.name, &t.type_name, qos, Box::new(move |s: &dyn Received| sink.take(s)))?;
            Box::new(move || if counted { losses.count() } else { 0 })
        } else {
            let qos = qos.to_dds(node.context().limits().max_depth);
            let missed = into.raw.subscribe(&t.name, &schema, &qos, Box::new(move |s| sink.take_cdr(s)))?;
            Box::new(move || if counted { missed() } else { 0 })
        };
        let how = match (reliable, typed) {
            (true, true) => "",
            (false, true) => " (best effort)",
            (true, false) => " (from DDS, as CDR)",
            (false, false) => " (best effort, from DDS, as CDR)",
        };
        eprintln!("recording {} [{}]{how}", t.name, t.type_name);
        topics.push(Topic { name: t.name, stats, subscribed: true, typed, missed });
    }
    Ok(())
}

/// Where discovered topics are recorded: the bag, the cache before it, the
/// raw topics, and where the definitions of types outside the built-in ones
/// are looked for.
struct Targets {
    writer: Arc<Mutex<Writer>>,
    cache: Arc<Cache>,
    raw: RawTopics,
    share_dirs: Vec<PathBuf>,
}

/// Where a topic's callback puts its messages.
struct Sink {
    topic: TopicId,
    stats: Arc<Mutex<TopicStats>>,
    cache: Arc<Cache>,
}

impl Sink {
    /// Encodes `s` into a buffer of the cache, counts it and queues it for the writer.
    fn take(&self, s: &dyn Received) {
        let log_time_ns = realtime_ns();
        let info = *s.info();
        let data = match s.encode(self.cache.buffer()) {
            Ok(data) => data,
            Err(e) => {
                eprintln!("warning: a message could not be encoded and was not recorded: {e}");
                return;
            }
        };
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).count(
            info.publisher_id,
            info.sequence,
            info.transport,
            data.len(),
        );
        let publish_time_ns = match info.transport {
            // DDS gives the writer's source time, already on the realtime clock.
            Transport::Network => info.publish_time_ns,
            _ => log_time_ns.saturating_sub(monotonic_ns().saturating_sub(info.publish_time_ns)),
        };
        // MCAP keeps 32 bits of the sequence number; the full one is in the frame.
        let sequence = info.sequence as u32;
        self.cache.push(Cached { topic: self.topic, data, log_time_ns, publish_time_ns, sequence });
    }

    /// Copies a raw topic's sample (CDR as it came over DDS) into a buffer of
    /// the cache, counts it and queues it for the writer.
    fn take_cdr(&self, s: &ReceivedCdr) {
        let log_time_ns = realtime_ns();
        let mut data = self.cache.buffer();
        data.extend_from_slice(s.bytes());
        // DDS shows no sequence numbers: counted, not checked.
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).count(
            s.publication_handle(),
            0,
            Transport::Network,
            data.len(),
        );
        let publish_time_ns = u64::try_from(s.source_timestamp_ns()).unwrap_or(log_time_ns);
        self.cache.push(Cached { topic: self.topic, data, log_time_ns, publish_time_ns, sequence: 0 });
    }
}

/// The recorder's peak resident memory in two parts, sampled (every
/// `MEMORY_PERIOD`) from `/proc/self/status`: private (`RssAnon`: the cache,
/// buffers, the process's own) and the shared memory of the samples it read
/// (`RssShmem`), which belongs to the publishers' segments and is resident
/// once per host however many processes read it. Both in bytes.
#[derive(Default)]
struct MemoryPeak {
    last: Option<Instant>,
    private: u64,
    shared: u64,
}

/// How often [`MemoryPeak`] samples.
const MEMORY_PERIOD: Duration = Duration::from_millis(50);

impl MemoryPeak {
    fn maybe_sample(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < MEMORY_PERIOD) {
            return;
        }
        self.last = Some(Instant::now());
        let Some(now) = resources::memory(std::process::id()) else { return };
        self.private = self.private.max(now.anon_kib << 10);
        self.shared = self.shared.max(now.shmem_kib << 10);
    }
}

/// The live status line.
struct Status {
    tty: bool,
    last: Instant,
    previous: HashMap<String, (u64, u64)>,
    printed: bool,
}

impl Status {
    fn new() -> Self {
        Status { tty: std::io::stderr().is_terminal(), last: Instant::now(), previous: HashMap::new(), printed: false }
    }

    fn maybe_print(&mut self, topics: &[Topic], writer: &Mutex<Writer>) {
        let period = if self.tty { STATUS_PERIOD } else { STATUS_PERIOD * 5 };
        let elapsed = self.last.elapsed();
        if elapsed < period || topics.is_empty() {
            return;
        }
        self.last = Instant::now();
        let secs = elapsed.as_secs_f64();
        let mut parts = Vec::new();
        for t in topics.iter().filter(|t| t.subscribed) {
            let s = t.stats.lock().unwrap_or_else(|p| p.into_inner());
            let (m0, b0) = self.previous.insert(t.name.clone(), (s.messages, s.bytes)).unwrap_or((0, 0));
            parts.push(format!(
                "{} {} msgs {:.1}/s {:.1} MB/s lost {}",
                crate::topic::shown(&t.name),
                s.messages,
                (s.messages - m0) as f64 / secs,
                (s.bytes - b0) as f64 / secs / 1e6,
                t.lost(&s)
            ));
        }
        let files = writer.lock().unwrap_or_else(|p| p.into_inner()).metadata().files.len();
        let line = format!("[{files} file{}] {}", if files == 1 { "" } else { "s" }, parts.join(" | "));
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

/// Prints the summary (stdout) and picks the exit status.
fn summary(
    topics: &[Topic],
    metadata: &freight_bag::Metadata,
    output: &std::path::Path,
    written: Option<Duration>,
    passed_through: u64,
    memory: &MemoryPeak,
) -> ExitCode {
    println!(
        "recorded {} messages on {} topics into {} ({} file{})",
        metadata.message_count(),
        metadata.topics.len(),
        output.display(),
        metadata.files.len(),
        if metadata.files.len() == 1 { "" } else { "s" }
    );
    let bytes: u64 = topics.iter().map(|t| t.stats.lock().unwrap_or_else(|p| p.into_inner()).bytes).sum();
    if let Some(d) = written {
        println!(
            "  written: {bytes} bytes in {:.3} s from the first message received to the last file synced ({:.1} MB/s)",
            d.as_secs_f64(),
            bytes as f64 / d.as_secs_f64().max(1e-9) / 1e6
        );
    }
    println!(
        "  copies: {passed_through} bytes went to the disk from the CDR copied out of the samples (one copy per \
         byte), the rest through the file's block buffer (two)"
    );
    let (cpu, peak) = own_usage();
    println!(
        "  recorder: {cpu:.2} s of CPU (user and system), peak resident memory {} MiB: private {} MiB, shared memory \
         of the samples read {} MiB (each peak sampled every {} ms)",
        peak >> 20,
        memory.private >> 20,
        memory.shared >> 20,
        MEMORY_PERIOD.as_millis()
    );
    let mut lost_total = 0;
    for t in topics.iter().filter(|t| t.subscribed) {
        let s = t.stats.lock().unwrap_or_else(|p| p.into_inner());
        let lost = t.lost(&s);
        lost_total += lost;
        println!("  {}: {} messages, {} bytes, {lost} lost", crate::topic::shown(&t.name), s.messages, s.bytes);
    }
    if lost_total > 0 {
        eprintln!(
            "warning: {lost_total} messages were lost (gaps in their publishers' sequence numbers, or samples DDS \
             knows it missed): the disk or the cache (--max-cache-size) did not keep up with the publishers, or the \
             network dropped them"
        );
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `rosbag2_YYYY_MM_DD-HH_MM_SS` in local time, as `ros2 bag record` names a bag.
fn default_name() -> PathBuf {
    // SAFETY: `time` and `localtime_r` write only into the locals given;
    // `tm` is plain data, valid when zeroed.
    let tm = unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm
    };
    PathBuf::from(format!(
        "rosbag2_{:04}_{:02}_{:02}-{:02}_{:02}_{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// This process's CPU seconds (user and system, all threads) and peak
/// resident memory in bytes.
fn own_usage() -> (f64, u64) {
    // SAFETY: getrusage writes only into `ru`, plain data valid when zeroed.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), (ru.ru_maxrss as u64).saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_in_one_publishers_sequence_are_losses_and_publishers_are_apart() {
        let mut s = TopicStats::default();
        for (p, q) in [(1, 10), (1, 11), (2, 500), (1, 14), (2, 501), (1, 15)] {
            s.count(p, q, Transport::Shm, 8);
        }
        assert_eq!((s.messages, s.bytes, s.lost), (6, 48, 2));
        // Over DDS there are no sequence numbers to compare.
        s.count(3, 0, Transport::Network, 8);
        s.count(3, 0, Transport::Network, 8);
        assert_eq!(s.lost, 2);
    }

    #[test]
    fn a_stop_takes_what_became_ready_during_the_last_turn() {
        use freight::msgs::std_msgs::UInt8;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let ctx = freight::Context::builder().local_only().create().unwrap();
        let node = ctx.create_node("record_drain").unwrap();
        let (first, second) = ("/record_drain/first", "/record_drain/second");
        let mut exec = Executor::new();
        // The first topic's callback publishes on the second topic: its
        // message arrives during the turn, as one does while a callback
        // waits for room in a full cache.
        let relay = node.create_publisher::<UInt8>(second, QoS::keep_last(4)).unwrap();
        let sub = node.create_subscription::<UInt8>(first, QoS::keep_last(4)).unwrap();
        exec.add_subscription(sub, move |_| relay.publish_copy(&UInt8 { data: 2 }).unwrap());
        let late = Arc::new(AtomicUsize::new(0));
        let counted = late.clone();
        let sub = node.create_subscription::<UInt8>(second, QoS::keep_last(4)).unwrap();
        exec.add_subscription(sub, move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        node.create_publisher::<UInt8>(first, QoS::keep_last(4)).unwrap().publish_copy(&UInt8 { data: 1 }).unwrap();
        assert_eq!(exec.spin_once(Duration::from_secs(5)).unwrap(), 1);
        assert_eq!(late.load(Ordering::SeqCst), 0, "the second topic was not ready when the turn began");
        assert_eq!(drain(&mut exec, DRAIN_LIMIT).unwrap(), 1);
        assert_eq!(late.load(Ordering::SeqCst), 1);
        // Nothing queued: the drain returns at once.
        assert_eq!(drain(&mut exec, DRAIN_LIMIT).unwrap(), 0);
    }

    #[test]
    fn the_cache_holds_one_oversized_message_and_lets_the_writer_drain_it() {
        let cache = Arc::new(Cache::new(10));
        let dir = freight_testkit::PrivateDir::new("freight-cache");
        let mut w = Writer::create(dir.path().join("b"), WriterOptions::default()).unwrap();
        let topic = w.add_topic("/t", Schema::built_in("std_msgs/msg/String").unwrap(), &[]).unwrap();
        let big = move |n| Cached { topic, data: vec![0; n], log_time_ns: 0, publish_time_ns: 0, sequence: 0 };
        assert!(cache.push(big(100)));
        let c = cache.clone();
        let pusher = thread::spawn(move || c.push(big(5)));
        // The second push waits until the writer takes the first.
        thread::sleep(Duration::from_millis(50));
        assert!(!pusher.is_finished());
        assert_eq!(cache.pop(Duration::ZERO).map(|m| m.data.len()).ok(), Some(100));
        assert!(pusher.join().unwrap());
        cache.close();
        assert_eq!(cache.pop(Duration::ZERO).map(|m| m.data.len()).ok(), Some(5));
        assert!(matches!(cache.pop(Duration::ZERO), Err(true)));
        cache.fail("disk full".into());
        assert!(!cache.push(big(1)));
    }
}
