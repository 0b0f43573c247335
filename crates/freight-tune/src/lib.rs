//! DDS settings for large samples over lossy, outage-prone links (WiFi), derived from what
//! a user knows about a stream and a link.
//!
//! [`tune`] is a pure function from [`Inputs`] (publish rate, payload size, link rate, MTU,
//! packet loss, longest outage, latency budget) to a [`Profile`]: every setting the three
//! tunings need, with the intermediate quantities that justify them. The renderers turn a
//! profile into files a stock ROS 2 stack reads, each value commented with its reason:
//! [`render::cyclonedds_xml`], [`render::fastdds_xml`], [`render::ros2_qos_yaml`]; and
//! [`Profile::explain`] gives the same reasons as table rows. Nothing here does I/O, so
//! freight's own network plane can call [`tune`] and apply the profile itself.
//!
//! The three tunings (the formulas and their derivation are in `docs/tuning.md`):
//!
//! * (a) **one RTPS message per IP packet**: messages of at most MTU − 28 bytes (IPv4 and
//!   UDP headers), first sends and retransmits alike, so a lost packet costs one fragment
//!   and not a 64 KB datagram of 45 IP fragments;
//! * (b) **repair as fast as the stream**: heartbeats at twice the publish rate, short NACK
//!   and response delays, and a history long enough that a sample is not replaced before
//!   the repair rounds its loss needs have happened;
//! * (c) **a bounded history** (N_HC) whose backlog after an outage drains within the
//!   latency budget on the link's spare capacity, with a lease that outlives the outage and
//!   socket buffers that hold a few samples.
//!
//! ```
//! use freight_tune::{tune, Inputs};
//!
//! // 512 KiB point clouds at 30 Hz over 802.11ac (433 Mbit/s), defaults otherwise:
//! // MTU 1500, 1 % loss, 20 s outage, 100 ms latency budget.
//! let profile = tune(&Inputs::new(30.0, 512 << 10, 433e6))?;
//! assert_eq!(profile.max_message_size, 1472);
//! assert_eq!(profile.fragment_size, 1344);
//! assert_eq!(profile.history_depth, 4);
//! let xml = freight_tune::render::cyclonedds_xml(&profile);
//! assert!(xml.contains("<MaxMessageSize>1472B</MaxMessageSize>"));
//! # Ok::<(), freight_tune::TuneError>(())
//! ```
#![deny(missing_docs)]

mod domain;
pub mod render;
pub mod units;

use std::time::Duration;

/// IPv4 header (20 B, no options) plus UDP header (8 B): what an IP packet of MTU bytes
/// spends before the RTPS message starts.
pub const IP_UDP_HEADER: u32 = 28;

/// Bytes of an RTPS message that are not sample data, when the message carries one
/// DATA_FRAG: RTPS header 20, INFO_DST 16, INFO_TS 12, DATA_FRAG header 36, a piggybacked
/// HEARTBEAT 32 (116 in all), rounded up to 128 for alignment padding and an inline-QoS
/// sentinel. At MTU 1500 this gives Cyclone's own default fragment size, 1344 B.
pub const RTPS_FRAGMENT_OVERHEAD: u32 = 128;

/// The largest UDP payload sent, whatever the MTU: loopback's MTU is 64 KiB, and 65,500 B
/// is the largest datagram every DDS stack accepts (Fast DDS's default `maxMessageSize`).
pub const MAX_DATAGRAM: u32 = 65_500;

/// The datagram and fragment sizes for a link of `mtu` bytes, `(max_message_size,
/// fragment_size)`: one RTPS message per IP packet (MTU − 28, at most [`MAX_DATAGRAM`]),
/// and the sample bytes a DATA_FRAG in it carries (128 B less, a multiple of 4, which keeps
/// the next submessage aligned without padding). Valid for `mtu` ≥ [`MIN_MTU`], which
/// leaves at least 420 sample bytes per packet.
///
/// ```
/// assert_eq!(freight_tune::datagram_sizes(1500), (1472, 1344));
/// assert_eq!(freight_tune::datagram_sizes(65536), (65500, 65372)); // loopback
/// ```
pub fn datagram_sizes(mtu: u32) -> (u32, u32) {
    let max_message_size = mtu.saturating_sub(IP_UDP_HEADER).min(MAX_DATAGRAM);
    (max_message_size, max_message_size.saturating_sub(RTPS_FRAGMENT_OVERHEAD) / 4 * 4)
}

/// The CDR encapsulation header in front of every serialized sample.
pub const CDR_ENCAPSULATION: u64 = 4;

/// The smallest MTU accepted: the IPv4 minimum reassembly size every host must accept
/// (RFC 791). Below it one RTPS message with a useful fragment no longer fits a packet.
pub const MIN_MTU: u32 = 576;

/// Largest accepted MTU: the largest IPv4 packet.
pub const MAX_MTU: u32 = 65535;

/// Loss at or above this fraction is refused: ACKNACKs and heartbeats are lost as often as
/// data, repair needs more rounds than any history can wait for, and the link needs fixing
/// rather than tuning.
pub const MAX_LOSS: f64 = 0.5;

/// The probability, per sample, that its loss is still not repaired when the history
/// replaces it: at most one sample in a thousand. Sets the number of repair rounds.
pub const UNREPAIRED_TARGET: f64 = 1e-3;

/// Cyclone DDS's default participant lease; the tuned lease is never shorter.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// What the tuner needs to know. [`Inputs::new`] fills the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// Publish rate in Hz (`--rate`).
    pub rate_hz: f64,
    /// Serialized size of one message in bytes, as `ros2 topic bw` counts it (`--payload`).
    pub payload_bytes: u64,
    /// The rate IP packets actually move over the link, bits per second (`--link`). A
    /// radio's PHY rate is an upper bound; a measured `iperf3 -u` rate is better.
    pub link_bps: f64,
    /// The link's MTU in bytes (`--mtu`, default 1500).
    pub mtu: u32,
    /// Expected fraction of IP packets lost, 0 ≤ loss < 0.5 (`--loss`, default 1 %).
    pub loss: f64,
    /// Longest outage the stream must ride through without losing the match (`--outage`,
    /// default 20 s: the paper's outage experiment).
    pub outage: Duration,
    /// How late a sample may arrive after the link returns (`--latency-budget`, default
    /// 100 ms): the backlog left by an outage must drain within it.
    pub latency_budget: Duration,
    /// Round trip of the unloaded link (`--rtt`, default 5 ms, a typical WiFi hop).
    pub rtt: Duration,
    /// Heartbeats per published sample (`--heartbeats-per-sample`, default 2: the paper's
    /// "repair at twice the publish rate").
    pub heartbeats_per_sample: f64,
    /// The ROS 2 topic `ros2_qos.yaml` overrides (`--topic`, default `/points`, a
    /// placeholder to replace with the real topic).
    pub topic: String,
}

impl Inputs {
    /// Inputs with the given rate, payload and link, and the defaults for the rest:
    /// MTU 1500, loss 1 %, outage 20 s, latency budget 100 ms, RTT 5 ms, two heartbeats per
    /// sample, topic `/points`.
    pub fn new(rate_hz: f64, payload_bytes: u64, link_bps: f64) -> Self {
        Inputs {
            rate_hz,
            payload_bytes,
            link_bps,
            mtu: 1500,
            loss: 0.01,
            outage: Duration::from_secs(20),
            latency_budget: Duration::from_millis(100),
            rtt: Duration::from_millis(5),
            heartbeats_per_sample: 2.0,
            topic: "/points".into(),
        }
    }
}

/// Why the inputs cannot be tuned. Each message names the input to change (by its
/// `freight tune` flag) and, where one exists, a value that would work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    /// The publish rate is zero, negative or not a number.
    #[error("--rate {rate_hz} Hz is not a publish rate; give a positive rate such as 30")]
    RateNotPositive {
        /// The rate given.
        rate_hz: f64,
    },
    /// The payload is empty.
    #[error("--payload is 0 bytes; give the serialized message size, such as 512KiB")]
    PayloadZero,
    /// The link rate is zero, negative or not a number.
    #[error("--link {link_bps} bit/s is not a link rate; give a positive rate such as 433Mbit")]
    LinkNotPositive {
        /// The link rate given.
        link_bps: f64,
    },
    /// The MTU is below the IPv4 minimum.
    #[error(
        "--mtu {mtu} is below {MIN_MTU}, the smallest packet every IPv4 host must accept; \
         give the link's MTU (1500 on Ethernet and WiFi)"
    )]
    MtuTooSmall {
        /// The MTU given.
        mtu: u32,
    },
    /// The MTU is above the largest IPv4 packet.
    #[error(
        "--mtu {mtu} is above {MAX_MTU}, the largest IPv4 packet; give the link's MTU (1500 on Ethernet and WiFi)"
    )]
    MtuTooLarge {
        /// The MTU given.
        mtu: u32,
    },
    /// The loss is negative, not a number, or too high for reliable transport to converge.
    #[error(
        "--loss {:.3} % is outside 0 % to {:.0} %: at that loss heartbeats and NACKs are lost as often \
         as data and no history waits long enough for repair; fix the link (move the antenna, \
         change the channel) or give a loss below {:.0} %",
        loss * 100.0, MAX_LOSS * 100.0, MAX_LOSS * 100.0
    )]
    LossOutOfRange {
        /// The loss given, as a fraction.
        loss: f64,
    },
    /// Fewer than one heartbeat per sample, or not a number.
    #[error(
        "--heartbeats-per-sample {given} is below 1: samples would wait for the next one to be \
         repaired; give 1 or more (2 is the paper's choice)"
    )]
    HeartbeatsTooFew {
        /// The value given.
        given: f64,
    },
    /// A zero latency budget.
    #[error("--latency-budget is 0; give how late a sample may arrive after an outage, such as 100ms")]
    BudgetZero,
    /// The topic is not a fully qualified ROS 2 topic name the YAML can carry.
    #[error(
        "--topic `{topic}` is not a fully qualified ROS 2 topic name; give one such as /points \
         (a leading `/`, then letters, digits, `_` and `/`)"
    )]
    BadTopic {
        /// The topic given.
        topic: String,
    },
    /// The stream, with its packet headers and its retransmissions, needs more than the link.
    #[error(
        "the stream needs {:.1} Mbit/s ({rate_hz} Hz x {payload_bytes} B in {packets} packets of \
         {mtu} B, x {:.3} for {:.1} % loss), more than the --link {:.1} Mbit/s; lower --rate to at \
         most {:.2} Hz, or --payload to at most {max_payload_bytes} B, or raise --link above {:.1} Mbit/s",
        needed_bps / 1e6, 1.0 / (1.0 - loss), loss * 100.0, link_bps / 1e6, max_rate_hz, needed_bps / 1e6
    )]
    LinkTooSlow {
        /// Bits per second the stream needs, loss overhead included.
        needed_bps: f64,
        /// The link rate given.
        link_bps: f64,
        /// The rate given.
        rate_hz: f64,
        /// The payload given.
        payload_bytes: u64,
        /// Packets per sample.
        packets: u64,
        /// The MTU given.
        mtu: u32,
        /// The loss given.
        loss: f64,
        /// The highest rate that fits (strictly less would leave spare capacity).
        max_rate_hz: f64,
        /// The largest payload that fits at the given rate (0 when none does).
        max_payload_bytes: u64,
    },
    /// No history depth both lets repair finish and drains an outage's backlog in budget.
    #[error(
        "no history depth fits the --latency-budget of {:.0} ms: repair at {:.1} % loss needs the \
         history to hold at least {depth_for_repair} samples ({repair_rounds} repair rounds of \
         {:.1} ms at {rate_hz} Hz), but after a {:.1} s outage the link's spare {:.1} Mbit/s drains \
         only {depth_for_budget} samples within the budget; raise --latency-budget to at least \
         {:.0} ms, or lower --outage to at most {:.3} s, or lower --loss, --payload or --rate, or \
         raise --link",
        budget.as_secs_f64() * 1e3, loss * 100.0, round.as_secs_f64() * 1e3, outage.as_secs_f64(),
        spare_bps / 1e6, budget_needed.as_secs_f64() * 1e3, max_outage.as_secs_f64()
    )]
    BudgetTooSmall {
        /// The budget given.
        budget: Duration,
        /// The smallest budget that admits `depth_for_repair`.
        budget_needed: Duration,
        /// The longest outage whose backlog drains within the given budget.
        max_outage: Duration,
        /// The outage given.
        outage: Duration,
        /// The depth repair needs.
        depth_for_repair: u64,
        /// The depth the budget allows.
        depth_for_budget: u64,
        /// Repair rounds the loss needs.
        repair_rounds: u32,
        /// Duration of one repair round.
        round: Duration,
        /// The loss given.
        loss: f64,
        /// The rate given.
        rate_hz: f64,
        /// Spare link capacity, bits per second.
        spare_bps: f64,
    },
}

/// Every derived setting, with the quantities it was derived from. Produced by [`tune`];
/// rendered by the functions in [`render`]; explained by [`Profile::explain`].
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The inputs this profile was derived from.
    pub inputs: Inputs,

    // (a) message size
    /// Largest UDP payload, first sends and retransmits: MTU − 28, at most 65,500 B.
    pub max_message_size: u32,
    /// Sample bytes per DATA_FRAG: `max_message_size − 128`, rounded down to a multiple of 4.
    pub fragment_size: u32,
    /// Serialized sample size: payload plus the 4-byte CDR encapsulation header.
    pub sample_bytes: u64,
    /// IP packets per sample: ⌈sample_bytes / fragment_size⌉.
    pub packets_per_sample: u64,
    /// Bytes one sample occupies on the link, counting every packet as a full MTU.
    pub wire_bytes_per_sample: u64,
    /// Expected transmissions per packet, 1 / (1 − loss).
    pub loss_factor: f64,
    /// Link capacity the stream takes, retransmissions included, bits per second.
    pub stream_bps: f64,
    /// Link capacity left over, bits per second: link − stream.
    pub spare_bps: f64,

    // (b) repair timing
    /// Heartbeat period: 1 / (heartbeats_per_sample × rate).
    pub heartbeat_period: Duration,
    /// Shortest periodic heartbeat interval Cyclone may use while the history fills
    /// (`minsched`), and the shortest gap between asynchronous heartbeats (`min`).
    pub heartbeat_min: Duration,
    /// Longest heartbeat interval, the latency budget: a writer whose heartbeats go
    /// unanswered (an outage) backs off to it, so it bounds the restart of repair.
    pub heartbeat_max: Duration,
    /// Delay before a reader NACKs and a writer answers a NACK: min(period / 4, 5 ms).
    pub response_delay: Duration,
    /// Cyclone's delay between identical ACKNACKs: min(period / 2, 10 ms).
    pub ack_delay: Duration,
    /// One repair round, worst case: a heartbeat period, two response delays, the RTT and
    /// the retransmission of the lost packets on the spare capacity.
    pub repair_round: Duration,
    /// Repair rounds after which a sample is complete with probability ≥ 1 − 10⁻³.
    pub repair_rounds: u32,
    /// The smallest depth whose lifetime covers the repair rounds: ⌈rate × rounds × round⌉.
    pub depth_for_repair: u64,

    // (c) history, lease, buffers
    /// Samples published during the outage: ⌈rate × outage⌉.
    pub outage_samples: u64,
    /// The largest backlog that drains within the budget on the spare capacity, when the
    /// outage can build one that large; `None` when the outage is too short to matter.
    pub depth_for_budget: Option<u64>,
    /// The writer (and reader) history depth N_HC, KEEP_LAST.
    pub history_depth: u64,
    /// How long a sample stays in the history before it is replaced: depth / rate.
    pub history_lifetime: Duration,
    /// How long the backlog of an outage takes to drain on the spare capacity.
    pub drain_time: Duration,
    /// Participant lease: max(10 s, 1.5 × outage), whole seconds.
    pub lease: Duration,
    /// Fast DDS participant announcement period: min(3 s, lease / 5).
    pub lease_announcement: Duration,
    /// Smallest acceptable socket receive buffer: three samples on the wire, at least
    /// 1 MiB, in whole MiB.
    pub socket_buffer_min: u64,
    /// Socket buffer size requested: twice the minimum.
    pub socket_buffer_request: u64,
    /// Cyclone's writer-history high-water mark in bytes: (depth + 1) samples.
    pub whc_high: u64,
    /// Bytes Cyclone may queue for retransmission: the whole history on the wire.
    pub max_rexmit_bytes: u64,
    /// Messages Cyclone may queue for retransmission: the whole history's packets.
    pub max_rexmit_messages: u64,
    /// Samples a Cyclone reader may be reassembling at once: max(16, depth).
    pub defrag_samples: u64,
}

/// Derives a [`Profile`] from [`Inputs`]; see the crate documentation and `docs/tuning.md`
/// for the formulas.
///
/// ```
/// use std::time::Duration;
/// use freight_tune::{tune, Inputs, TuneError};
///
/// let mut inputs = Inputs::new(30.0, 512 << 10, 433e6);
/// inputs.loss = 0.20;
/// // 20 % loss needs a history the 100 ms budget cannot drain after a 20 s outage:
/// let err = tune(&inputs).unwrap_err();
/// assert!(matches!(err, TuneError::BudgetTooSmall { .. }));
/// assert!(err.to_string().contains("--latency-budget"));
/// // without an outage to ride through, it tunes:
/// inputs.outage = Duration::ZERO;
/// assert!(tune(&inputs)?.history_depth >= 9);
/// # Ok::<(), TuneError>(())
/// ```
pub fn tune(inputs: &Inputs) -> Result<Profile, TuneError> {
    validate(inputs)?;
    let i = inputs;
    let rate = i.rate_hz;
    let p = i.loss;

    // (a) One RTPS message per IP packet.
    let (max_message_size, fragment_size) = datagram_sizes(i.mtu);
    let sample_bytes = i.payload_bytes + CDR_ENCAPSULATION;
    let packets_per_sample = sample_bytes.div_ceil(u64::from(fragment_size));
    // Every packet counted as a full MTU: the last one is usually shorter, the link layer's
    // own headers are not counted; the two roughly cancel and the error is on the safe side
    // for samples of many packets.
    let wire_bytes_per_sample = packets_per_sample * u64::from(i.mtu);
    let wire_bits = wire_bytes_per_sample as f64 * 8.0;
    let loss_factor = 1.0 / (1.0 - p);
    let sample_bits_sent = wire_bits * loss_factor;
    let stream_bps = rate * sample_bits_sent;
    if stream_bps >= i.link_bps {
        let max_rate_hz = i.link_bps / sample_bits_sent;
        let packets_fit = (i.link_bps / (rate * loss_factor * f64::from(i.mtu) * 8.0)).floor() as u64;
        let max_payload_bytes = (packets_fit * u64::from(fragment_size)).saturating_sub(CDR_ENCAPSULATION);
        return Err(TuneError::LinkTooSlow {
            needed_bps: stream_bps,
            link_bps: i.link_bps,
            rate_hz: rate,
            payload_bytes: i.payload_bytes,
            packets: packets_per_sample,
            mtu: i.mtu,
            loss: p,
            max_rate_hz,
            max_payload_bytes,
        });
    }
    let spare_bps = i.link_bps - stream_bps;

    // (b) Repair timing from the publish rate.
    let period = 1.0 / rate;
    let heartbeat = period / i.heartbeats_per_sample;
    let response = (heartbeat / 4.0).min(0.005);
    let ack_delay = (heartbeat / 2.0).min(0.010);
    let heartbeat_min = heartbeat / 4.0;
    // After an outage the first heartbeat comes at most this late; it starts the repair
    // that lets fresh samples through, so it is the latency budget.
    let heartbeat_max = heartbeat.max(i.latency_budget.as_secs_f64());
    // The lost part of a sample, resent on what the stream leaves of the link.
    let retransmit = p * wire_bits / spare_bps;
    let round = heartbeat + 2.0 * response + i.rtt.as_secs_f64() + retransmit;
    let repair_rounds = repair_rounds(packets_per_sample, p);
    let depth_for_repair = ceil_count(rate * f64::from(repair_rounds) * round).max(1);

    // (c) The history bound from the outage backlog and the latency budget.
    let outage_samples = ceil_count(rate * i.outage.as_secs_f64());
    let budget = i.latency_budget.as_secs_f64();
    let drains_in_budget = (budget * spare_bps / sample_bits_sent + 1e-9).floor() as u64;
    let depth_for_budget = (outage_samples > drains_in_budget).then_some(drains_in_budget);
    if let Some(allowed) = depth_for_budget {
        if allowed < depth_for_repair {
            let budget_needed = depth_for_repair as f64 * sample_bits_sent / spare_bps;
            // An outage shorter than this publishes no more samples than drain in budget.
            let max_outage = drains_in_budget as f64 / rate;
            return Err(TuneError::BudgetTooSmall {
                budget: i.latency_budget,
                budget_needed: secs_up(budget_needed, 1e-3),
                max_outage: Duration::from_secs_f64(max_outage),
                outage: i.outage,
                depth_for_repair,
                depth_for_budget: allowed,
                repair_rounds,
                round: Duration::from_secs_f64(round),
                loss: p,
                rate_hz: rate,
                spare_bps,
            });
        }
    }
    // Twice the repair minimum when the budget allows it: the round is an estimate (the RTT
    // is a guess, losses come in bursts on a radio), and the margin is what keeps a sample
    // repairable when the estimate is short. Never more than the budget allows.
    let history_depth = match depth_for_budget {
        Some(allowed) => (2 * depth_for_repair).min(allowed).max(depth_for_repair),
        None => 2 * depth_for_repair,
    };
    let backlog = history_depth.min(outage_samples);
    let drain_time = backlog as f64 * sample_bits_sent / spare_bps;

    let lease = DEFAULT_LEASE.max(Duration::from_secs((1.5 * i.outage.as_secs_f64()).ceil() as u64));
    let lease_announcement = Duration::from_secs(3).min(lease / 5);

    const MIB: u64 = 1 << 20;
    let socket_buffer_min = (3 * wire_bytes_per_sample).max(MIB).div_ceil(MIB) * MIB;

    Ok(Profile {
        inputs: inputs.clone(),
        max_message_size,
        fragment_size,
        sample_bytes,
        packets_per_sample,
        wire_bytes_per_sample,
        loss_factor,
        stream_bps,
        spare_bps,
        heartbeat_period: secs_nearest(heartbeat),
        heartbeat_min: secs_nearest(heartbeat_min),
        heartbeat_max: secs_nearest(heartbeat_max),
        response_delay: secs_nearest(response),
        ack_delay: secs_nearest(ack_delay),
        repair_round: secs_nearest(round),
        repair_rounds,
        depth_for_repair,
        outage_samples,
        depth_for_budget,
        history_depth,
        history_lifetime: secs_nearest(history_depth as f64 / rate),
        drain_time: secs_nearest(drain_time),
        lease,
        lease_announcement,
        socket_buffer_min,
        socket_buffer_request: 2 * socket_buffer_min,
        whc_high: (history_depth + 1) * sample_bytes,
        max_rexmit_bytes: history_depth * wire_bytes_per_sample,
        max_rexmit_messages: history_depth * packets_per_sample,
        defrag_samples: history_depth.max(16),
    })
}

fn validate(i: &Inputs) -> Result<(), TuneError> {
    if !(i.rate_hz.is_finite() && i.rate_hz > 0.0) {
        return Err(TuneError::RateNotPositive { rate_hz: i.rate_hz });
    }
    if i.payload_bytes == 0 {
        return Err(TuneError::PayloadZero);
    }
    if !(i.link_bps.is_finite() && i.link_bps > 0.0) {
        return Err(TuneError::LinkNotPositive { link_bps: i.link_bps });
    }
    if i.mtu < MIN_MTU {
        return Err(TuneError::MtuTooSmall { mtu: i.mtu });
    }
    if i.mtu > MAX_MTU {
        return Err(TuneError::MtuTooLarge { mtu: i.mtu });
    }
    if !(i.loss.is_finite() && (0.0..MAX_LOSS).contains(&i.loss)) {
        return Err(TuneError::LossOutOfRange { loss: i.loss });
    }
    if !(i.heartbeats_per_sample.is_finite() && i.heartbeats_per_sample >= 1.0) {
        return Err(TuneError::HeartbeatsTooFew { given: i.heartbeats_per_sample });
    }
    if i.latency_budget.is_zero() {
        return Err(TuneError::BudgetZero);
    }
    let topic_ok = i.topic.len() > 1
        && i.topic.starts_with('/')
        && !i.topic.ends_with('/')
        && !i.topic.contains("//")
        && i.topic.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/');
    if !topic_ok {
        return Err(TuneError::BadTopic { topic: i.topic.clone() });
    }
    Ok(())
}

/// The smallest number of repair rounds k ≥ 1 after which a sample of `packets` packets,
/// each lost independently with probability `loss` on every transmission, is still
/// incomplete with probability at most [`UNREPAIRED_TARGET`]: packets × loss^(k+1) ≤ 10⁻³.
/// A packet is missing after k rounds only if its first send and all k resends were lost.
/// At least one round even without loss: a full receive buffer drops packets too.
pub fn repair_rounds(packets: u64, loss: f64) -> u32 {
    let mut k = 1;
    // loss < 0.5 bounds this loop: each round at least halves the term (k ≤ ~45 for 2^32
    // packets); the cap is for safety against a caller that skipped validation.
    while packets as f64 * loss.powi(k as i32 + 1) > UNREPAIRED_TARGET && k < 1000 {
        k += 1;
    }
    k
}

/// ⌈x⌉ as a count, tolerating the last bits of floating-point error (30 × 0.1 s is 3, not 4).
fn ceil_count(x: f64) -> u64 {
    (x - 1e-9).ceil().max(0.0) as u64
}

fn secs_nearest(s: f64) -> Duration {
    Duration::from_nanos((s * 1e9).round() as u64)
}

/// Seconds rounded up to a multiple of `step` seconds.
fn secs_up(s: f64, step: f64) -> Duration {
    Duration::from_secs_f64((s / step).ceil() * step)
}

/// One row of [`Profile::explain`]: a setting, its value, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// The setting, as the summary table names it.
    pub setting: &'static str,
    /// Its value, with its unit.
    pub value: String,
    /// One line: why this value, from which inputs.
    pub reason: String,
}

impl Profile {
    /// The derived values with one-line reasons, in the order of the three tunings; the
    /// summary table of `freight tune` and the comments of the rendered files use them.
    pub fn explain(&self) -> Vec<Explained> {
        let i = &self.inputs;
        let row = |setting, value: String, reason: String| Explained { setting, value, reason };
        let mut rows = vec![
            row(
                "RTPS message size",
                format!("{} B", self.max_message_size),
                format!(
                    "MTU {} - 28 (IPv4 20 + UDP 8): one message per IP packet, first sends and retransmits alike",
                    i.mtu
                ),
            ),
            row(
                "fragment size",
                format!("{} B", self.fragment_size),
                format!(
                    "{} - 128 for RTPS headers (RTPS 20, INFO_DST 16, INFO_TS 12, DATA_FRAG 36, HEARTBEAT 32, padding)",
                    self.max_message_size
                ),
            ),
            row(
                "packets per sample",
                self.packets_per_sample.to_string(),
                format!("{} B serialized (payload + 4 B CDR header) / {} B", self.sample_bytes, self.fragment_size),
            ),
            row(
                "stream on the link",
                mbit(self.stream_bps),
                format!(
                    "{} Hz x {} packets x {} B x {:.3} (1 / (1 - {}) for resends)",
                    i.rate_hz,
                    self.packets_per_sample,
                    i.mtu,
                    self.loss_factor,
                    percent(i.loss)
                ),
            ),
            row(
                "spare capacity",
                mbit(self.spare_bps),
                format!("link {} - stream: what repairs and an outage's backlog can use", mbit(i.link_bps)),
            ),
            row(
                "heartbeat period",
                ms(self.heartbeat_period),
                format!(
                    "1 / ({} x {} Hz): repair at {}x the publish rate",
                    i.heartbeats_per_sample, i.rate_hz, i.heartbeats_per_sample
                ),
            ),
            row(
                "NACK / response delay",
                ms(self.response_delay),
                "min(heartbeat / 4, 5 ms): answer within the same heartbeat period".into(),
            ),
            row(
                "repair round",
                ms(self.repair_round),
                format!(
                    "heartbeat + 2 delays + RTT {} + resending {} of a sample on the spare capacity",
                    ms(i.rtt),
                    percent(i.loss)
                ),
            ),
            row(
                "repair rounds needed",
                self.repair_rounds.to_string(),
                format!(
                    "{} packets x {}^(k+1) <= 1e-3: at most 1 sample in 1000 unrepaired",
                    self.packets_per_sample, i.loss
                ),
            ),
            row(
                "depth for repair",
                self.depth_for_repair.to_string(),
                format!(
                    "{} Hz x {} rounds x {}: a sample outlives its repair before the history replaces it",
                    i.rate_hz,
                    self.repair_rounds,
                    ms(self.repair_round)
                ),
            ),
        ];
        rows.push(match self.depth_for_budget {
            Some(allowed) => row(
                "depth for budget",
                allowed.to_string(),
                format!(
                    "{} x {} / ({} x {:.3}): samples the spare capacity drains within the budget",
                    ms(i.latency_budget),
                    mbit(self.spare_bps),
                    bytes(self.wire_bytes_per_sample),
                    self.loss_factor
                ),
            ),
            None => row(
                "depth for budget",
                "any".into(),
                format!(
                    "a {} outage leaves {} samples, which drain within {}",
                    secs(i.outage),
                    self.outage_samples,
                    ms(i.latency_budget)
                ),
            ),
        });
        rows.extend([
            row(
                "history depth (N_HC)",
                format!("{} (KEEP_LAST)", self.history_depth),
                "2 x depth for repair, capped by the budget: margin for a short RTT guess and bursty loss".into(),
            ),
            row(
                "history lifetime",
                ms(self.history_lifetime),
                format!("depth / rate; >= {} repair rounds of {}", self.repair_rounds, ms(self.repair_round)),
            ),
            row(
                "backlog drain after outage",
                ms(self.drain_time),
                format!(
                    "{} samples on the spare capacity; budget {}",
                    self.history_depth.min(self.outage_samples),
                    ms(i.latency_budget)
                ),
            ),
            row(
                "lease duration",
                secs(self.lease),
                format!("max(10 s, 1.5 x outage {}): the match survives the outage", secs(i.outage)),
            ),
            row(
                "socket receive buffer",
                format!("min {} (request {})", bytes(self.socket_buffer_min), bytes(self.socket_buffer_request)),
                format!(
                    "3 samples on the wire, >= 1 MiB; Linux needs net.core.rmem_max >= {}",
                    self.socket_buffer_request / 2
                ),
            ),
            row(
                "Cyclone WhcHigh",
                bytes(self.whc_high),
                format!("(depth + 1) x {} B: a full KEEP_LAST history never blocks the writer", self.sample_bytes),
            ),
            row(
                "Cyclone retransmit queue",
                format!("{} / {} messages", bytes(self.max_rexmit_bytes), self.max_rexmit_messages),
                "the whole history on the wire: an outage's backlog can be queued at once".into(),
            ),
        ]);
        rows
    }
}

pub(crate) fn mbit(bps: f64) -> String {
    format!("{:.1} Mbit/s", bps / 1e6)
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

pub(crate) fn percent(fraction: f64) -> String {
    format!("{}%", (fraction * 1e4).round() / 1e2)
}

pub(crate) fn bytes(b: u64) -> String {
    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    if b >= MIB && b.is_multiple_of(MIB) {
        format!("{} MiB", b / MIB)
    } else if b >= MIB {
        format!("{:.2} MiB", b as f64 / MIB as f64)
    } else if b >= KIB {
        format!("{:.1} KiB", b as f64 / KIB as f64)
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repair_rounds_grow_with_loss_and_packets() {
        assert_eq!(repair_rounds(1, 0.0), 1);
        assert_eq!(repair_rounds(391, 0.01), 2);
        assert_eq!(repair_rounds(391, 0.2), 8);
        assert!(repair_rounds(u32::MAX as u64, 0.49) < 60);
    }

    #[test]
    fn ceil_count_ignores_float_noise() {
        assert_eq!(ceil_count(30.0 * 0.1), 3);
        assert_eq!(ceil_count(3.0000001), 4);
        assert_eq!(ceil_count(0.0), 0);
    }
}
