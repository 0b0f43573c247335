//! One topic's way from its freight subscription (or raw DDS reader) to its
//! Foxglove channel.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use foxglove::{PartialMetadata, RawChannel};
use freight_dds::ReceivedCdr;
use freight_msg::EncodeError;

use super::throttle;
use crate::subscribe::{realtime_ns, Received};

/// Counters of one topic, written by its callback and read by the status line.
#[derive(Debug, Default)]
pub struct TopicStats {
    /// Messages the subscription took.
    pub received: AtomicU64,
    /// Messages handed to the server for its subscribed clients.
    pub sent: AtomicU64,
    /// Bytes of those (CDR with its header).
    pub bytes: AtomicU64,
    /// Messages not sent because the budget (`--max-bandwidth`) was spent.
    pub skipped: AtomicU64,
    /// Messages that could not be encoded.
    pub failed: AtomicU64,
}

/// The budget all topics share: `None` without a limit.
pub type Budget = Option<Arc<Mutex<throttle::Budget>>>;

/// A budget of `bytes_per_s` (0: none).
pub fn budget(bytes_per_s: u64) -> Budget {
    NonZeroU64::new(bytes_per_s).map(|rate| Arc::new(Mutex::new(throttle::Budget::new(rate, Instant::now()))))
}

/// What a topic's subscription callback owns.
pub struct Forward {
    pub channel: Arc<RawChannel>,
    pub budget: Budget,
    pub stats: Arc<TopicStats>,
    /// The last message's CDR, whose allocation the next one reuses.
    pub buf: Vec<u8>,
}

impl Forward {
    /// Encodes `s` and logs it to the channel, if a client is subscribed to it
    /// and the budget allows; otherwise it is not even encoded.
    pub fn on_sample(&mut self, s: &dyn Received) {
        self.forward(|buf| s.encode(buf));
    }

    /// As [`on_sample`](Self::on_sample), for a raw topic's sample: its CDR
    /// as it came over DDS, copied once into the buffer.
    pub fn on_cdr(&mut self, s: &ReceivedCdr) {
        self.forward(|mut buf| {
            buf.clear();
            buf.extend_from_slice(s.bytes());
            Ok(buf)
        });
    }

    /// Logs what `encode` writes into the buffer it is given (the last
    /// message's allocation) to the channel, if a client is subscribed and the
    /// budget allows.
    fn forward(&mut self, encode: impl FnOnce(Vec<u8>) -> Result<Vec<u8>, EncodeError>) {
        let received_ns = realtime_ns();
        self.stats.received.fetch_add(1, Relaxed);
        // The server keeps each channel's set of subscribed clients up to date.
        if !self.channel.has_sinks() {
            return;
        }
        // The topic's last message (whose allocation `buf` is) predicts this one's size.
        let admitted = match &self.budget {
            Some(b) => {
                let Some(admitted) = b.lock().unwrap_or_else(|p| p.into_inner()).admit(self.buf.len(), Instant::now())
                else {
                    self.stats.skipped.fetch_add(1, Relaxed);
                    return;
                };
                Some(admitted)
            }
            None => None,
        };
        let data = match encode(std::mem::take(&mut self.buf)) {
            Ok(data) => data,
            Err(e) => {
                if self.stats.failed.fetch_add(1, Relaxed) == 0 {
                    let topic = crate::topic::shown(self.channel.topic());
                    eprintln!("warning: {topic}: a message could not be encoded and was not sent: {e}");
                }
                return;
            }
        };
        if let (Some(b), Some(admitted)) = (&self.budget, admitted) {
            b.lock().unwrap_or_else(|p| p.into_inner()).spend(admitted, data.len());
        }
        // Never blocks: a client whose queue is full loses its oldest message.
        self.channel.log_with_meta(&data, PartialMetadata::with_log_time(received_ns));
        self.stats.sent.fetch_add(1, Relaxed);
        self.stats.bytes.fetch_add(data.len() as u64, Relaxed);
        self.buf = data;
    }
}
