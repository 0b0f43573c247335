//! The `dds` baseline: stock ROS 2 over Cyclone DDS, the cost freight's local plane avoids.
//!
//! Per message this does what a ROS 2 node on `rmw_cyclonedds` does: the publisher fills a
//! `std_msgs/UInt8MultiArray` (the message freight's own rows send, so the rows compare),
//! serializes it to CDR and writes it to a DDS writer on `rt/<topic>`; Cyclone copies it and
//! sends it over UDP on loopback, in fragments. The subscriber takes the sample from its DDS
//! reader and deserializes it into a message of its own before looking at the payload. Acks
//! come back the same way on a second topic, as the small `Ack` message freight's rows use.
//!
//! Both ends live in two processes because freight's DDS endpoints ignore endpoints of their
//! own process. QoS is reliable and volatile, keep-last like freight's rows; with one message
//! in flight the depth never comes into play.
//!
//! Wait modes: `spin` polls `take()` in a loop; `block` sleeps on a condition variable that the
//! reader's data-available listener signals from Cyclone's receive thread. That is also how a
//! ROS 2 executor is woken: Cyclone's receive thread delivers the sample and triggers the
//! condition the executor's wait set sleeps on.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Buffer, Message};
use freight_dds::{DdsConfig, DdsError, EndpointQos, Participant, Reader, ReceivedCdr, Writer};

use super::freight_impl::Ack;
use super::transport::{Placement, PublisherEnd, RowConfig, SubscriberEnd, Transport, WaitMode, HEADER_LEN};
use super::BenchError;

/// Cyclone DDS's default configuration, changed only where two processes on loopback need it.
///
/// Loopback has no MULTICAST flag, so Cyclone's default multicast discovery would never find
/// the peer: we pin the interface to 127.0.0.1, turn multicast off and send discovery by
/// unicast to the participant indices on 127.0.0.1 instead. Everything that shapes the data
/// path (message and fragment sizes, socket buffers, ...) stays at Cyclone's defaults, as a
/// stock ROS 2 installation has them: that is the cost this baseline shows. The XML is passed
/// explicitly, so `CYCLONEDDS_URI` does not change the baseline.
const LOOPBACK_XML: &str = r#"<CycloneDDS><Domain>
  <General>
    <Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>
    <AllowMulticast>false</AllowMulticast>
  </General>
  <Discovery>
    <ParticipantIndex>auto</ParticipantIndex>
    <MaxAutoParticipantIndex>64</MaxAutoParticipantIndex>
    <Peers><Peer address="127.0.0.1"/></Peers>
  </Discovery>
</Domain></CycloneDDS>"#;

/// Keep-last depth, as freight's own rows use.
const DEPTH: u32 = 2;

/// How long a reliable write may wait for the peer to acknowledge earlier samples. ROS 2 would
/// wait forever; a bound turns a stuck peer into a failed row instead of a hung bench.
const MAX_BLOCKING_TIME: Duration = Duration::from_secs(10);

/// How long discovery may take to match both topics, well inside the row's time limit.
const MATCH_TIMEOUT: Duration = Duration::from_secs(20);

/// In spin mode, look at the clock only every this many empty polls (see `iceoryx2_raw`).
const POLLS_PER_CLOCK_CHECK: u32 = 1024;

/// The stock ROS 2 over Cyclone DDS baseline transport.
pub struct Dds;

impl Transport for Dds {
    fn name(&self) -> &'static str {
        "dds"
    }

    fn placement(&self) -> Placement {
        Placement::Processes
    }

    fn open_publisher(&self, row: &RowConfig) -> Result<Box<dyn PublisherEnd>, BenchError> {
        let topic = topic_of(row);
        let ends = Ends::open::<UInt8MultiArray, Ack>(row, &topic, &format!("{topic}_ack"))?;
        // Pre-faulted, as a user's message would be after its first use.
        let msg = UInt8MultiArray { data: Buffer::from(vec![1u8; row.wire_len()]), ..Default::default() };
        Ok(Box::new(DdsPublisher { ends, msg, matched: false }))
    }

    fn open_subscriber(&self, row: &RowConfig) -> Result<Box<dyn SubscriberEnd>, BenchError> {
        let topic = topic_of(row);
        let ends = Ends::open::<Ack, UInt8MultiArray>(row, &format!("{topic}_ack"), &topic)?;
        // The harness sends as soon as we return: wait until discovery has matched both
        // topics, or the first message would go to nobody (volatile).
        ends.wait_matched()?;
        Ok(Box::new(DdsSubscriber { ends }))
    }
}

fn dds_error(what: &str, e: DdsError) -> BenchError {
    BenchError::new(
        format!("{what}: {e}"),
        "check that the loopback interface is up (ip addr show lo) and that UDP ports 7400-65535 \
         on 127.0.0.1 are not blocked",
    )
}

fn bad_sample(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::new(
        format!("received a {what} that is not valid CDR: {e}"),
        "another DDS program may be publishing on the bench's topic; retry",
    )
}

/// The DDS domain of a bench run, 1..=231, derived from the run part of the channel
/// (`freight-bench/<run>/<row>`): both processes compute the same one, concurrent runs land
/// on different ones, and all rows of a run share one (Cyclone keeps a domain's threads and
/// sockets until the process exits). 0, ROS's default, is avoided; above 231 the unicast port
/// of a high participant index no longer fits in 16 bits.
fn domain_of(row: &RowConfig) -> u32 {
    let run = row.channel.rsplit_once('/').map_or(row.channel.as_str(), |(run, _)| run);
    // FNV-1a: stable across processes and builds, unlike std's hasher.
    let hash = run.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let domain = 1 + (hash % 231) as u32;
    // freight's own rows join ROS_DOMAIN_ID with another configuration, and a Cyclone domain
    // has one configuration per process: step aside.
    let ros_domain = std::env::var("ROS_DOMAIN_ID").ok().and_then(|d| d.trim().parse::<u32>().ok());
    if ros_domain == Some(domain) {
        domain % 231 + 1
    } else {
        domain
    }
}

/// The DDS topic of the row: the ROS topic freight's rows use, with the `rt` prefix ROS 2
/// puts on DDS topics.
fn topic_of(row: &RowConfig) -> String {
    format!("rt{}", super::freight_impl::topic_of(row))
}

/// Wakes a thread blocked in [`Wake::wait`] from a Cyclone listener.
#[derive(Default)]
struct Wake {
    pending: Mutex<bool>,
    cond: Condvar,
}

impl Wake {
    fn notify(&self) {
        // A poisoned lock only means a waiter panicked; the flag is still meaningful.
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cond.notify_one();
    }

    /// Sleeps until notified (consuming the notification) or until `deadline`.
    fn wait(&self, deadline: Instant) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while !*pending {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            pending = self.cond.wait_timeout(pending, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *pending = false;
    }
}

/// One side's DDS entities: a writer for what it sends, a reader for what it receives.
struct Ends {
    writer: Writer,
    reader: Reader,
    wake: Arc<Wake>,
    wait: WaitMode,
}

impl Ends {
    /// Joins the run's domain and creates a writer of `W` on `write_topic` and a reader of `R`
    /// on `read_topic`.
    fn open<W: Message, R: Message>(row: &RowConfig, write_topic: &str, read_topic: &str) -> Result<Self, BenchError> {
        let config = DdsConfig::with_xml(LOOPBACK_XML);
        let domain = domain_of(row);
        let participant = Arc::new(
            with_all_cpus(|| Participant::new(domain, &config))
                .map_err(|e| dds_error(&format!("cannot join DDS domain {domain}"), e))?,
        );
        let qos = EndpointQos { depth: Some(DEPTH), ..EndpointQos::reliable(MAX_BLOCKING_TIME) };
        let writer = participant
            .create_writer(write_topic, &W::dds_type_name(), &qos, Box::new(|| {}))
            .map_err(|e| dds_error(&format!("cannot create a DDS writer on {write_topic}"), e))?;
        let wake = Arc::new(Wake::default());
        // Spin mode polls; a listener that signals nobody would only add work to Cyclone's
        // receive thread.
        let on_data: Box<dyn Fn() + Send + Sync> = match row.wait {
            WaitMode::Spin => Box::new(|| {}),
            WaitMode::Block => {
                let wake = Arc::clone(&wake);
                Box::new(move || wake.notify())
            }
        };
        let reader = participant
            .create_reader(read_topic, &R::dds_type_name(), &qos, on_data)
            .map_err(|e| dds_error(&format!("cannot create a DDS reader on {read_topic}"), e))?;
        Ok(Self { writer, reader, wake, wait: row.wait })
    }

    /// Waits until the writer has matched a reader and the reader a writer: only then does a
    /// volatile sample reach the peer.
    fn wait_matched(&self) -> Result<(), BenchError> {
        let started = Instant::now();
        loop {
            let writer_matched =
                !self.writer.matched_readers().map_err(|e| dds_error("cannot list matched readers", e))?.is_empty();
            let reader_matched =
                !self.reader.matched_writers().map_err(|e| dds_error("cannot list matched writers", e))?.is_empty();
            if writer_matched && reader_matched {
                return Ok(());
            }
            if started.elapsed() >= MATCH_TIMEOUT {
                return Err(BenchError::new(
                    format!("DDS discovery did not match the peer process within {} s", MATCH_TIMEOUT.as_secs()),
                    "check that the loopback interface is up (ip addr show lo) and that no firewall drops \
                     UDP on 127.0.0.1",
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Takes the next sample, spinning or sleeping in between as the row says; `None` if
    /// `deadline` passed first.
    fn next_sample(&self, deadline: Instant) -> Result<Option<ReceivedCdr>, BenchError> {
        let mut polls = 0u32;
        loop {
            // Always take before waiting: the sample may be there already, and its wake-up
            // may have been consumed by an earlier wait.
            if let Some(sample) = self.reader.take().map_err(|e| dds_error("DDS take failed", e))? {
                return Ok(Some(sample));
            }
            match self.wait {
                WaitMode::Spin => {
                    core::hint::spin_loop();
                    polls += 1;
                    if polls.is_multiple_of(POLLS_PER_CLOCK_CHECK) && Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
                WaitMode::Block => {
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                    self.wake.wait(deadline);
                }
            }
        }
    }

    fn write<M: Message>(&self, msg: &M) -> Result<(), BenchError> {
        let cdr = msg.to_cdr().map_err(|e| {
            BenchError::new(format!("cannot serialize {}: {e}", M::TYPE_NAME), "this is a bug; please report it")
        })?;
        self.writer.write_cdr(&cdr).map_err(|e| {
            dds_error(&format!("DDS write of {} bytes failed (the peer did not keep up or is gone)", cdr.len()), e)
        })
    }
}

/// Runs `f` with the calling thread allowed on every CPU, then restores its affinity.
///
/// The harness pins each side to one CPU before opening its end, and threads inherit their
/// creator's affinity: without this, Cyclone's receive and event threads would share the
/// pinned CPU with a side that busy-polls it in spin mode and only run when the scheduler
/// preempts the poller. In a ROS 2 process they are ordinary, unpinned threads.
fn with_all_cpus<T>(f: impl FnOnce() -> T) -> T {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: all-zero is a valid (empty) cpu_set_t; pid 0 is the calling thread and the set
    // is the size we pass.
    let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let got = unsafe { libc::sched_getaffinity(0, size, &mut saved) } == 0;
    if got {
        // SAFETY: as above. Every bit set: the kernel keeps only the CPUs the cpuset allows.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            for cpu in 0..libc::CPU_SETSIZE as usize {
                libc::CPU_SET(cpu, &mut all);
            }
            libc::sched_setaffinity(0, size, &all);
        }
    }
    let result = f();
    if got {
        // SAFETY: `saved` is the set the kernel gave us above.
        unsafe { libc::sched_setaffinity(0, size, &saved) };
    }
    result
}

/// Publisher side: data writer, ack reader.
struct DdsPublisher {
    ends: Ends,
    /// The user's message, reused: a node fills its message, then publishes it.
    msg: UInt8MultiArray,
    /// Whether both topics are known to be matched (checked before the first send).
    matched: bool,
}

impl PublisherEnd for DdsPublisher {
    fn send(&mut self, stamp: &mut dyn FnMut() -> [u8; HEADER_LEN]) -> Result<(), BenchError> {
        if !self.matched {
            self.ends.wait_matched()?;
            self.matched = true;
        }
        // Stamped before serializing: serialization is part of what a ROS 2 publish costs.
        let header = stamp();
        let bytes = self.msg.data.get_mut().ok_or_else(|| {
            BenchError::new("the message buffer is shared", "this is a bug in the dds transport; please report it")
        })?;
        bytes[..HEADER_LEN].copy_from_slice(&header);
        self.ends.write(&self.msg)
    }

    fn wait_ack(&mut self, deadline: Instant) -> Result<Option<u64>, BenchError> {
        let Some(sample) = self.ends.next_sample(deadline)? else { return Ok(None) };
        let ack = Ack::from_cdr(sample.bytes()).map_err(|e| bad_sample("ack", e))?;
        Ok(Some(ack.seq))
    }
}

/// Subscriber side: data reader, ack writer.
struct DdsSubscriber {
    ends: Ends,
}

impl SubscriberEnd for DdsSubscriber {
    fn receive(&mut self, deadline: Instant, on_message: &mut dyn FnMut(&[u8])) -> Result<bool, BenchError> {
        let Some(sample) = self.ends.next_sample(deadline)? else { return Ok(false) };
        // Deserialized into a message of our own, as rmw_cyclonedds hands a callback.
        let msg = UInt8MultiArray::from_cdr(sample.bytes()).map_err(|e| bad_sample("message", e))?;
        let payload = msg.data.as_bytes().ok_or_else(|| bad_sample("message", "its data is not in host memory"))?;
        on_message(payload);
        Ok(true)
    }

    fn ack(&mut self, seq: u64) -> Result<(), BenchError> {
        self.ends.write(&Ack { seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(channel: &str) -> RowConfig {
        RowConfig::latency("dds", WaitMode::Spin, 8, channel.into())
    }

    #[test]
    fn rows_of_a_run_share_a_domain_in_range() {
        let a = domain_of(&row("freight-bench/123-abc/0"));
        assert_eq!(a, domain_of(&row("freight-bench/123-abc/7")));
        for run in 0..500 {
            let d = domain_of(&row(&format!("freight-bench/{run}-f00/0")));
            assert!((1..=231).contains(&d), "{d}");
        }
    }

    #[test]
    fn topics_are_ros_names_under_rt() {
        assert_eq!(topic_of(&row("freight-bench/123-abc/7")), "rt/freight_bench/n123_abc/n7");
    }
}
