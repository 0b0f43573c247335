//! A worker process of the soak (the hidden `freight bench soak-worker`): the endpoints of
//! its role, a thread that reads commands, and the publish and take loops, each reporting
//! on stdout ([`super::protocol`]).
//!
//! A worker lives until it is told to exit, its stdin closes (the controller is gone) or
//! the controller's death kills it (`PR_SET_PDEATHSIG`): no worker outlives a soak.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight::backend::AllocError;
use freight::clock::monotonic_ns;
use freight::{
    BackendKind, BackendSet, Context, DdsConfig, Limits, LoanError, Node, PublishError, Publisher, PublisherOptions,
    QoS, Sample, Subscription, SubscriptionOptions, TakeError, Transport,
};
use freight_dds::DdsError;

use super::accounting::Tracker;
use super::payload::{self, SoakFrame, Stamp, HEADER_LEN};
use super::protocol::{
    Command, Excuse, Fault, Mode, PubStats, Report, Runs, SubStats, Topology, DOMAIN, REPORT_PERIOD,
};
use super::rng::Rng;
use super::schedule;
use super::{SoakWorkerArgs, STALE_MARGIN};

/// Exit status of a worker whose controller is gone (stdout or stdin closed).
const ORPHANED: i32 = 3;
/// Exit status of a worker that could not set up its endpoints.
const SETUP_FAILED: u8 = 2;
/// Cyclone DDS's `DDS_RETCODE_TIMEOUT`, which calls return negated: a reliable write that
/// found no room in the writer's history within `max_blocking_time`.
const DDS_RETCODE_TIMEOUT: i32 = 10;
/// How long one `take` waits before the loop looks at its commands again.
const TAKE_SLICE: Duration = Duration::from_millis(100);

/// The QoS of every endpoint: reliable, keep all (within `Limits::max_depth`, [`LOCAL_DEPTH`]
/// on the local plane), so that a publisher waits for room and never overwrites. With
/// keep-last history a slow or stopped reader misses messages and the publisher goes on,
/// which ROS 2 allows and the loss check would count.
pub fn qos() -> QoS {
    QoS::keep_all()
}

/// The local queues' length.
const LOCAL_DEPTH: usize = 4;

/// Messages a second a publisher sends.
fn rate(topology: Topology) -> u32 {
    match topology {
        Topology::Dds => 50,
        _ => 100,
    }
}

/// Writes one report line; a controller that stopped reading ends the worker.
fn emit(report: &Report) {
    let line = match serde_json::to_string(report) {
        Ok(l) => l,
        Err(e) => format!("{{\"report\":\"error\",\"what\":\"cannot encode a report: {e}\"}}"),
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(ORPHANED);
    }
}

/// What the controller asked for, shared by the worker's threads.
struct Control {
    mode: AtomicU8,
    /// Mode commands so far: each one, even one that repeats the mode, is answered with a
    /// [`Report::Mode`] (the controller learns where the settle phase begins).
    epoch: AtomicU32,
    stop: AtomicBool,
    finish: AtomicBool,
    exit: AtomicBool,
}

impl Control {
    /// Starts the thread that reads commands from stdin.
    fn start(mode: Mode) -> Arc<Control> {
        let control = Arc::new(Control {
            mode: AtomicU8::new(mode as u8),
            epoch: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            finish: AtomicBool::new(false),
            exit: AtomicBool::new(false),
        });
        let c = control.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match Command::parse(&line) {
                    Some(Command::Mode(m)) => {
                        c.mode.store(m as u8, Ordering::Release);
                        c.epoch.fetch_add(1, Ordering::AcqRel);
                    }
                    Some(Command::Stop) => c.stop.store(true, Ordering::Release),
                    Some(Command::Finish) => c.finish.store(true, Ordering::Release),
                    Some(Command::Exit) => {
                        c.exit.store(true, Ordering::Release);
                        return;
                    }
                    None => emit(&Report::Error { what: format!("unknown command {line:?}") }),
                }
            }
            // The controller is gone without a word: nobody reads what this worker does.
            std::process::exit(ORPHANED);
        });
        control
    }

    /// The mode, and how many mode commands came so far.
    fn mode(&self) -> (Mode, u32) {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mode = if self.mode.load(Ordering::Acquire) == Mode::Chaos as u8 { Mode::Chaos } else { Mode::Steady };
        (mode, epoch)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn finished(&self) -> bool {
        self.finish.load(Ordering::Acquire)
    }

    fn wait_exit(&self) {
        while !self.exit.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs a worker; its exit status is 0 after `exit`, [`SETUP_FAILED`] when its endpoints
/// could not be made (said in an `error` report first).
pub fn run(args: &SoakWorkerArgs) -> ExitCode {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process (the controller
    // spawns every worker from its main thread, which lives as long as the soak), and
    // ignoring SIGINT installs no handler. Ctrl-C reaches the whole process group; the
    // controller, not the terminal, ends the workers, so that it can still report.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let control = Control::start(args.mode);
    match serve(args, &control) {
        Ok(()) => ExitCode::SUCCESS,
        Err(what) => {
            emit(&Report::Error { what });
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn serve(args: &SoakWorkerArgs, control: &Control) -> Result<(), String> {
    let topology = args.role.topology();
    let builder = Context::builder().domain_id(DOMAIN);
    let builder = match topology {
        Topology::Dds => builder.dds_config(DdsConfig::loopback()),
        _ => builder.local_only().limits(Limits { max_depth: LOCAL_DEPTH, ..Limits::default() }),
    };
    let ctx = builder.create().map_err(|e| format!("context: {e}"))?;
    let node = ctx.create_node(&args.name.replace('-', "_")).map_err(|e| format!("node: {e}"))?;
    // Subscriptions first: in the intra worker the subscription is there for the first message.
    let mut receivers = Vec::new();
    for &name in args.role.subscriptions() {
        receivers.push(Receiver::new(&node, topology, name)?);
    }
    let mut sender = if args.role.publishes() { Some(Sender::new(&node, topology, args)?) } else { None };
    emit(&Report::Ready);
    std::thread::scope(|s| {
        for r in receivers.iter_mut() {
            s.spawn(move || r.run(control));
        }
        if let Some(sender) = sender.as_mut() {
            sender.run(control);
        }
    });
    emit(&Report::Finished);
    // The endpoints live until the worker exits: the controller counts their files with
    // every worker alive, and again once all are gone.
    control.wait_exit();
    drop((receivers, sender));
    Ok(())
}

/// A publisher and its counters.
struct Sender {
    publisher: Publisher<SoakFrame>,
    topology: Topology,
    incarnation: u32,
    rng: Rng,
    stats: PubStats,
    /// Device loans are written from here (the pool is not host memory).
    scratch: Vec<u8>,
}

/// What became of one message.
enum Sent {
    Published,
    Excused(Excuse),
    /// No number was used: the device pool was exhausted.
    PoolExhausted,
}

impl Sender {
    fn new(node: &Node, topology: Topology, args: &SoakWorkerArgs) -> Result<Sender, String> {
        let backend = if topology == Topology::Device { BackendKind::FakeDevice } else { BackendKind::Shm };
        let options = PublisherOptions { backend, ..Default::default() };
        let publisher = node
            .create_publisher_with_options::<SoakFrame>(topology.topic(), qos(), options)
            .map_err(|e| format!("publisher on {}: {e}", topology.topic()))?;
        let stream = u64::from(topology.publisher_id()) << 32 | u64::from(args.incarnation);
        Ok(Sender {
            publisher,
            topology,
            incarnation: args.incarnation,
            rng: Rng::derive(args.seed, stream),
            stats: PubStats::default(),
            scratch: Vec::new(),
        })
    }

    fn run(&mut self, control: &Control) {
        let period = Duration::from_secs(1) / rate(self.topology);
        let mut epoch = None;
        let mut steady_k = 0u64;
        let mut next_report = Instant::now();
        let mut next_send = Instant::now();
        while !control.stopped() {
            let (now_mode, now_epoch) = control.mode();
            if epoch != Some(now_epoch) {
                epoch = Some(now_epoch);
                steady_k = 0;
                emit(&Report::Mode { mode: now_mode, from: self.stats.last_seq + 1 });
            }
            let max = self.topology.max_size();
            let next = match now_mode {
                Mode::Steady => {
                    steady_k += 1;
                    schedule::steady(steady_k - 1, max)
                }
                Mode::Chaos => schedule::chaos(&mut self.rng, max),
            };
            match self.send(next) {
                Ok(Sent::Published) => self.stats.published += 1,
                Ok(Sent::Excused(why)) => {
                    match why {
                        Excuse::QueueFull => self.stats.queue_full += 1,
                        Excuse::DdsTimeout => self.stats.dds_timeout += 1,
                        Excuse::Unmatched => self.stats.unmatched += 1,
                        Excuse::Failed => {}
                    }
                    emit(&Report::Excused { seq: self.stats.last_seq, why });
                }
                Ok(Sent::PoolExhausted) => self.stats.pool_exhausted += 1,
                Err(what) => emit(&Report::Error { what }),
            }
            if Instant::now() >= next_report {
                emit(&Report::Published(self.stats));
                next_report = Instant::now() + REPORT_PERIOD;
            }
            // Paced, without bursts to catch up after a stop or a slow message.
            next_send = (next_send + period).max(Instant::now());
            std::thread::sleep(next_send.saturating_duration_since(Instant::now()));
        }
        emit(&Report::Published(self.stats));
        emit(&Report::Stopped { last_seq: self.stats.last_seq });
    }

    /// Sends one message. A number is used once the message is written; an error that
    /// comes before (a loan refused) is returned and uses none.
    fn send(&mut self, next: schedule::Next) -> Result<Sent, String> {
        let dds = self.topology == Topology::Dds;
        let unmatched_before = dds && self.publisher.network_subscription_count() == 0;
        let seq = self.stats.last_seq + 1;
        let mut stamp = Stamp {
            publisher: self.topology.publisher_id(),
            incarnation: self.incarnation,
            seq,
            len: next.len as u64,
            publish_ns: 0,
            loaned: next.loan,
        };
        let result = if next.loan {
            let mut loan = match self.publisher.loan(next.len) {
                Ok(l) => l,
                Err(LoanError::Backend(AllocError::Exhausted { .. })) => return Ok(Sent::PoolExhausted),
                Err(e) => return Err(format!("loan of {} bytes: {e}", next.len)),
            };
            if let Some(mem) = loan.buffer_uninit_mut(0) {
                let sum = payload::write_fill(&stamp, mem);
                stamp.publish_ns = monotonic_ns();
                payload::write_header(&stamp, sum, mem);
            } else {
                // Device memory: written from the host through the backend.
                self.scratch.resize(next.len, 0);
                let sum = payload::write_fill(&stamp, self.scratch.as_mut_slice());
                loan.write_buffer_from_host(0, HEADER_LEN, &self.scratch[HEADER_LEN..])
                    .map_err(|e| format!("writing a device loan: {e}"))?;
                stamp.publish_ns = monotonic_ns();
                loan.write_buffer_from_host(0, 0, &payload::header(&stamp, sum))
                    .map_err(|e| format!("writing a device loan: {e}"))?;
            }
            // SAFETY: the message has one buffer, and every byte of it was written above:
            // the fill (bytes 64..) and the header (bytes 0..64), in place or through the
            // backend.
            let mut msg = unsafe { loan.assume_init() };
            msg.publisher = stamp.publisher;
            msg.incarnation = stamp.incarnation;
            msg.seq = seq;
            self.stats.loans += 1;
            self.stats.last_seq = seq;
            self.publisher.publish(msg)
        } else {
            let mut data = vec![0u8; next.len];
            let sum = payload::write_fill(&stamp, data.as_mut_slice());
            stamp.publish_ns = monotonic_ns();
            payload::write_header(&stamp, sum, data.as_mut_slice());
            let msg = SoakFrame { publisher: stamp.publisher, incarnation: stamp.incarnation, seq, data: data.into() };
            self.stats.copies += 1;
            self.stats.last_seq = seq;
            self.publisher.publish_copy(&msg)
        };
        self.stats.bytes += next.len as u64;
        self.stats.max_size = self.stats.max_size.max(next.len as u64);
        let unmatched = unmatched_before || (dds && self.publisher.network_subscription_count() == 0);
        Ok(match result {
            Ok(()) if unmatched => Sent::Excused(Excuse::Unmatched),
            Ok(()) => Sent::Published,
            Err(PublishError::QueueFull { .. }) => Sent::Excused(Excuse::QueueFull),
            Err(PublishError::Network(DdsError::Call { code, .. })) if code == -DDS_RETCODE_TIMEOUT => {
                Sent::Excused(Excuse::DdsTimeout)
            }
            Err(e) => {
                emit(&Report::Error { what: format!("publish of message {seq} ({} bytes): {e}", next.len) });
                Sent::Excused(Excuse::Failed)
            }
        })
    }
}

/// How a topology's messages must arrive at a subscription.
#[derive(Debug, Clone, Copy)]
struct Path {
    transport: Transport,
    /// The memory of a message sent as a loan, and of one sent by `publish_copy`.
    loaned: BackendKind,
    copied: BackendKind,
}

/// A subscription, what it received, and the sample it holds until the next one.
struct Receiver {
    name: &'static str,
    sub: Subscription<SoakFrame>,
    publisher_id: u32,
    path: Path,
    /// CLOCK_MONOTONIC just before the subscription was made.
    created_ns: u64,
    streams: HashMap<(u32, u32), Tracker>,
    held: Option<Sample<SoakFrame>>,
    stats: SubStats,
    /// Where a message in device memory is copied to be checked: allocated and touched
    /// once, at the topology's largest size, so that the worker's heap does not follow the
    /// sizes of the messages (the allocator keeps what large copies left, which the `rss`
    /// check would take for a leak).
    scratch: Vec<u8>,
}

impl Receiver {
    fn new(node: &Node, topology: Topology, name: &'static str) -> Result<Receiver, String> {
        let takes_device = name == "device";
        let accepted = takes_device.then(|| BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice]));
        let options = SubscriptionOptions { accepted_backends: accepted, ..Default::default() };
        let path = match topology {
            Topology::Shm => Path { transport: Transport::Shm, loaned: BackendKind::Shm, copied: BackendKind::Shm },
            Topology::Intra => Path { transport: Transport::Intra, loaned: BackendKind::Cpu, copied: BackendKind::Cpu },
            Topology::Device if takes_device => {
                Path { transport: Transport::Shm, loaned: BackendKind::FakeDevice, copied: BackendKind::Shm }
            }
            Topology::Device => Path { transport: Transport::Shm, loaned: BackendKind::Shm, copied: BackendKind::Shm },
            Topology::Dds => Path { transport: Transport::Network, loaned: BackendKind::Cpu, copied: BackendKind::Cpu },
        };
        let created_ns = monotonic_ns();
        let sub = node
            .create_subscription_with_options::<SoakFrame>(topology.topic(), qos(), options)
            .map_err(|e| format!("subscription {name} on {}: {e}", topology.topic()))?;
        Ok(Receiver {
            name,
            sub,
            publisher_id: topology.publisher_id(),
            path,
            created_ns,
            streams: HashMap::new(),
            held: None,
            stats: SubStats::default(),
            scratch: if takes_device { vec![1; topology.max_size()] } else { Vec::new() },
        })
    }

    fn run(&mut self, control: &Control) {
        let mut next_report = Instant::now();
        while !control.finished() {
            match self.sub.take(TAKE_SLICE) {
                Ok(Some(sample)) => self.check(sample),
                Ok(None) => {}
                // A subscription that joins between a device publisher's loan and its
                // publish gets that one message without a hold on its block, and perhaps
                // without the host copy it needs (the loan was made for the readers known
                // then): the block may be reused before it imports (stale) or have no host
                // bytes (unusable), and freight says so with a typed error. Only before the
                // subscription's first message is that the reason.
                Err(TakeError::Unusable { .. } | TakeError::Import { .. })
                    if self.stats.received == 0 && self.stats.unusable_at_join == 0 =>
                {
                    self.stats.unusable_at_join += 1
                }
                Err(e) => emit(&Report::Error { what: format!("take on {}: {e}", self.name) }),
            }
            if Instant::now() >= next_report {
                self.report();
                next_report = Instant::now() + REPORT_PERIOD;
            }
        }
        self.release();
        self.report();
    }

    fn fault(&self, fault: Fault, what: String) {
        emit(&Report::Fault { sub: self.name.into(), fault, what });
    }

    fn report(&mut self) {
        let streams: Vec<Runs> = self
            .streams
            .iter_mut()
            .filter_map(|(&(publisher, incarnation), t)| {
                let runs = t.take_runs();
                (!runs.is_empty()).then_some(Runs { publisher, incarnation, runs })
            })
            .collect();
        emit(&Report::Received { sub: self.name.into(), stats: self.stats, streams });
    }

    /// Checks a message in full, then the one held before it once more before letting it go.
    fn check(&mut self, sample: Sample<SoakFrame>) {
        let from = format!("message {} of publisher {}#{}", sample.seq, sample.publisher, sample.incarnation);
        let bytes = match (sample.data.as_bytes(), sample.data.raw().storage()) {
            (Some(b), _) => Ok(b),
            (None, Some(device)) => match self.scratch.get_mut(..device.len()) {
                Some(dst) => device.copy_to_host(dst).map(|()| &*dst).map_err(|e| e.to_string()),
                None => Err(format!("{} bytes, more than the topology's largest message", device.len())),
            },
            (None, None) => Err("it is a loan slot".to_string()),
        };
        let stamp = match bytes.map(payload::verify) {
            Ok(Ok(s)) => s,
            Ok(Err(c)) => return self.fault(Fault::WrongBytes, format!("{from}: {c}")),
            Err(e) => return self.fault(Fault::WrongBytes, format!("{from}: its buffer cannot be read: {e}")),
        };
        if (stamp.publisher, stamp.incarnation, stamp.seq) != (sample.publisher, sample.incarnation, sample.seq)
            || stamp.publisher != self.publisher_id
        {
            return self.fault(
                Fault::WrongBytes,
                format!(
                    "{from}: its payload is message {} of publisher {}#{} (this topic's publisher is {})",
                    stamp.seq, stamp.publisher, stamp.incarnation, self.publisher_id
                ),
            );
        }
        let backend = sample.data.backend();
        let expected = if stamp.loaned { self.path.loaned } else { self.path.copied };
        let host_instead = expected == BackendKind::FakeDevice && backend == self.path.copied;
        if sample.info().transport == self.path.transport && host_instead && self.stats.received == 0 {
            // The subscription joined between the loan and its publish: the publisher did
            // not hold the block for it, so it takes the host copy (as freight documents).
            self.stats.host_at_join += 1;
        } else if sample.info().transport == self.path.transport && host_instead {
            // Device memory that could not be imported arrives as the host copy, as freight
            // documents; whether that was right (its publisher is dead and its pool gone)
            // the controller knows.
            emit(&Report::Fallback { sub: self.name.into(), incarnation: stamp.incarnation, seq: stamp.seq });
        } else if sample.info().transport != self.path.transport || backend != expected {
            self.fault(
                Fault::Path,
                format!(
                    "{from} ({}) came {:?} in {backend}, expected {:?} in {expected}",
                    if stamp.loaned { "a loan" } else { "a copy" },
                    sample.info().transport,
                    self.path.transport
                ),
            );
        }
        let margin = STALE_MARGIN.as_nanos() as u64;
        if stamp.publish_ns.saturating_add(margin) < self.created_ns {
            self.fault(
                Fault::Stale,
                format!(
                    "{from} was published {} ms before the subscription existed",
                    (self.created_ns - stamp.publish_ns) / 1_000_000
                ),
            );
        }
        if let Err(o) = self.streams.entry((stamp.publisher, stamp.incarnation)).or_default().record(stamp.seq) {
            self.fault(Fault::Order, format!("{from} came after message {}", o.after));
        }
        self.stats.received += 1;
        self.stats.bytes += stamp.len;
        self.release();
        self.held = Some(sample);
    }

    /// Checks the held sample again (its memory must not have changed while held) and drops it.
    fn release(&mut self) {
        let Some(held) = self.held.take() else { return };
        // Device memory would need a copy to look at; its generation check guards it instead.
        if let Some(bytes) = held.data.as_bytes() {
            if let Err(c) = payload::spot_check(bytes) {
                self.fault(
                    Fault::Stale,
                    format!(
                        "message {} of publisher {}#{} changed while this subscription held it: {c}",
                        held.seq, held.publisher, held.incarnation
                    ),
                );
            }
        }
    }
}
