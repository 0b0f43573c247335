//! `freight bench ros2`: freight against what ROS 2 users run today, measured in the same run
//! on the same host.
//!
//! # What is measured
//!
//! For each message (`sensor_msgs/Image` 1920x1080 and 3840x2160 bgra8, and a
//! `sensor_msgs/PointCloud2` of 3,686,400 points, four 1280x720 RGB-D cameras merged, of x, y,
//! z float32 and r, g, b uint8: 15 bytes a point, 55,296,000 bytes, as in the Qiita seed) and
//! each stack:
//!
//! * `jazzy`, `kilted`: stock rclpy to stock rclpy on its defaults (rmw_fastrtps_cpp, Fast DDS
//!   2.14 and 3.2, from PyPI), run by [`STOCK_SCRIPT`] in the interpreters of
//!   `.venv-ros-jazzy` / `.venv-ros-kilted`. On one host Fast DDS carries data over its
//!   shared-memory transport: the default users get. Nothing of freight is imported there.
//! * `freight-py`: freight's Python API to itself, [`FREIGHT_PY_SCRIPT`], on freight's local
//!   plane only (`freight.init(local_only=True)`).
//! * `freight-rs`: freight's typed Rust API to itself ([`peer`], the hidden
//!   `freight bench ros2-peer` of this binary), local plane only.
//!
//! # Protocol (every stack)
//!
//! * Two processes, started by this command: the subscriber first, then the publisher, pinned
//!   to the first and second allowed CPU ([`super::sys::CpuPlan`]) when there are two.
//! * Data on `<topic>` and acks on `<topic>_ack` (`std_msgs/Header`), both reliable, volatile,
//!   keep last 10: rclpy's default profile (`create_publisher(T, topic, 10)`), and the same
//!   depth on freight.
//! * A handshake: the publisher sends small `hello` messages (no payload) every 0.2 s until
//!   one is acked, so that both directions are matched at both ends before anything counts.
//! * Message k: the publisher writes **every byte** of the payload with `k % 255 + 1`, as a
//!   camera writes its whole frame (stock: in place into the message's `array('B')`, which
//!   rclpy then copies; freight: into a fresh loan of shared memory), puts `w<k>` (warm-up)
//!   or `m<k>` (measured) in `header.frame_id`, stamps `header.stamp` with
//!   `CLOCK_MONOTONIC` as the last thing before `publish`, and sends message k + 1 only
//!   after the ack of k: one message in flight. The fill is outside the latency and inside
//!   the frame rate.
//! * The subscriber (stock: in its callback, spun by `rclpy.spin_once`; freight Python: the
//!   same through freight's executor; Rust: `Subscription::take`) checks the payload's length
//!   and 64 bytes spread over it, first and last included, then reads `CLOCK_MONOTONIC`: the
//!   one-way latency is that minus the stamp. It acks every message.
//! * `--warmup` round trips are discarded; the row ends after `--count` measured round trips
//!   or once `--duration` seconds have passed, whichever comes first. frames/s = measured round
//!   trips / their wall time. p50 and p99 are nearest-rank percentiles.
//!
//! # Isolation
//!
//! Stock Fast DDS discovers by multicast on the host's interfaces. No benchmark traffic may
//! reach them: the whole measurement re-executes itself under `unshare --net` (root only)
//! and, inside, brings up a loopback that routes multicast ([`namespace`]). Stock processes
//! get this process's environment less the variables that would change their defaults
//! ([`STOCK_ENV_REMOVED`]); freight processes never join DDS. Every wait is bounded: a peer that
//! hangs is killed and its row says "timed out".

pub(super) mod namespace;
mod peer;
mod report;
mod row;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::args::parse_seconds;
use super::python::StackInterpreters;
use super::{check_output_path, BenchError};

/// The stock node, embedded: stock rclpy only.
pub const STOCK_SCRIPT: &str = include_str!("stock_rclpy.py");
/// freight's Python node, embedded: the stock script through freight's Python API.
pub const FREIGHT_PY_SCRIPT: &str = include_str!("freight_py.py");
/// The protocol both Python nodes run, embedded; standard library only.
pub const PROTOCOL_SCRIPT: &str = include_str!("bench_protocol.py");

/// Variables removed from the stock processes' environment: each would replace a default of
/// rclpy or Fast DDS (the middleware, its XML profiles, its transports, discovery).
pub const STOCK_ENV_REMOVED: &[&str] = &[
    "CYCLONEDDS_URI",
    "RMW_IMPLEMENTATION",
    "FASTRTPS_DEFAULT_PROFILES_FILE",
    "FASTDDS_DEFAULT_PROFILES_FILE",
    "FASTDDS_BUILTIN_TRANSPORTS",
    "FASTDDS_ENVIRONMENT_FILE",
    "SKIP_DEFAULT_XML",
    "ROS_DOMAIN_ID",
    "ROS_LOCALHOST_ONLY",
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    "ROS_STATIC_PEERS",
    "ROS_DISABLE_LOANED_MESSAGES",
];

/// A stack: who publishes and who subscribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// stock rclpy to stock rclpy, ROS 2 Jazzy defaults (Fast DDS 2.14).
    Jazzy,
    /// stock rclpy to stock rclpy, ROS 2 Kilted defaults (Fast DDS 3.2).
    Kilted,
    /// freight's Python API to itself, shared memory.
    FreightPy,
    /// freight's Rust API to itself, shared memory.
    FreightRs,
}

impl Stack {
    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Stack::Jazzy => "stock rclpy Jazzy",
            Stack::Kilted => "stock rclpy Kilted",
            Stack::FreightPy => "freight Python",
            Stack::FreightRs => "freight Rust",
        }
    }

    /// The name on the command line and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Stack::Jazzy => "jazzy",
            Stack::Kilted => "kilted",
            Stack::FreightPy => "freight-py",
            Stack::FreightRs => "freight-rs",
        }
    }
}

/// A message of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum MessageKind {
    /// sensor_msgs/Image 1920x1080 bgra8 (8,294,400 bytes).
    #[value(name = "1080p")]
    Image1080p,
    /// sensor_msgs/Image 3840x2160 bgra8 (33,177,600 bytes).
    #[value(name = "4k")]
    Image4k,
    /// sensor_msgs/PointCloud2, 3,686,400 points of x, y, z float32 and r, g, b uint8
    /// (55,296,000 bytes).
    Cloud,
}

/// Points of the cloud: four 1280x720 RGB-D cameras.
pub const CLOUD_POINTS: u32 = 4 * 1280 * 720;
/// Bytes a point: x, y, z float32 and r, g, b uint8.
pub const CLOUD_POINT_STEP: u32 = 15;

impl MessageKind {
    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            MessageKind::Image1080p => "Image 1920x1080",
            MessageKind::Image4k => "Image 3840x2160",
            MessageKind::Cloud => "PointCloud2 3.7M pts",
        }
    }

    /// The name on the command line and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Image1080p => "1080p",
            MessageKind::Image4k => "4k",
            MessageKind::Cloud => "cloud",
        }
    }

    /// Payload bytes (the `data` field).
    pub fn bytes(self) -> u64 {
        match self {
            MessageKind::Image1080p => 1920 * 1080 * 4,
            MessageKind::Image4k => 3840 * 2160 * 4,
            MessageKind::Cloud => u64::from(CLOUD_POINTS) * u64::from(CLOUD_POINT_STEP),
        }
    }

    /// The message as every peer takes it: `image WIDTH HEIGHT` or `cloud POINTS`.
    pub fn peer_args(self) -> Vec<String> {
        let words: &[&str] = match self {
            MessageKind::Image1080p => &["image", "1920", "1080"],
            MessageKind::Image4k => &["image", "3840", "2160"],
            MessageKind::Cloud => &["cloud"],
        };
        let mut out: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        if self == MessageKind::Cloud {
            out.push(CLOUD_POINTS.to_string());
        }
        out
    }
}

/// Options of `freight bench ros2`.
#[derive(Debug, Clone, Args)]
pub struct Ros2Args {
    /// A short run for tests: the 1080p image only, 2 warm-up and at most 10 measured round
    /// trips or 2 s per row (each explicit option below still wins).
    #[arg(long)]
    pub quick: bool,

    /// Messages, comma-separated [default: 1080p,4k,cloud; quick: 1080p].
    #[arg(long, value_delimiter = ',', value_enum, value_name = "LIST")]
    pub messages: Option<Vec<MessageKind>>,

    /// Stacks, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "jazzy,kilted,freight-py,freight-rs")]
    pub stacks: Vec<Stack>,

    /// Warm-up round trips per row, discarded [default: 5; quick: 2].
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,

    /// Measured round trips per row, at most [default: 200; quick: 10].
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,

    /// Seconds of measuring per row, at most: a row ends at --count or here, whichever comes
    /// first [default: 8; quick: 2].
    #[arg(long, value_parser = parse_seconds, value_name = "SECS")]
    pub duration: Option<Duration>,

    #[command(flatten)]
    pub interpreters: StackInterpreters,

    /// Also write every row, with its raw latencies, as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Internal: this process is the re-executed measurement inside its network namespace.
    #[arg(long, hide = true)]
    pub inside_namespace: bool,
}

/// Arguments of the hidden `freight bench ros2-peer` (the Rust stack's two processes), in the
/// embedded Python scripts' syntax.
#[derive(Debug, Clone, Args)]
pub struct Ros2PeerArgs {
    /// pub or sub.
    pub role: String,
    /// The data topic; acks go on `<topic>_ack`.
    pub topic: String,
    /// image or cloud.
    pub kind: String,
    /// WIDTH HEIGHT for an image, POINTS for a cloud.
    #[arg(num_args = 1..=2, required = true)]
    pub dims: Vec<u32>,
    /// Warm-up round trips.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Measured round trips, at most.
    #[arg(long, default_value_t = 200)]
    pub count: u32,
    /// Seconds of measuring, at most.
    #[arg(long, default_value_t = 8.0)]
    pub duration: f64,
}

/// What one run measures, resolved from the options.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Messages in table order.
    pub messages: Vec<MessageKind>,
    /// Stacks in table order.
    pub stacks: Vec<Stack>,
    /// Warm-up round trips per row.
    pub warmup: u32,
    /// Measured round trips per row, at most.
    pub count: u32,
    /// Measuring time per row, at most.
    pub duration: Duration,
    /// Interpreter of each Python stack.
    pub jazzy: PathBuf,
    /// See [`Plan::jazzy`].
    pub kilted: PathBuf,
    /// See [`Plan::jazzy`].
    pub freight_py: PathBuf,
}

impl Plan {
    /// Resolves the options (defaults, --quick) and checks them.
    pub fn new(args: &Ros2Args) -> Result<Plan, BenchError> {
        let quick = args.quick;
        let messages = dedup(args.messages.clone().unwrap_or_else(|| {
            if quick {
                vec![MessageKind::Image1080p]
            } else {
                vec![MessageKind::Image1080p, MessageKind::Image4k, MessageKind::Cloud]
            }
        }));
        let stacks = dedup(args.stacks.clone());
        let warmup = args.warmup.unwrap_or(if quick { 2 } else { 5 });
        let count = args.count.unwrap_or(if quick { 10 } else { 200 });
        if count == 0 {
            return Err(BenchError::new("--count 0 measures nothing", "give at least 1 (default 200)"));
        }
        let duration = args.duration.unwrap_or(Duration::from_secs(if quick { 2 } else { 8 }));
        Ok(Plan {
            messages,
            stacks,
            warmup,
            count,
            duration,
            jazzy: args.interpreters.ros_jazzy.clone(),
            kilted: args.interpreters.ros_kilted.clone(),
            freight_py: args.interpreters.freight(),
        })
    }

    /// The interpreter of a Python stack; `None` for the Rust one.
    pub fn interpreter(&self, stack: Stack) -> Option<&PathBuf> {
        match stack {
            Stack::Jazzy => Some(&self.jazzy),
            Stack::Kilted => Some(&self.kilted),
            Stack::FreightPy => Some(&self.freight_py),
            Stack::FreightRs => None,
        }
    }
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Entry point of `freight bench ros2`. Outside the namespace it checks the options and
/// re-executes itself under `unshare --net`; inside, it measures.
pub fn run(args: &Ros2Args) -> Result<ExitCode, BenchError> {
    let plan = Plan::new(args)?;
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    if !args.inside_namespace {
        return namespace::reexec("freight bench ros2");
    }
    namespace::enter("freight bench ros2")?;
    crate::stop::install();
    super::sys::quiet_iceoryx2_logs();
    let rows = row::run_all(&plan)?;
    super::sys::print_stdout(&report::table(&rows));
    if let Some(path) = &args.json {
        report::write_json(path, &plan, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    if crate::stop::requested() {
        return Err(BenchError::new("interrupted", "run it again to measure every row"));
    }
    Ok(ExitCode::SUCCESS)
}

/// Entry point of the hidden `freight bench ros2-peer`.
pub fn run_peer(args: &Ros2PeerArgs) -> ExitCode {
    super::sys::quiet_iceoryx2_logs();
    match peer::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_sizes_are_the_documented_ones() {
        assert_eq!(MessageKind::Image1080p.bytes(), 8_294_400);
        assert_eq!(MessageKind::Image4k.bytes(), 33_177_600);
        // The Qiita seed's "55 MB": 3.68 M points of about 15 bytes.
        assert_eq!(MessageKind::Cloud.bytes(), 55_296_000);
        assert_eq!(MessageKind::Cloud.peer_args(), ["cloud", "3686400"]);
        assert_eq!(MessageKind::Image4k.peer_args(), ["image", "3840", "2160"]);
    }

    #[test]
    fn the_scripts_keep_the_stock_side_stock() {
        for line in STOCK_SCRIPT.lines().chain(PROTOCOL_SCRIPT.lines()) {
            let code = line.trim_start();
            assert!(
                !(code.starts_with("import freight") || code.starts_with("from freight")),
                "the stock script imports freight: {line}"
            );
        }
        assert!(FREIGHT_PY_SCRIPT.contains("freight.init(local_only=True)"));
        assert!(!FREIGHT_PY_SCRIPT.contains("import rclpy"));
    }
}
