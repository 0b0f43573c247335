//! Cyclone DDS configures a domain once per process: message size, repair timing, lease,
//! socket buffers and the retransmit queue are shared by every topic of a participant.
//! Several tuned streams of one process (a camera and a lidar, say) therefore share one set
//! of these settings: the strictest of each. [`Profile::widen`] merges a second stream's
//! needs into a profile; [`Profile::covers`] says whether a domain already configured with
//! one profile serves another stream.

use std::time::Duration;

use crate::Profile;

impl Profile {
    /// Makes the domain-wide settings of `self` serve `other`'s stream too: the smaller
    /// message and fragment size, the faster heartbeat and response delays, and the longer
    /// lease, larger buffers, queues and high-water mark. Per-topic values (the history
    /// depth, the inputs) stay `self`'s.
    ///
    /// ```
    /// use freight_tune::{tune, Inputs};
    /// let mut points = tune(&Inputs::new(10.0, 512 << 10, 433e6))?;
    /// let image = tune(&Inputs::new(30.0, 256 << 10, 433e6))?;
    /// points.widen(&image);
    /// assert_eq!(points.heartbeat_period, image.heartbeat_period); // 30 Hz repairs faster
    /// assert!(points.covers(&image).is_ok());
    /// # Ok::<(), freight_tune::TuneError>(())
    /// ```
    pub fn widen(&mut self, other: &Profile) {
        let o = other;
        self.max_message_size = self.max_message_size.min(o.max_message_size);
        self.fragment_size = self.fragment_size.min(o.fragment_size);
        self.heartbeat_period = self.heartbeat_period.min(o.heartbeat_period);
        self.heartbeat_min = self.heartbeat_min.min(o.heartbeat_min);
        self.heartbeat_max = self.heartbeat_max.min(o.heartbeat_max);
        self.response_delay = self.response_delay.min(o.response_delay);
        self.ack_delay = self.ack_delay.min(o.ack_delay);
        self.lease = self.lease.max(o.lease);
        self.lease_announcement = self.lease_announcement.min(o.lease_announcement);
        self.socket_buffer_min = self.socket_buffer_min.max(o.socket_buffer_min);
        self.socket_buffer_request = self.socket_buffer_request.max(o.socket_buffer_request);
        self.whc_high = self.whc_high.max(o.whc_high);
        // Both streams may need repair at once, after the same outage.
        self.max_rexmit_bytes = self.max_rexmit_bytes.saturating_add(o.max_rexmit_bytes);
        self.max_rexmit_messages = self.max_rexmit_messages.saturating_add(o.max_rexmit_messages);
        self.defrag_samples = self.defrag_samples.max(o.defrag_samples);
    }

    /// Whether a domain configured with `self` serves `other`'s stream as well as its own
    /// profile would; `Err` lists each shared setting that falls short, with both values.
    ///
    /// ```
    /// use freight_tune::{tune, Inputs};
    /// let slow = tune(&Inputs::new(10.0, 512 << 10, 433e6))?;
    /// let fast = tune(&Inputs::new(30.0, 512 << 10, 433e6))?;
    /// assert!(fast.covers(&slow).is_ok());
    /// let short = slow.covers(&fast).unwrap_err();
    /// assert!(short[0].starts_with("heartbeat period"));
    /// # Ok::<(), freight_tune::TuneError>(())
    /// ```
    pub fn covers(&self, other: &Profile) -> Result<(), Vec<String>> {
        let mut short = Vec::new();
        let mut at_most = |what: &str, has: u64, needs: u64| {
            if has > needs {
                short.push(format!("{what} {has} B, needs at most {needs} B"));
            }
        };
        at_most("RTPS message size", self.max_message_size.into(), other.max_message_size.into());
        at_most("fragment size", self.fragment_size.into(), other.fragment_size.into());
        let mut faster = |what: &str, has: Duration, needs: Duration| {
            if has > needs {
                short.push(format!("{what} {has:?}, needs at most {needs:?}"));
            }
        };
        faster("heartbeat period", self.heartbeat_period, other.heartbeat_period);
        faster("heartbeat min", self.heartbeat_min, other.heartbeat_min);
        faster("NACK / response delay", self.response_delay, other.response_delay);
        if self.lease < other.lease {
            short.push(format!("lease {:?}, needs at least {:?}", self.lease, other.lease));
        }
        let mut at_least = |what: &str, has: u64, needs: u64| {
            if has < needs {
                short.push(format!("{what} {has}, needs at least {needs}"));
            }
        };
        at_least("socket receive buffer (B)", self.socket_buffer_min, other.socket_buffer_min);
        at_least("WhcHigh (B)", self.whc_high, other.whc_high);
        at_least("retransmit queue (B)", self.max_rexmit_bytes, other.max_rexmit_bytes);
        at_least("retransmit queue (messages)", self.max_rexmit_messages, other.max_rexmit_messages);
        at_least("reassembly slots", self.defrag_samples, other.defrag_samples);
        if short.is_empty() {
            Ok(())
        } else {
            Err(short)
        }
    }
}
