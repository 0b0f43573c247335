//! `freight tune`: DDS profiles for large samples over a lossy link.
//!
//! The arguments become [`freight_tune::Inputs`]; [`freight_tune::tune`] derives the
//! profile; stdout gets the summary table, and `--out DIR` the three files. All the physics
//! lives in the `freight-tune` crate, so freight's own network plane can use it too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use freight_tune::{render, tune, units, Inputs, TuneError};

/// Arguments of `freight tune`.
#[derive(Debug, Clone, Args)]
pub struct TuneArgs {
    /// Publish rate, Hz (e.g. 30).
    #[arg(long, value_parser = hz, value_name = "HZ")]
    pub rate: f64,
    /// Serialized message size: 512KiB, 64KB, 1MiB or bytes.
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub payload: u64,
    /// Rate IP packets move over the link: 433Mbit, 1Gbit, 54MB/s.
    #[arg(long, value_parser = bitrate, value_name = "RATE")]
    pub link: f64,
    /// The link's MTU in bytes.
    #[arg(long, default_value_t = 1500, value_name = "BYTES")]
    pub mtu: u32,
    /// Expected packet loss: 1%, 20%, 0.01.
    #[arg(long, default_value = "1%", value_parser = fraction, value_name = "FRACTION")]
    pub loss: f64,
    /// Longest outage to ride through without losing the match: 20s, 500ms, 0.
    #[arg(long, default_value = "20s", value_parser = duration, value_name = "DURATION")]
    pub outage: Duration,
    /// How late a sample may arrive once the link is back: 100ms.
    #[arg(long, default_value = "100ms", value_parser = duration, value_name = "DURATION")]
    pub latency_budget: Duration,
    /// Round trip of the unloaded link: 5ms.
    #[arg(long, default_value = "5ms", value_parser = duration, value_name = "DURATION")]
    pub rtt: Duration,
    /// Heartbeats (repair opportunities) per published sample.
    #[arg(long, default_value_t = 2.0, value_name = "N")]
    pub heartbeats_per_sample: f64,
    /// Topic for ros2_qos.yaml (a placeholder by default: replace it with yours).
    #[arg(long, default_value = "/points", value_name = "TOPIC")]
    pub topic: String,
    /// Write cyclonedds.xml, fastdds.xml and ros2_qos.yaml into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Long help of `freight tune`.
pub const LONG_ABOUT: &str = "\
Derive Cyclone DDS and Fast DDS settings and ROS 2 QoS for large samples over a lossy,
outage-prone link (WiFi), from what you know about the stream and the link.

Three tunings: (a) RTPS messages that fit one IP packet (MTU - 28), first sends and
retransmits alike, so a lost packet costs one fragment; (b) heartbeats at 2x the publish
rate with short NACK delays, and a history long enough that a sample is repaired before it
is replaced; (c) a bounded writer history (N_HC) whose backlog after an outage drains
within the latency budget on the link's spare capacity, a lease longer than the outage,
and socket buffers of a few samples. stdout: every derived value with its reason.
--out DIR writes cyclonedds.xml (CYCLONEDDS_URI), fastdds.xml
(FASTRTPS_DEFAULT_PROFILES_FILE) and ros2_qos.yaml (--ros-args --params-file), each
value commented. Formulas and worked examples: docs/tuning.md.

Defaults: --mtu 1500, --loss 1%, --outage 20s, --latency-budget 100ms, --rtt 5ms,
--heartbeats-per-sample 2, --topic /points (a placeholder).

Example: freight tune --rate 30 --payload 512KiB --link 433Mbit --out tuned/";

/// Why `freight tune` failed.
#[derive(Debug, thiserror::Error)]
pub enum TuneCommandError {
    /// The inputs cannot be tuned (the message names the input to change).
    #[error(transparent)]
    Tune(Box<TuneError>),
    /// A file could not be written.
    #[error("cannot write {}: {source}; choose another --out directory", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<TuneError> for TuneCommandError {
    fn from(e: TuneError) -> Self {
        // Boxed: the error carries every number its message quotes, which makes it large.
        TuneCommandError::Tune(Box::new(e))
    }
}

/// The inputs the arguments describe.
pub fn inputs(args: &TuneArgs) -> Inputs {
    Inputs {
        mtu: args.mtu,
        loss: args.loss,
        outage: args.outage,
        latency_budget: args.latency_budget,
        rtt: args.rtt,
        heartbeats_per_sample: args.heartbeats_per_sample,
        topic: args.topic.clone(),
        ..Inputs::new(args.rate, args.payload, args.link)
    }
}

/// Runs `freight tune`: the summary on stdout, the files under `--out`.
pub fn run(args: &TuneArgs) -> Result<(), TuneCommandError> {
    let profile = tune(&inputs(args))?;
    print!("{}", render::summary_table(&profile));
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|source| TuneCommandError::Write { path: dir.clone(), source })?;
        for (name, text) in [
            ("cyclonedds.xml", render::cyclonedds_xml(&profile)),
            ("fastdds.xml", render::fastdds_xml(&profile)),
            ("ros2_qos.yaml", render::ros2_qos_yaml(&profile)),
        ] {
            write(&dir.join(name), &text)?;
            println!("wrote {}", dir.join(name).display());
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), TuneCommandError> {
    std::fs::write(path, text).map_err(|source| TuneCommandError::Write { path: path.to_path_buf(), source })
}

// clap value parsers: the library's errors already say what to write.
fn hz(text: &str) -> Result<f64, String> {
    units::parse_hz(text).map_err(|e| e.to_string())
}
fn size(text: &str) -> Result<u64, String> {
    units::parse_size(text).map_err(|e| e.to_string())
}
fn bitrate(text: &str) -> Result<f64, String> {
    units::parse_bitrate(text).map_err(|e| e.to_string())
}
fn fraction(text: &str) -> Result<f64, String> {
    units::parse_fraction(text).map_err(|e| e.to_string())
}
fn duration(text: &str) -> Result<Duration, String> {
    units::parse_duration(text).map_err(|e| e.to_string())
}
