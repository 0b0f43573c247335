//! What one run of the lab measured, as the table, `--json` and `--plot` report it.

use serde::Serialize;

/// One run: a (profile, peer, condition, payload) cell of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// `default` (Cyclone's defaults, reliable KEEP_ALL) or `tuned` (`freight tune`'s profile).
    pub profile: String,
    /// Who publishes and subscribes: `freight` (freight's DDS plane on both ends) or
    /// `cyclonedds-py` (stock Python Cyclone DDS on both ends, fed the generated XML).
    pub peer: String,
    /// `ideal`, `loss1`, `loss20` or `outage`.
    pub condition: String,
    /// Payload bytes per message (the `data` field).
    pub payload_bytes: u64,
    /// Samples received per second of publishing.
    pub rx_hz: f64,
    /// Mean one-way latency of the received samples, ms (`null` when none arrived).
    pub mean_ms: Option<f64>,
    /// 99th percentile one-way latency, ms.
    pub p99_ms: Option<f64>,
    /// Samples published and never received.
    pub lost: u64,
    /// IP fragments that reached the subscriber's namespace (`ReasmReqds`).
    pub ip_fragments: u64,
    /// Samples the publisher wrote.
    pub sent: u64,
    /// Writes that failed (a full KEEP_ALL history blocked past its bound).
    pub write_errors: u64,
    /// Publish slots skipped because a write blocked for longer than a period.
    pub skipped: u64,
    /// Seconds of publishing.
    pub seconds: f64,
    /// Outage runs only: what happened around the cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage: Option<OutageResult>,
    /// Why the run produced no measurement (a peer failed to start, say), if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The outage condition's extra measurements.
#[derive(Debug, Clone, Serialize)]
pub struct OutageResult {
    /// Seconds from the start of publishing to the cut.
    pub cut_at_s: f64,
    /// Length of the outage, s.
    pub outage_s: f64,
    /// From the link's return to the arrival of the first sample published after it, ms
    /// (`null`: none arrived).
    pub recovery_ms: Option<f64>,
    /// Samples published before the link returned that arrived after it (the stale burst).
    pub stale: u64,
    /// The oldest of those at arrival, ms.
    pub stale_max_age_ms: Option<f64>,
    /// Samples received in each whole second from the start of publishing.
    pub per_second: Vec<u32>,
}
