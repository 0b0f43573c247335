//! `freight bench throughput`: a publisher in a tight loop, N subscriber processes taking as
//! fast as they can.
//!
//! # Measurement protocol
//!
//! * **Sides.** The publisher runs on a thread of the bench process pinned to the first CPU;
//!   the N subscribers are the `bench peer` processes of the latency benchmark, pinned round
//!   robin to the other CPUs (see the `fanout` module). With fewer CPUs than N + 1 they share
//!   cores, and the numbers include the scheduler.
//! * **Publisher.** Once every subscriber reported ready, the publisher publishes for
//!   `--duration-per-row` seconds without pause: loan, write the 16-byte header (sequence
//!   number, `CLOCK_MONOTONIC`), publish; `shm-copy` copies the whole payload from a heap
//!   buffer instead. Nothing else is written into the payload and the subscribers read only the
//!   header, so GB/s is payload *made available* to each subscriber, not bytes touched.
//! * **Semantics: nobody waits for a slow subscriber.** freight's data topic is best effort,
//!   keep last 2 (as `SensorDataQoS` streams a camera): a message for a subscription whose
//!   queue is full is not delivered to it. Raw iceoryx2 keeps its default safe overflow: a full
//!   queue (2 samples) drops its oldest sample. Either way the publisher never blocks, and a
//!   subscriber that is slower than the publisher receives a subset: the table says how large
//!   (`received share`, of the messages published while it was receiving).
//! * **Greeting.** Before the run the publisher sends a greeting (`seq == u64::MAX - 1`)
//!   until every subscriber acked it once. A subscriber acks its stop message and exits at
//!   once, and with raw iceoryx2 a sample from a publisher the receiver never received from
//!   before is lost when that publisher's process exits first: iceoryx2 maps a publisher's
//!   data segment on the first sample taken from it (freight's publishers say farewell:
//!   `crates/freight/src/delivery/farewell.rs`). The greeting's ack maps each ack
//!   publisher's segment, so that both kinds of row run the same protocol.
//! * **Warm-up.** The first [`WARMUP_ITERATIONS`] messages are published but not counted by
//!   the subscribers, nor by the publisher's rate.
//! * **Counting.** Each subscriber counts the messages it took after the warm-up and the time
//!   from the first to the last of them; its rate is (count - 1) / that time. The row reports
//!   the smallest rate of its subscribers (msgs/s, and times the size as GB/s, 10^9 bytes)
//!   and the publisher's own rate.
//! * **End.** The publisher sends the stop message (`seq == u64::MAX`) until every subscriber
//!   acked it (a best-effort queue may be full when it is sent), then collects the counts.
//! * **Ratio.** `vs iceoryx2` is the row's received msgs/s divided by raw iceoryx2's with the
//!   same wait, subscribers and size, measured in the same run: above 1 is faster.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::args::{format_size, ThroughputArgs, TransportKind};
use super::fanout::{fans_out, refusal, Fanout, PeerLink};
use super::harness::{next_ack, next_message, on_publisher_thread, run_id, with_process_peers};
use super::peer::PeerMsg;
use super::report::{render_grid, write_json};
use super::sys::{print_stdout, quiet_iceoryx2_logs, CpuPlan};
use super::transport::{Header, Measure, PublisherEnd, RowConfig, SubscriberEnd};
use super::{check_output_path, resolve_transports, BenchError, ROW_TIMEOUT, WARMUP_ITERATIONS};

/// How long the publisher waits for the acks of a greeting or a stop message before it sends
/// it again: a best-effort queue that was full skipped it.
const RESEND: Duration = Duration::from_millis(20);

/// Sequence number of the greeting the publisher sends before the run.
const GREETING_SEQ: u64 = Header::STOP_SEQ - 1;

/// What one subscriber counted after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Messages taken.
    pub received: u64,
    /// Sequence numbers of the first and the last of them.
    pub first_seq: u64,
    /// See `first_seq`.
    pub last_seq: u64,
    /// Nanoseconds from taking the first to taking the last.
    pub span_ns: u64,
}

impl Counts {
    /// Messages per second this subscriber took; 0 with fewer than two messages.
    fn rate(&self) -> f64 {
        if self.received < 2 || self.span_ns == 0 {
            return 0.0;
        }
        (self.received - 1) as f64 / (self.span_ns as f64 / 1e9)
    }

    /// The share of the messages published while it was receiving that it took.
    fn share(&self) -> f64 {
        let window = self.last_seq.saturating_sub(self.first_seq) + 1;
        if self.received == 0 {
            0.0
        } else {
            self.received as f64 / window as f64
        }
    }
}

/// The subscriber's loop of a throughput row: takes every message it can and counts those
/// after the warm-up, until the stop message, which it acks.
pub fn count(
    end: &mut dyn SubscriberEnd,
    transport: &str,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> Result<Counts, BenchError> {
    let mut counts = Counts { received: 0, first_seq: 0, last_seq: 0, span_ns: 0 };
    let mut first_ns = 0;
    let mut greeted = false;
    loop {
        let (header, t_recv) = next_message(end, transport, deadline, cancelled)?;
        if header.seq == Header::STOP_SEQ {
            end.ack(header.seq)?;
            return Ok(counts);
        }
        if header.seq == GREETING_SEQ {
            // Acked once: the publisher counts one ack per subscriber.
            if !greeted {
                end.ack(header.seq)?;
                greeted = true;
            }
            continue;
        }
        if header.seq < WARMUP_ITERATIONS {
            continue;
        }
        if counts.received == 0 {
            counts.first_seq = header.seq;
            first_ns = t_recv;
        }
        counts.received += 1;
        counts.last_seq = header.seq;
        counts.span_ns = t_recv.saturating_sub(first_ns);
    }
}

/// One row of the throughput table. Serialized as-is into the `--json` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRow {
    /// Transport name, e.g. `shm-loan`.
    pub transport: String,
    /// `spin` or `block`: how the subscribers waited.
    pub wait: String,
    /// Subscriber processes.
    pub subscribers: usize,
    /// Payload size in bytes.
    pub size_bytes: u64,
    /// Messages per second the publisher published after the warm-up.
    pub published_per_s: f64,
    /// Messages per second taken by the slowest subscriber.
    pub received_per_s: f64,
    /// Payload GB/s (10^9 bytes) made available to the slowest subscriber.
    pub received_gb_per_s: f64,
    /// The smallest share, over the subscribers, of the messages published while a subscriber
    /// was receiving that it took (1: it missed none).
    pub received_share: f64,
}

/// Entry point of `freight bench throughput`: measures every row, prints the table, writes the
/// optional JSON file.
pub fn run(args: &ThroughputArgs) -> Result<Vec<ThroughputRow>, BenchError> {
    quiet_iceoryx2_logs();
    let mut kinds: Vec<TransportKind> = Vec::new();
    for &t in &args.transports {
        if !kinds.contains(&t) {
            kinds.push(t);
        }
    }
    let refused: Vec<&str> = kinds.iter().filter(|&&t| !fans_out(t)).map(|t| t.as_str()).collect();
    if !refused.is_empty() {
        return Err(refusal(&refused, "be measured for throughput"));
    }
    let fanout = Fanout::new(&args.subscribers, &kinds)?;
    let names: Vec<&str> = kinds.iter().map(|t| t.as_str()).collect();
    let transports = resolve_transports(&names)?;
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    let mut sizes = Vec::new();
    for &size in &args.sizes {
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }

    let cpus = CpuPlan::detect();
    let run_id = run_id();
    let mut plan = Vec::new();
    for t in &transports {
        for wait in args.wait.modes() {
            for &n in fanout.counts() {
                plan.extend(sizes.iter().map(|&size| (t.as_ref(), wait, n, size)));
            }
        }
    }
    let mut rows = Vec::new();
    for (index, &(t, wait, subscribers, size)) in plan.iter().enumerate() {
        let label = format!("{} {} x{subscribers} {}", t.name(), wait.as_str(), format_size(size as u64));
        eprint!("[{}/{}] {label} ... ", index + 1, plan.len());
        let row = RowConfig {
            subscribers,
            measure: Measure::Throughput,
            ..RowConfig::latency(t.name(), wait, size, format!("freight-bench/{run_id}/t{index}"))
        };
        let deadline = Instant::now() + args.duration_per_row + ROW_TIMEOUT;
        let duration = args.duration_per_row;
        let measured = on_publisher_thread(cpus.publisher, || {
            with_process_peers(t, &row, 0, &cpus, deadline, |end, link| drive(end, link, duration, deadline))
        });
        let (published_per_s, counts) = match measured {
            Ok(m) => m,
            Err(e) => {
                eprintln!("failed");
                return Err(e.context(label));
            }
        };
        let slowest = counts.iter().map(Counts::rate).fold(f64::INFINITY, f64::min);
        let share = counts.iter().map(Counts::share).fold(f64::INFINITY, f64::min);
        eprintln!("{slowest:.0} msgs/s to the slowest subscriber");
        rows.push(ThroughputRow {
            transport: t.name().to_string(),
            wait: wait.as_str().to_string(),
            subscribers,
            size_bytes: size as u64,
            published_per_s,
            received_per_s: slowest,
            received_gb_per_s: slowest * size as f64 / 1e9,
            received_share: share,
        });
    }
    print_stdout(&render(&rows));
    if let Some(path) = &args.json {
        write_json(path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(rows)
}

/// The publisher side of a throughput row: publishes for `duration`, stops every subscriber,
/// and returns its own rate and each subscriber's counts.
fn drive(
    end: &mut dyn PublisherEnd,
    link: &PeerLink,
    duration: Duration,
    deadline: Instant,
) -> Result<(f64, Vec<Counts>), BenchError> {
    link.wait_ready(deadline)?;
    until_every_peer_acked(end, link, GREETING_SEQ, deadline)?;
    let mut seq = 0u64;
    let mut started = Instant::now();
    loop {
        if seq == WARMUP_ITERATIONS {
            started = Instant::now();
        }
        if seq > WARMUP_ITERATIONS && started.elapsed() >= duration {
            break;
        }
        end.send(&mut || Header { seq, t_send_ns: freight::clock::monotonic_ns() }.to_bytes())?;
        seq += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let published_per_s = (seq - WARMUP_ITERATIONS) as f64 / elapsed;

    until_every_peer_acked(end, link, Header::STOP_SEQ, deadline)?;
    let counts = link.collect(deadline, "its counts", |msg| match msg {
        PeerMsg::Counted(counts) => Ok(counts),
        other => Err(other),
    })?;
    Ok((published_per_s, counts))
}

/// Sends message `seq` every [`RESEND`] until each subscriber acked it once.
fn until_every_peer_acked(
    end: &mut dyn PublisherEnd,
    link: &PeerLink,
    seq: u64,
    deadline: Instant,
) -> Result<(), BenchError> {
    let mut acked = 0;
    while acked < link.peers() {
        end.send(&mut || Header { seq, t_send_ns: freight::clock::monotonic_ns() }.to_bytes())?;
        let resend_at = Instant::now() + RESEND;
        while acked < link.peers() && Instant::now() < resend_at {
            if next_ack(end, link, seq, resend_at, deadline)? {
                acked += 1;
            }
        }
    }
    Ok(())
}

/// The "vs iceoryx2" cell: received msgs/s over raw iceoryx2's in the same run, same wait,
/// subscribers and size.
fn vs_iceoryx2(row: &ThroughputRow, rows: &[ThroughputRow]) -> String {
    if row.transport == "iceoryx2" {
        return "baseline".to_string();
    }
    rows.iter()
        .find(|b| {
            b.transport == "iceoryx2"
                && b.wait == row.wait
                && b.subscribers == row.subscribers
                && b.size_bytes == row.size_bytes
        })
        .filter(|b| b.received_per_s > 0.0)
        .map_or_else(|| "-".to_string(), |b| format!("{:.2}x", row.received_per_s / b.received_per_s))
}

/// Renders the throughput table.
pub fn render(rows: &[ThroughputRow]) -> String {
    let header = [
        "transport",
        "wait",
        "subs",
        "size",
        "published msgs/s",
        "received msgs/s",
        "received GB/s",
        "received share",
        "vs iceoryx2",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.transport.clone(),
                r.wait.clone(),
                r.subscribers.to_string(),
                format_size(r.size_bytes),
                format!("{:.0}", r.published_per_s),
                format!("{:.0}", r.received_per_s),
                format!("{:.2}", r.received_gb_per_s),
                format!("{:.0} %", r.received_share * 100.0),
                vs_iceoryx2(r, rows),
            ]
        })
        .collect();
    render_grid(&header, &body, 2, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(transport: &str, n: usize, received: f64) -> ThroughputRow {
        ThroughputRow {
            transport: transport.into(),
            wait: "spin".into(),
            subscribers: n,
            size_bytes: 1 << 20,
            published_per_s: 2.0 * received,
            received_per_s: received,
            received_gb_per_s: received * (1 << 20) as f64 / 1e9,
            received_share: 0.5,
        }
    }

    #[test]
    fn rates_and_shares_come_from_the_counts() {
        let c = Counts { received: 11, first_seq: 100, last_seq: 119, span_ns: 1_000_000 };
        assert_eq!(c.rate(), 10_000.0);
        assert_eq!(c.share(), 11.0 / 20.0);
        let one = Counts { received: 1, first_seq: 60, last_seq: 60, span_ns: 0 };
        assert_eq!(one.rate(), 0.0);
        assert_eq!(one.share(), 1.0);
    }

    #[test]
    fn table_compares_with_iceoryx2_of_the_same_subscriber_count() {
        let rows = vec![row("iceoryx2", 1, 1000.0), row("iceoryx2", 8, 400.0), row("shm-loan", 8, 300.0)];
        assert_eq!(vs_iceoryx2(&rows[2], &rows), "0.75x");
        assert_eq!(vs_iceoryx2(&rows[0], &rows), "baseline");
        let table = render(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("transport | wait | subs |  size | published msgs/s"), "{table}");
        assert!(lines[4].contains(" 50 % |") && lines[4].ends_with("0.75x"), "{table}");
    }
}
