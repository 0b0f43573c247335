//! Runs rows: the publisher loop, the subscriber loop, and the placement of the two sides.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use freight::clock::monotonic_ns;

use super::args::format_size;
use super::fanout::{latency_to_last, ChildPeers, Fanout, PeerLink};
use super::peer::PeerMsg;
use super::report::RowStats;
use super::stats::{percentile, Summary};
use super::sys::{pin_current_thread, CpuPlan};
use super::throughput;
use super::transport::{Header, Measure, Placement, PublisherEnd, RowConfig, SubscriberEnd, Transport, WaitMode};
use super::{BenchError, LatencyJob, MIN_SAMPLES, ROW_TIMEOUT, WARMUP_ITERATIONS, WARMUP_MAX};

/// How long one blocking call into a transport may last before the harness looks around
/// (peer still alive? row cancelled? deadline?). Short enough to notice a dead peer quickly,
/// long enough to cost nothing measurable.
const POLL_SLICE: Duration = Duration::from_millis(200);

/// Iteration and time budget of every row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    /// Measured round trips per row (upper bound).
    pub iterations: u64,
    /// Time limit of the measured part of a row.
    pub max_duration: Duration,
    /// Warm-up round trips (upper bound).
    pub warmup: u64,
    /// Time limit of the warm-up.
    pub warmup_max: Duration,
    /// Hard limit for the whole row.
    pub row_timeout: Duration,
}

impl RunPlan {
    /// A plan with the default warm-up and time limits.
    pub fn new(iterations: u64, max_duration: Duration) -> Result<Self, BenchError> {
        if iterations < MIN_SAMPLES {
            return Err(BenchError::new(
                format!("--iterations {iterations} is too small to compute a p99"),
                format!("use at least --iterations {MIN_SAMPLES}"),
            ));
        }
        Ok(Self {
            iterations,
            max_duration,
            warmup: WARMUP_ITERATIONS,
            warmup_max: WARMUP_MAX,
            row_timeout: ROW_TIMEOUT,
        })
    }

    /// Upper bound on the messages of one row, used to size sample buffers up front (so that
    /// the subscriber never reallocates in the middle of a row). Capped: a long `--duration`
    /// row simply grows the buffer.
    pub fn capacity(&self) -> usize {
        usize::try_from(self.iterations + self.warmup).unwrap_or(usize::MAX).min(1 << 22)
    }
}

/// What one row measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowOutcome {
    /// One-way latencies of the measured messages, nanoseconds, in send order: to the last
    /// subscriber when there are several.
    pub samples_ns: Vec<u64>,
    /// Time the publisher spent inside the transport's send for each measured message,
    /// nanoseconds (the loan, the header write and the publish); empty for inline rows,
    /// whose "send" is the transfer itself.
    pub publish_ns: Vec<u64>,
    /// Measured round trips.
    pub round_trips: u64,
    /// Wall time of the measured round trips.
    pub elapsed: Duration,
}

/// Decides when the warm-up ends and when the row is complete.
struct RowClock {
    plan: RunPlan,
    started: Instant,
    /// First measured sequence number and when it was sent.
    measuring: Option<(u64, Instant)>,
    elapsed: Duration,
}

/// Where the measured part of a row starts and how long it took.
struct Measured {
    warmup: u64,
    round_trips: u64,
    elapsed: Duration,
}

impl RowClock {
    fn new(plan: RunPlan) -> Self {
        Self { plan, started: Instant::now(), measuring: None, elapsed: Duration::ZERO }
    }

    /// Called before message `seq` is sent, after all earlier round trips completed. Returns
    /// `false` when the row is complete and `seq` must not be sent.
    fn before_send(&mut self, seq: u64) -> bool {
        let (first, t0) = match self.measuring {
            Some(m) => m,
            None => {
                let warm = seq >= self.plan.warmup || (seq >= 1 && self.started.elapsed() >= self.plan.warmup_max);
                if !warm {
                    return true;
                }
                let m = (seq, Instant::now());
                self.measuring = Some(m);
                m
            }
        };
        let measured = seq - first;
        let elapsed = t0.elapsed();
        if measured >= self.plan.iterations || (measured >= MIN_SAMPLES && elapsed >= self.plan.max_duration) {
            self.elapsed = elapsed;
            return false;
        }
        true
    }

    /// `sent` is the number of data messages sent (warm-up included).
    fn finish(&self, sent: u64) -> Measured {
        let warmup = self.measuring.map_or(sent, |(first, _)| first);
        Measured { warmup, round_trips: sent - warmup, elapsed: self.elapsed }
    }
}

/// A name unique to this bench run, from which every row derives its channel: a crashed
/// earlier run (or a concurrent one) can never collide with this one's services, even if the
/// pid was reused.
pub fn run_id() -> String {
    format!("{}-{:x}", std::process::id(), monotonic_ns() & 0xff_ffff)
}

/// Runs every row of a job, each with every subscriber count of `fanout`, and returns the
/// table rows, printing progress to stderr.
pub fn run_all(
    transports: &[Box<dyn Transport>],
    job: &LatencyJob,
    fanout: &Fanout,
) -> Result<Vec<RowStats>, BenchError> {
    let cpus = CpuPlan::detect();
    let run_id = run_id();

    // One measurement per (transport, wait, subscribers, size); inline transports have no wait
    // mode and are measured once per size, then reported under every wait.
    let mut plan: Vec<(&dyn Transport, Option<WaitMode>, usize, usize)> = Vec::new();
    for t in transports {
        let waits: Vec<Option<WaitMode>> = match t.placement() {
            Placement::Inline => vec![None],
            _ => job.waits.iter().copied().map(Some).collect(),
        };
        for wait in waits {
            for &n in fanout.counts() {
                plan.extend(job.sizes.iter().map(|&size| (t.as_ref(), wait, n, size)));
            }
        }
    }

    let mut rows = Vec::new();
    let total = plan.len();
    for (index, &(transport, wait, subscribers, size)) in plan.iter().enumerate() {
        let wait_label = wait.map_or("-", WaitMode::as_str);
        let fan_label = if fanout.shown() { format!(" x{subscribers}") } else { String::new() };
        let label = format!("{} {}{fan_label} {}", transport.name(), wait_label, format_size(size as u64));
        eprint!("[{}/{}] {label} ... ", index + 1, total);
        let row = RowConfig {
            subscribers,
            ..RowConfig::latency(
                transport.name(),
                wait.unwrap_or(WaitMode::Spin),
                size,
                format!("freight-bench/{run_id}/{index}"),
            )
        };
        let outcome = match run_row(transport, &row, &job.plan, &cpus) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("failed");
                return Err(e.context(label));
            }
        };
        let summary = Summary::new(&outcome.samples_ns, outcome.round_trips, outcome.elapsed).ok_or_else(|| {
            BenchError::new(
                format!("{label}: no samples were measured"),
                "this is a bug in the harness; please report it",
            )
        })?;
        eprintln!("p50 {:.2} µs ({} samples)", summary.p50_us, outcome.samples_ns.len());
        let waits = match wait {
            Some(w) => vec![w],
            None => job.waits.clone(),
        };
        let mut publish_sorted = outcome.publish_ns.clone();
        publish_sorted.sort_unstable();
        let publish_p50_us = percentile(&publish_sorted, 50.0).map(|ns| ns as f64 / 1_000.0);
        for w in waits {
            rows.push(RowStats {
                transport: transport.name().to_string(),
                wait: w.as_str().to_string(),
                size_bytes: size as u64,
                p50_us: summary.p50_us,
                p99_us: summary.p99_us,
                max_us: summary.max_us,
                msgs_per_s: summary.msgs_per_s,
                subscribers: fanout.shown().then_some(subscribers),
                publish_p50_us: if fanout.shown() { publish_p50_us } else { None },
            });
        }
    }
    Ok(rows)
}

/// Measures one row. The publisher (or the single inline thread) runs on a fresh thread so
/// that pinning it does not pin the main thread for the rest of the run.
pub fn run_row(t: &dyn Transport, row: &RowConfig, plan: &RunPlan, cpus: &CpuPlan) -> Result<RowOutcome, BenchError> {
    let deadline = Instant::now() + plan.row_timeout;
    on_publisher_thread(cpus.publisher, || match t.placement() {
        Placement::Inline => run_inline(t, row, plan, deadline),
        Placement::Threads => run_with_thread_peer(t, row, plan, cpus, deadline),
        Placement::Processes => with_process_peers(t, row, plan.capacity(), cpus, deadline, |end, link| {
            drive_publisher(end, link, plan, deadline)
        }),
        Placement::External => t.run_external(row, plan, cpus),
    })
}

/// Runs `side` on a fresh thread pinned to `cpu` and returns its result.
pub fn on_publisher_thread<T: Send>(
    cpu: Option<usize>,
    side: impl FnOnce() -> Result<T, BenchError> + Send,
) -> Result<T, BenchError> {
    std::thread::scope(|s| {
        let publisher = std::thread::Builder::new()
            .name("bench-publisher".into())
            .spawn_scoped(s, || {
                pin_current_thread(cpu);
                side()
            })
            .map_err(|e| thread_spawn_error("publisher", e))?;
        publisher.join().unwrap_or_else(|_| Err(panicked("publisher")))
    })
}

fn thread_spawn_error(which: &str, e: std::io::Error) -> BenchError {
    BenchError::new(
        format!("could not start the {which} thread: {e}"),
        "the system is out of threads or memory; close other programs and retry",
    )
}

fn panicked(which: &str) -> BenchError {
    BenchError::new(
        format!("the {which} thread panicked"),
        "this is a bug; please report it with the command line you used",
    )
}

fn run_inline(t: &dyn Transport, row: &RowConfig, plan: &RunPlan, deadline: Instant) -> Result<RowOutcome, BenchError> {
    let mut lb = t.open_loopback(row)?;
    let mut clock = RowClock::new(*plan);
    let mut samples = Vec::with_capacity(plan.capacity());
    let mut seq = 0u64;
    while clock.before_send(seq) {
        let mut arrival = None;
        lb.transfer(&mut || Header { seq, t_send_ns: monotonic_ns() }.to_bytes(), &mut |payload| {
            let header = Header::from_payload(payload);
            arrival = Some((header, monotonic_ns()));
        })?;
        match arrival {
            Some((Some(h), t_recv)) if h.seq == seq => {
                samples.push(t_recv.saturating_sub(h.t_send_ns));
            }
            _ => {
                return Err(BenchError::new(
                    format!("transport `{}` did not deliver message {seq} intact", t.name()),
                    "this is a bug in the transport's loopback",
                ))
            }
        }
        seq += 1;
        if Instant::now() >= deadline {
            return Err(row_timeout("the copy loop to finish"));
        }
    }
    let measured = clock.finish(seq);
    samples.drain(..measured.warmup as usize);
    Ok(RowOutcome {
        samples_ns: samples,
        publish_ns: Vec::new(),
        round_trips: measured.round_trips,
        elapsed: measured.elapsed,
    })
}

/// The error for a row that ran past its time limit while waiting for `what`.
pub fn row_timeout(what: &str) -> BenchError {
    BenchError::new(
        format!("gave up waiting for {what}: a row may take at most {} s", ROW_TIMEOUT.as_secs()),
        "the machine is overloaded or a transport is stuck; retry with fewer or smaller --sizes",
    )
}

fn run_with_thread_peer(
    t: &dyn Transport,
    row: &RowConfig,
    plan: &RunPlan,
    cpus: &CpuPlan,
    deadline: Instant,
) -> Result<RowOutcome, BenchError> {
    let mut end = t.open_publisher(row)?;
    let cancel = AtomicBool::new(false);
    let capacity = plan.capacity();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let cancel = &cancel;
        let subscriber = std::thread::Builder::new()
            .name("bench-subscriber".into())
            .spawn_scoped(s, move || {
                pin_current_thread(cpus.subscriber(0));
                let cancelled = || cancel.load(Ordering::Relaxed);
                subscriber_side(t, row, capacity, deadline, &cancelled, &mut |msg| {
                    // The publisher side may already have given up; nothing to do then.
                    let _ = tx.send((0, msg));
                });
            })
            .map_err(|e| thread_spawn_error("subscriber", e))?;
        let link = PeerLink::new(rx, 1, "the subscriber thread");
        let result = drive_publisher(end.as_mut(), &link, plan, deadline);
        if result.is_err() {
            cancel.store(true, Ordering::Relaxed);
        }
        let joined = subscriber.join();
        match (result, joined) {
            (_, Err(_)) => Err(panicked("subscriber")),
            (result, Ok(())) => result,
        }
    })
}

/// Runs a row whose subscribers are processes: opens the publisher end, starts
/// `row.subscribers` subscriber processes, and lets `drive` run the publisher side. On error
/// every child is killed and reaped, and what they printed is added to the error.
pub fn with_process_peers<T>(
    t: &dyn Transport,
    row: &RowConfig,
    capacity: usize,
    cpus: &CpuPlan,
    deadline: Instant,
    drive: impl FnOnce(&mut dyn PublisherEnd, &PeerLink) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    // Open our end first: the children may then simply open what we created.
    let mut end = t.open_publisher(row)?;
    let result = ChildPeers::spawn(row, capacity, cpus, deadline).and_then(|(mut children, link)| {
        let outcome = drive(end.as_mut(), &link).and_then(|outcome| {
            children.wait_exit(deadline)?;
            Ok(outcome)
        });
        outcome.map_err(|e| {
            let diagnostics = children.kill_and_collect();
            if diagnostics.trim().is_empty() {
                e
            } else {
                BenchError::new(format!("{} (subscriber process: {diagnostics})", e.what()), e.fix())
            }
        })
    });
    if result.is_err() {
        // Our end first: the cleanup below must not race with our own live ports.
        drop(end);
        t.after_peer_failed();
    }
    result
}

/// Runs the publisher side of a two-sided latency row, from "peers ready" to "samples
/// received". With several subscribers each message is acked by all of them before the next
/// is sent, and its latency is the one to the last subscriber.
fn drive_publisher(
    end: &mut dyn PublisherEnd,
    link: &PeerLink,
    plan: &RunPlan,
    deadline: Instant,
) -> Result<RowOutcome, BenchError> {
    link.wait_ready(deadline)?;

    let mut clock = RowClock::new(*plan);
    let mut publish_ns = Vec::with_capacity(plan.capacity());
    let mut seq = 0u64;
    while clock.before_send(seq) {
        publish_ns.push(round_trip(end, link, seq, deadline)?);
        seq += 1;
    }
    let measured = clock.finish(seq);
    round_trip(end, link, Header::STOP_SEQ, deadline)?;

    let per_subscriber = link.collect(deadline, "the samples", |msg| match msg {
        PeerMsg::Samples { samples_ns } => Ok(samples_ns),
        other => Err(other),
    })?;
    if let Some(short) = per_subscriber.iter().find(|s| s.len() as u64 != seq) {
        return Err(BenchError::new(
            format!("a subscriber reported {} samples for {seq} messages", short.len()),
            "messages were lost or duplicated; this is a bug in the transport",
        ));
    }
    let mut samples = latency_to_last(&per_subscriber);
    samples.drain(..measured.warmup as usize);
    publish_ns.drain(..measured.warmup as usize);
    Ok(RowOutcome { samples_ns: samples, publish_ns, round_trips: measured.round_trips, elapsed: measured.elapsed })
}

/// Sends message `seq`, timing only the transport's send (the harness owns the clock), and
/// returns the nanoseconds it took.
pub fn timed_send(end: &mut dyn PublisherEnd, seq: u64) -> Result<u64, BenchError> {
    let started = monotonic_ns();
    end.send(&mut || Header { seq, t_send_ns: monotonic_ns() }.to_bytes())?;
    Ok(monotonic_ns().saturating_sub(started))
}

/// Sends message `seq` and waits until every subscriber acked it. Returns the time spent
/// inside the send, as [`timed_send`].
fn round_trip(end: &mut dyn PublisherEnd, link: &PeerLink, seq: u64, deadline: Instant) -> Result<u64, BenchError> {
    let publish_ns = timed_send(end, seq)?;
    let mut acked = 0;
    while acked < link.peers() {
        if next_ack(end, link, seq, deadline, deadline)? {
            acked += 1;
        }
    }
    Ok(publish_ns)
}

/// Waits at most one poll slice, and not past `until`, for an ack of `seq`; returns whether
/// one came. Fails on an ack of another message, a failed or vanished subscriber, or at the
/// row's `deadline`.
pub fn next_ack(
    end: &mut dyn PublisherEnd,
    link: &PeerLink,
    seq: u64,
    until: Instant,
    deadline: Instant,
) -> Result<bool, BenchError> {
    let slice = (Instant::now() + POLL_SLICE).min(until).min(deadline);
    match end.wait_ack(slice)? {
        Some(ack) if ack == seq => Ok(true),
        Some(ack) => Err(BenchError::new(
            format!("got the ack for message {ack} while waiting for {seq}"),
            "messages were reordered or duplicated; this is a bug in the transport",
        )),
        None => {
            link.check()?;
            if Instant::now() >= deadline {
                return Err(row_timeout(&format!("the ack for message {seq}")));
            }
            Ok(false)
        }
    }
}

/// The subscriber side of a two-sided row, in the peer process or on a thread: opens the
/// subscriber end, reports readiness, receives and acks until the stop message, then reports
/// the samples (or the failure) through `report`.
///
/// `cancelled` is polled whenever no message arrived for a while: the publisher side gave up
/// (thread peer) or the parent process is gone (process peer).
pub fn subscriber_side(
    t: &dyn Transport,
    row: &RowConfig,
    capacity: usize,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
    report: &mut dyn FnMut(PeerMsg),
) {
    let outcome = t.open_subscriber(row).and_then(|mut end| {
        report(PeerMsg::Ready);
        match row.measure {
            Measure::Latency => subscribe(end.as_mut(), t.name(), capacity, deadline, cancelled)
                .map(|samples_ns| PeerMsg::Samples { samples_ns }),
            Measure::Throughput => throughput::count(end.as_mut(), t.name(), deadline, cancelled).map(PeerMsg::Counted),
        }
    });
    report(outcome.unwrap_or_else(|e| PeerMsg::Failed { what: e.what().to_string(), fix: e.fix().to_string() }));
}

/// Waits for the next message and returns its header and when it arrived
/// (`CLOCK_MONOTONIC`, read while the message is still held). Fails when the row's
/// `deadline` passes or `cancelled` says the publisher side is gone.
pub fn next_message(
    end: &mut dyn SubscriberEnd,
    transport: &str,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Header, u64), BenchError> {
    loop {
        let mut arrival = None;
        let slice = (Instant::now() + POLL_SLICE).min(deadline);
        let delivered = end.receive(slice, &mut |payload| {
            let header = Header::from_payload(payload);
            arrival = Some((header, monotonic_ns()));
        })?;
        if !delivered {
            if cancelled() {
                return Err(BenchError::new("the publisher side gave up on the row", "see the publisher side's error"));
            }
            if Instant::now() >= deadline {
                return Err(row_timeout("the next message"));
            }
            continue;
        }
        let Some((Some(header), t_recv)) = arrival else {
            return Err(BenchError::new(
                format!("transport `{transport}` delivered a message without a complete 16-byte header"),
                "this is a bug in the transport",
            ));
        };
        return Ok((header, t_recv));
    }
}

/// The subscriber's ping-pong loop: acks every message and records its latency until the stop
/// message.
fn subscribe(
    end: &mut dyn SubscriberEnd,
    transport: &str,
    capacity: usize,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<u64>, BenchError> {
    let mut samples: Vec<u64> = Vec::with_capacity(capacity);
    loop {
        let (header, t_recv) = next_message(end, transport, deadline, cancelled)?;
        end.ack(header.seq)?;
        if header.seq == Header::STOP_SEQ {
            return Ok(samples);
        }
        if header.seq != samples.len() as u64 {
            return Err(BenchError::new(
                format!("expected message {} but received {}", samples.len(), header.seq),
                "messages were lost or reordered; this is a bug in the transport",
            ));
        }
        samples.push(t_recv.saturating_sub(header.t_send_ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::transport::{SubscriberEnd, HEADER_LEN};
    use std::sync::mpsc::{Receiver, Sender};
    use std::sync::Mutex;

    /// The subscriber's halves of the channels, handed over from `open_publisher`.
    type SubscriberChannels = (Receiver<Vec<u8>>, Sender<u64>);

    /// A [`Placement::Threads`] transport over std channels, to exercise the two-thread path
    /// that freight's `intra` transport will take. `drop_every_message` makes the subscriber
    /// swallow messages without acking, to exercise the timeout and cancellation path.
    struct ChannelTransport {
        rendezvous: Mutex<Option<SubscriberChannels>>,
        drop_every_message: bool,
    }

    impl ChannelTransport {
        fn new(drop_every_message: bool) -> Self {
            Self { rendezvous: Mutex::new(None), drop_every_message }
        }
    }

    struct ChannelPublisher {
        data: Sender<Vec<u8>>,
        acks: Receiver<u64>,
        len: usize,
    }

    struct ChannelSubscriber {
        data: Receiver<Vec<u8>>,
        acks: Sender<u64>,
        drop_every_message: bool,
    }

    impl Transport for ChannelTransport {
        fn name(&self) -> &'static str {
            "test-channel"
        }
        fn placement(&self) -> Placement {
            Placement::Threads
        }
        fn open_publisher(&self, row: &RowConfig) -> Result<Box<dyn PublisherEnd>, BenchError> {
            let (data_tx, data_rx) = mpsc::channel();
            let (ack_tx, ack_rx) = mpsc::channel();
            *self.rendezvous.lock().unwrap() = Some((data_rx, ack_tx));
            Ok(Box::new(ChannelPublisher { data: data_tx, acks: ack_rx, len: row.wire_len() }))
        }
        fn open_subscriber(&self, _row: &RowConfig) -> Result<Box<dyn SubscriberEnd>, BenchError> {
            let (data, acks) = self.rendezvous.lock().unwrap().take().expect("publisher opened first");
            Ok(Box::new(ChannelSubscriber { data, acks, drop_every_message: self.drop_every_message }))
        }
    }

    impl PublisherEnd for ChannelPublisher {
        fn send(&mut self, stamp: &mut dyn FnMut() -> [u8; HEADER_LEN]) -> Result<(), BenchError> {
            let mut msg = vec![0; self.len];
            msg[..HEADER_LEN].copy_from_slice(&stamp());
            self.data.send(msg).map_err(|_| BenchError::new("subscriber gone", "-"))
        }
        fn wait_ack(&mut self, deadline: Instant) -> Result<Option<u64>, BenchError> {
            Ok(self.acks.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok())
        }
    }

    impl SubscriberEnd for ChannelSubscriber {
        fn receive(&mut self, deadline: Instant, on_message: &mut dyn FnMut(&[u8])) -> Result<bool, BenchError> {
            match self.data.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(_) if self.drop_every_message => Ok(false),
                Ok(msg) => {
                    on_message(&msg);
                    Ok(true)
                }
                Err(_) => Ok(false),
            }
        }
        fn ack(&mut self, seq: u64) -> Result<(), BenchError> {
            self.acks.send(seq).map_err(|_| BenchError::new("publisher gone", "-"))
        }
    }

    fn row(size: usize) -> RowConfig {
        RowConfig::latency("test-channel", WaitMode::Block, size, "test".into())
    }

    #[test]
    fn thread_peer_row_measures_every_iteration() {
        let t = ChannelTransport::new(false);
        let outcome = run_row(&t, &row(8), &plan(100, Duration::from_secs(30)), &CpuPlan::NONE).unwrap();
        assert_eq!(outcome.samples_ns.len(), 100);
        assert_eq!(outcome.round_trips, 100);
        assert!(outcome.elapsed > Duration::ZERO);
    }

    #[test]
    fn stuck_subscriber_times_out_and_is_cancelled() {
        let t = ChannelTransport::new(true);
        let mut p = plan(100, Duration::from_secs(30));
        p.row_timeout = Duration::from_millis(500);
        let started = Instant::now();
        let err = run_row(&t, &row(8), &p, &CpuPlan::NONE).unwrap_err();
        // Either side may give up first (the publisher waiting for its ack, or
        // the subscriber thread waiting for the next message); both end the row.
        assert!(err.what().contains("gave up waiting for the"), "{err}");
        // The subscriber thread noticed and ended too, or run_row would not have returned.
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    fn plan(iterations: u64, max_duration: Duration) -> RunPlan {
        RunPlan::new(iterations, max_duration).unwrap()
    }

    #[test]
    fn clock_counts_warmup_then_iterations() {
        let mut clock = RowClock::new(plan(100, Duration::from_secs(60)));
        let mut seq = 0;
        while clock.before_send(seq) {
            seq += 1;
        }
        let m = clock.finish(seq);
        assert_eq!(m.warmup, WARMUP_ITERATIONS);
        assert_eq!(m.round_trips, 100);
        assert_eq!(seq, WARMUP_ITERATIONS + 100);
    }

    #[test]
    fn clock_stops_on_duration_but_not_below_min_samples() {
        let mut clock = RowClock::new(plan(1_000_000, Duration::from_nanos(1)));
        let mut seq = 0;
        while clock.before_send(seq) {
            seq += 1;
        }
        assert_eq!(clock.finish(seq).round_trips, MIN_SAMPLES);
    }

    #[test]
    fn too_few_iterations_is_an_error() {
        let err = RunPlan::new(5, Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("at least --iterations 20"));
    }
}
