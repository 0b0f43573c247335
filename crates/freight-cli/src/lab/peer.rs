//! `freight lab peer`: the lab's freight publisher or subscriber, run inside one of the
//! namespaces. It speaks the same line protocol as the stock peer (`cyclonedds_peer.py`),
//! so the lab drives both alike:
//!
//! * pub: `matched` once a subscriber on the other host matched; waits for `go` on stdin;
//!   publishes on the schedule t0 + k/rate (slots a blocked write overran are skipped, not
//!   sent in a burst); then `done sent=<n> errors=<n> skipped=<n>`.
//! * sub: `ready`, then `r <seq> <send_ns> <recv_ns>` per sample; ends on stdin EOF or
//!   `stop`.
//!
//! Message k is a std_msgs/msg/UInt8MultiArray whose data starts with k and the send time
//! (CLOCK_MONOTONIC ns, both u64 little-endian): the namespaces share the clock.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use freight::clock::monotonic_ns;
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Context, DdsConfig, LargeData, QoS};

use crate::stop;

/// The lab's peers' topic.
pub const TOPIC: &str = "/lab/points";

/// Which end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// The publisher.
    Pub,
    /// The subscriber.
    Sub,
}

/// Options of `freight lab peer`.
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// Which end.
    #[arg(value_enum)]
    pub role: Role,
    /// Payload bytes per message (at least 16).
    #[arg(long, default_value_t = 512 << 10)]
    pub payload: u64,
    /// Messages per second.
    #[arg(long, default_value_t = 30.0)]
    pub rate: f64,
    /// Seconds of publishing.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// `default`: reliable KEEP_ALL on Cyclone's defaults; `tuned`: QoS::large_data_lossy.
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Tuned only: the link rate, bit/s.
    #[arg(long, default_value_t = 433e6)]
    pub link: f64,
    /// Tuned only: expected loss, a fraction.
    #[arg(long, default_value_t = 0.01)]
    pub loss: f64,
    /// Tuned only: longest outage to ride through, seconds.
    #[arg(long, default_value_t = 20.0)]
    pub outage: f64,
}

/// Runs the peer; false after printing why it failed.
pub fn run(args: &PeerArgs) -> bool {
    stop::install();
    match serve(args) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("error: lab peer: {e}");
            false
        }
    }
}

/// The QoS both ends use for a profile.
pub fn qos_of(args: &PeerArgs) -> Result<QoS, String> {
    match args.profile.as_str() {
        "default" => Ok(QoS::keep_all()),
        "tuned" => QoS::large_data_lossy(stream_of(args)).map_err(|e| e.to_string()),
        other => Err(format!("unknown profile `{other}`: default or tuned")),
    }
}

/// The stream as the tuner sees it: what `tuned` asks freight to tune, and what the lab
/// renders into the stock peer's `cyclonedds.xml`.
pub fn stream_of(args: &PeerArgs) -> LargeData {
    LargeData {
        loss: args.loss,
        outage: Duration::from_secs_f64(args.outage),
        ..LargeData::new(args.rate, args.payload + PAYLOAD_OVERHEAD, args.link)
    }
}

/// Serialized bytes of a UInt8MultiArray beyond its data: an empty dimension list, the data
/// offset and the data's length.
pub const PAYLOAD_OVERHEAD: u64 = 12;

fn serve(args: &PeerArgs) -> Result<(), String> {
    private_shared_memory()?;
    let qos = qos_of(args)?;
    // The lab compares the tuned profile with Cyclone's defaults, for this peer as for
    // the stock one: freight's own settings for the host stay out of both.
    let config = DdsConfig { freight_settings: false, ..DdsConfig::default() };
    let ctx = Context::builder().dds_config(config).create().map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("lab_{:?}", args.role).to_lowercase()).map_err(|e| e.to_string())?;
    let go = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    watch_stdin(go.clone(), ended.clone());
    let mut out = std::io::stdout().lock();
    let mut say = |line: &str| {
        // The lab reads these lines; a closed pipe means it is gone, and the stop flag or
        // stdin's end follows.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    match args.role {
        Role::Sub => {
            let sub = node.create_subscription::<UInt8MultiArray>(TOPIC, qos).map_err(|e| e.to_string())?;
            say("ready");
            while !stop::requested() && !ended.load(Ordering::Acquire) {
                let Some(sample) = sub.take(Duration::from_millis(100)).map_err(|e| e.to_string())? else { continue };
                let recv = monotonic_ns();
                let Some(head) = sample.data.as_bytes().and_then(|b| b.get(..16)) else { continue };
                let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
                let sent = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
                say(&format!("r {seq} {sent} {recv}"));
            }
        }
        Role::Pub => {
            if args.payload < 16 {
                return Err(format!("--payload {} is below 16 bytes (sequence number and time)", args.payload));
            }
            let publisher = node.create_publisher::<UInt8MultiArray>(TOPIC, qos).map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(30);
            while publisher.network_subscription_count() == 0 {
                if stop::requested() || Instant::now() > deadline {
                    return Err("no subscriber matched within 30 s".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            say("matched");
            while !go.load(Ordering::Acquire) {
                if stop::requested() || ended.load(Ordering::Acquire) {
                    return Err("stdin closed before `go`".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let (sent, errors, skipped) = publish(&publisher, args)?;
            say(&format!("done sent={sent} errors={errors} skipped={skipped}"));
            // Let the last samples' repairs finish before the writer goes.
            stop::sleep(Duration::from_secs(2));
        }
    }
    Ok(())
}

/// Publishes on the schedule; (written, failed, skipped).
fn publish(publisher: &freight::Publisher<UInt8MultiArray>, args: &PeerArgs) -> Result<(u64, u64, u64), String> {
    let len = usize::try_from(args.payload).map_err(|e| e.to_string())?;
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let slots = (args.seconds * args.rate).round() as u64;
    let zeros = vec![0u8; len];
    let (mut sent, mut errors, mut skipped) = (0, 0, 0);
    let t0 = Instant::now();
    let mut k = 0u64;
    while k < slots && !stop::requested() {
        let due = t0 + period.mul_f64(k as f64);
        stop::sleep(due.saturating_duration_since(Instant::now()));
        let mut loan =
            publisher.loan(len).map_err(|e| e.to_string())?.write_from_slice(&zeros).map_err(|e| e.to_string())?;
        if let Some(data) = loan.buffer_mut(0) {
            data[..8].copy_from_slice(&k.to_le_bytes());
            data[8..16].copy_from_slice(&monotonic_ns().to_le_bytes());
        }
        match publisher.publish(loan) {
            Ok(()) => sent += 1,
            Err(e) => {
                if errors == 0 {
                    eprintln!("lab peer: message {k}: {e}");
                }
                errors += 1;
            }
        }
        // A write that blocked past the next slots: skip them rather than burst.
        let behind = (t0.elapsed().as_secs_f64() / period.as_secs_f64()).floor() as u64;
        let next = (k + 1).max(behind);
        skipped += next - (k + 1);
        k = next;
    }
    Ok((sent, errors, skipped))
}

/// Watches stdin: `go` sets `go`; `stop` or EOF sets `ended`.
fn watch_stdin(go: Arc<AtomicBool>, ended: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("go") => go.store(true, Ordering::Release),
                Ok("stop") | Err(_) => break,
                Ok(_) => {}
            }
        }
        ended.store(true, Ordering::Release);
    });
}

/// Gives this process a /dev/shm and iceoryx2 records of its own, so freight sees the other
/// end as another host (freight identifies a host by its shared memory) and sends over DDS
/// rather than by shared memory.
fn private_shared_memory() -> Result<(), String> {
    // SAFETY: unshare and mount are called with valid NUL-terminated strings; they only
    // change this process's mount namespace.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!("unshare(CLONE_NEWNS): {}", std::io::Error::last_os_error()));
        }
        let root = c"/";
        let private = libc::MS_REC | libc::MS_PRIVATE;
        if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), private, std::ptr::null()) != 0 {
            return Err(format!("making / private: {}", std::io::Error::last_os_error()));
        }
    }
    std::fs::create_dir_all("/tmp/iceoryx2").map_err(|e| format!("creating /tmp/iceoryx2: {e}"))?;
    for dir in [c"/dev/shm", c"/tmp/iceoryx2"] {
        let tmpfs = c"tmpfs";
        // SAFETY: as above.
        if unsafe { libc::mount(tmpfs.as_ptr(), dir.as_ptr(), tmpfs.as_ptr(), 0, std::ptr::null()) } != 0 {
            return Err(format!("mounting a tmpfs on {dir:?}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}
