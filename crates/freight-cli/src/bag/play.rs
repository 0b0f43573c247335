//! `freight bag play`: publishes a bag's messages at their recorded offsets,
//! to freight subscribers on this host (shared memory) and, through the
//! network plane, to stock ROS 2 nodes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use freight::{Durability, Message, Node, Publisher, QoS, Reliability};
use freight_bag::{OfferedQos, Reader, Schema};
use freight_msg::msgs::builtin_interfaces::Time;
use freight_msg::msgs::rosgraph_msgs::Clock;

use crate::raw::RawTopics;
use crate::stop;

pub const PLAY_ABOUT: &str = "\
Play a bag: publish each message at its recorded offset (receive time), with the QoS its
publishers offered when it was recorded. freight subscribers on this host receive it through
shared memory, stock ROS 2 nodes through the network plane. Bags written by `ros2 bag record`
(MCAP storage), rosbags and the mcap tools play too. A topic of a type outside freight's built-in
ones goes to DDS as the CDR it was recorded as (stock nodes, and freight subscriptions of a type
of their own, receive it there).

Copies per byte: the bag's chunk is read into memory, decoded into the message (its large fields
in heap memory) and copied into the shared-memory frame.

With --clock, it also publishes the bag's time on /clock (rosgraph_msgs/msg/Clock, best effort,
keep last 1, as rclcpp's ClockQoS) at the given rate (40 Hz if no rate is given): nodes with
use_sim_time follow the recording's clock, at --rate, as with `ros2 bag play --clock`.

At the end it prints how late each message went out against its recorded offset (p50, p99).
A topic whose type hash in the bag differs from freight's definition of its type is refused:
its bytes would not decode as that type.";

/// `freight bag play` arguments.
#[derive(Debug, Clone, Args)]
pub struct PlayArgs {
    /// The bag directory (or one .mcap file).
    pub bag: PathBuf,
    /// Play this many times faster (0.5: half speed).
    #[arg(short = 'r', long, default_value_t = 1.0, value_parser = positive)]
    pub rate: f64,
    /// Start again from the beginning after the end, until Ctrl-C.
    #[arg(short = 'l', long = "loop")]
    pub looping: bool,
    /// Play only these topics.
    #[arg(long, num_args = 1.., value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Skip the first SECS of the bag.
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pub start_offset: f64,
    /// Wait this long after creating the publishers, for subscribers to match.
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pub delay: f64,
    /// Publish the bag's time on /clock, HZ times a second (default 40), for
    /// nodes with use_sim_time.
    #[arg(long, value_name = "HZ", num_args = 0..=1, default_missing_value = "40", value_parser = positive)]
    pub clock: Option<f64>,
    /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "ID")]
    pub domain: Option<u32>,
}

fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

/// Publishes one topic's CDR messages.
trait Player {
    fn publish_cdr(&self, data: &[u8]) -> Result<(), String>;
}

impl<M: Message> Player for Publisher<M> {
    fn publish_cdr(&self, data: &[u8]) -> Result<(), String> {
        let m = M::from_cdr(data).map_err(|e| e.to_string())?;
        self.publish_copy(&m).map_err(|e| e.to_string())
    }
}

/// A topic of a type freight has no Rust type for: its recorded CDR as it is.
impl Player for freight_dds::Writer {
    fn publish_cdr(&self, data: &[u8]) -> Result<(), String> {
        self.write_cdr(data).map_err(|e| e.to_string())
    }
}

/// Runs `freight bag play`.
pub fn run(args: &PlayArgs) -> Result<(), String> {
    stop::install();
    let bag = Reader::open(&args.bag).map_err(|e| e.to_string())?;
    let metadata = bag.scan().map_err(|e| e.to_string())?;
    let ctx = crate::ros_args::context(args.domain).map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("freight_bag_play_{}", std::process::id())).map_err(|e| e.to_string())?;
    let wanted: Vec<String> =
        args.topics.iter().map(|t| node.resolve_topic_name(t).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let mut players: HashMap<String, Box<dyn Player>> = HashMap::new();
    let mut raw = RawTopics::new(ctx.domain_id());
    for t in &metadata.topics {
        if !wanted.is_empty() && !wanted.contains(&t.name) {
            continue;
        }
        let offered = OfferedQos::parse_list(&t.offered_qos_profiles);
        let reliable = offered.iter().all(|q| q.reliability == freight_bag::Reliability::Reliable);
        let transient =
            !offered.is_empty() && offered.iter().all(|q| q.durability == freight_bag::Durability::TransientLocal);
        let qos = QoS {
            reliability: if reliable { Reliability::Reliable } else { Reliability::BestEffort },
            durability: if transient { Durability::TransientLocal } else { Durability::Volatile },
            ..QoS::keep_last(10)
        };
        let Some(schema) = Schema::built_in(&t.type_name) else {
            // A type freight has no Rust type for goes to DDS as the CDR it
            // was recorded as, with the bag's own definition of it.
            let qos = qos.to_dds(ctx.limits().max_depth);
            players.insert(t.name.clone(), Box::new(raw.writer(&t.name, &t.type_name, &qos)?));
            eprintln!("playing {} [{}] (to DDS, as CDR)", t.name, t.type_name);
            continue;
        };
        // The files' channels and metadata.yaml may each carry the hash
        // (rosbags writes it only into metadata.yaml): both must agree.
        let recorded = bag.recorded_metadata().and_then(|m| m.topics.iter().find(|r| r.name == t.name));
        let hashes = [Some(&t.type_description_hash), recorded.map(|r| &r.type_description_hash)];
        for hash in hashes.into_iter().flatten() {
            if !hash.is_empty() && *hash != schema.rihs01 {
                return Err(format!(
                    "{}: the bag's {} has type hash {hash}, freight's has {}: the bytes would not decode as this type",
                    t.name, t.type_name, schema.rihs01
                ));
            }
        }
        players.insert(t.name.clone(), publisher(&node, &t.name, &t.type_name, qos)?);
    }
    if players.is_empty() {
        return Err(format!("nothing to play in {}: no topic was selected", args.bag.display()));
    }
    if !stop::sleep(Duration::from_secs_f64(args.delay.max(0.0))) {
        return Ok(());
    }
    let mut clock = args.clock.map(|hz| SimClock::new(&node, hz)).transpose()?;
    let offset_ns = (args.start_offset.max(0.0) * 1e9) as u64;
    let mut lateness: Vec<Duration> = Vec::new();
    let mut played = 0u64;
    let started = Instant::now();
    'passes: loop {
        let mut first: Option<u64> = None;
        let pass_start = Instant::now();
        for m in bag.messages() {
            if stop::requested() {
                break 'passes;
            }
            let m = m.map_err(|e| e.to_string())?;
            let Some(player) = players.get(&m.topic) else { continue };
            let t0 = *first.get_or_insert(m.log_time_ns);
            let since = m.log_time_ns.saturating_sub(t0);
            if since < offset_ns {
                continue;
            }
            let target = pass_start + Duration::from_secs_f64((since - offset_ns) as f64 / 1e9 / args.rate);
            let waited = match &mut clock {
                Some(c) => c.tick_until(target, |now| {
                    t0 + offset_ns + (now.saturating_duration_since(pass_start).as_secs_f64() * args.rate * 1e9) as u64
                }),
                None => stop::sleep(target.saturating_duration_since(Instant::now())),
            };
            if !waited {
                break 'passes;
            }
            lateness.push(Instant::now().saturating_duration_since(target));
            if let Err(e) = player.publish_cdr(&m.data) {
                eprintln!("warning: message on {} at {} not played: {e}", m.topic, m.log_time_ns);
                continue;
            }
            played += 1;
        }
        if !args.looping {
            break;
        }
    }
    lateness.sort();
    let pct = |p: f64| lateness.get(((lateness.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default();
    println!(
        "played {played} messages on {} topics in {:.2} s; timing error against the recorded offsets p50 {} µs, p99 {} µs",
        players.len(),
        started.elapsed().as_secs_f64(),
        pct(0.5).as_micros(),
        pct(0.99).as_micros()
    );
    Ok(())
}

/// The bag's time on `/clock`, published at a fixed rate while the player
/// waits for its next message.
struct SimClock {
    publisher: Publisher<Clock>,
    period: Duration,
    next: Instant,
}

impl SimClock {
    fn new(node: &Node, hz: f64) -> Result<SimClock, String> {
        // rclcpp's ClockQoS and rclpy's time source: best effort, depth 1.
        let qos = QoS { reliability: Reliability::BestEffort, ..QoS::keep_last(1) };
        let publisher = node.create_publisher::<Clock>("/clock", qos).map_err(|e| format!("/clock: {e}"))?;
        Ok(SimClock { publisher, period: Duration::from_secs_f64(1.0 / hz), next: Instant::now() })
    }

    /// Sleeps until `target`, publishing `bag_time(now)` (ns since the epoch)
    /// at each tick on the way; false if a stop was requested.
    fn tick_until(&mut self, target: Instant, bag_time: impl Fn(Instant) -> u64) -> bool {
        loop {
            let now = Instant::now();
            if self.next <= now {
                let ns = bag_time(now);
                let clock = Time {
                    sec: i32::try_from(ns / 1_000_000_000).unwrap_or(i32::MAX),
                    nanosec: (ns % 1_000_000_000) as u32,
                };
                if let Err(e) = self.publisher.publish_copy(&Clock { clock }) {
                    eprintln!("warning: /clock not published: {e}");
                }
                // Ticks missed while a message went out are not made up for.
                let due = self.next + self.period;
                self.next = if due > now { due } else { now + self.period };
            }
            if target <= now {
                return true;
            }
            if !stop::sleep(target.min(self.next).saturating_duration_since(now)) {
                return false;
            }
        }
    }
}

/// A publisher of `type_name` (one of the built-in types) on `topic`.
fn publisher(node: &Node, topic: &str, type_name: &str, qos: QoS) -> Result<Box<dyn Player>, String> {
    fn make<M: Message>(node: &Node, topic: &str, qos: QoS) -> Result<Box<dyn Player>, String> {
        let p = node.create_publisher::<M>(topic, qos).map_err(|e| format!("{topic}: {e}"))?;
        Ok(Box::new(p))
    }
    macro_rules! dispatch {
        ($($t:ty),* $(,)?) => {
            match type_name {
                $(name if name == <$t as Message>::TYPE_NAME => make::<$t>(node, topic, qos),)*
                other => Err(format!("{topic}: {other} is not a built-in type")),
            }
        };
    }
    // Every built-in message type, generated by `build.rs`.
    include!(concat!(env!("OUT_DIR"), "/built_ins.rs"))
}
