//! The freight Rust stack of `freight bench ros2`: the hidden `freight bench ros2-peer`, one
//! process per side. It follows the embedded scripts' protocol line for line (see
//! `stock_rclpy.py`), through freight's typed API as a user writes it: a local-only
//! [`Context`], `sensor_msgs` [`Image`] / [`PointCloud2`], `Publisher::loan` written with
//! `write_from_fn` (every byte), `Subscription::take`, `std_msgs` [`Header`] acks.

use std::time::{Duration, Instant};

use freight::clock::monotonic_ns;
use freight::msgs::sensor_msgs::{Image, PointCloud2, PointField};
use freight::msgs::std_msgs::Header;
use freight::{Context, Loan, Message, Node, Publisher, QoS, Subscription};

use super::{Ros2PeerArgs, CLOUD_POINT_STEP};

/// As the scripts: seconds for the first ack, for one ack once the stream runs, and for the
/// subscriber's next message.
const HELLO_LIMIT: Duration = Duration::from_secs(60);
const ACK_LIMIT: Duration = Duration::from_secs(30);
const IDLE_LIMIT: Duration = Duration::from_secs(90);
/// Bytes of each message the subscriber checks.
const CHECKS: usize = 64;
/// rclpy's default depth, on both topics.
const DEPTH: usize = 10;

/// A message type of the benchmark: how to describe a payload and where its header is.
trait Frame: Message + Default {
    /// Sets the small fields of a message whose payload is `dims` as the scripts give them.
    fn describe(&mut self, dims: &[u32]);
    fn header(&self) -> &Header;
    fn header_mut(&mut self) -> &mut Header;
    fn payload(&self) -> &freight::Buffer<u8>;
    /// The payload length the small fields announce.
    fn announced_len(&self) -> usize;
}

impl Frame for Image {
    fn describe(&mut self, dims: &[u32]) {
        self.width = dims[0];
        self.height = dims[1];
        self.step = 4 * dims[0];
        self.encoding = "bgra8".into();
    }
    fn header(&self) -> &Header {
        &self.header
    }
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
    fn payload(&self) -> &freight::Buffer<u8> {
        &self.data
    }
    fn announced_len(&self) -> usize {
        self.step as usize * self.height as usize
    }
}

impl Frame for PointCloud2 {
    fn describe(&mut self, dims: &[u32]) {
        let field =
            |name: &str, offset: u32, datatype: u8| PointField { name: name.into(), offset, datatype, count: 1 };
        self.height = 1;
        self.width = dims[0];
        self.fields = vec![
            field("x", 0, PointField::FLOAT32),
            field("y", 4, PointField::FLOAT32),
            field("z", 8, PointField::FLOAT32),
            field("r", 12, PointField::UINT8),
            field("g", 13, PointField::UINT8),
            field("b", 14, PointField::UINT8),
        ];
        self.point_step = CLOUD_POINT_STEP;
        self.row_step = CLOUD_POINT_STEP * dims[0];
        self.is_dense = true;
    }
    fn header(&self) -> &Header {
        &self.header
    }
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
    fn payload(&self) -> &freight::Buffer<u8> {
        &self.data
    }
    fn announced_len(&self) -> usize {
        self.row_step as usize * self.height as usize
    }
}

/// Runs one side; errors are printed as `ERROR <what>` by the caller.
pub fn run(args: &Ros2PeerArgs) -> Result<(), String> {
    let dims_ok = match args.kind.as_str() {
        "image" => args.dims.len() == 2,
        "cloud" => args.dims.len() == 1,
        other => return Err(format!("unknown message kind `{other}` (image or cloud)")),
    };
    if !dims_ok {
        return Err(format!("{} takes {} numbers", args.kind, if args.kind == "image" { 2 } else { 1 }));
    }
    let node = Context::builder()
        .local_only()
        .create()
        .and_then(|c| c.create_node(&format!("bench_ros2_{}", args.role)))
        .map_err(|e| format!("freight: {e}"))?;
    match (args.role.as_str(), args.kind.as_str()) {
        ("pub", "image") => publisher::<Image>(&node, args),
        ("pub", _) => publisher::<PointCloud2>(&node, args),
        ("sub", "image") => subscriber::<Image>(&node, args),
        ("sub", _) => subscriber::<PointCloud2>(&node, args),
        (other, _) => Err(format!("unknown role `{other}` (pub or sub)")),
    }
}

fn fill_value(k: u32) -> u8 {
    (k % 255 + 1) as u8
}

fn ack_topic(args: &Ros2PeerArgs) -> String {
    format!("{}_ack", args.topic)
}

fn set_stamp(header: &mut Header, t_ns: u64) {
    header.stamp.sec = (t_ns / 1_000_000_000) as i32;
    header.stamp.nanosec = (t_ns % 1_000_000_000) as u32;
}

fn stamp_ns(header: &Header) -> u64 {
    header.stamp.sec as u64 * 1_000_000_000 + u64::from(header.stamp.nanosec)
}

/// Takes acks until one names `name`, up to `limit`.
fn wait_ack(acks: &Subscription<Header>, name: &str, limit: Duration) -> Result<bool, String> {
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        match acks.take(left).map_err(|e| format!("freight: {e}"))? {
            Some(ack) if ack.frame_id == name => return Ok(true),
            _ => {}
        }
    }
}

fn control<M: Frame>(publisher: &Publisher<M>, name: &str) -> Result<(), String> {
    let mut msg = M::default();
    msg.header_mut().frame_id = name.into();
    publisher.publish_copy(&msg).map_err(|e| format!("freight: {e}"))
}

fn publisher<M: Frame>(node: &Node, args: &Ros2PeerArgs) -> Result<(), String> {
    let publisher = node.create_publisher::<M>(&args.topic, QoS::keep_last(DEPTH)).map_err(|e| e.to_string())?;
    let acks =
        node.create_subscription::<Header>(&ack_topic(args), QoS::keep_last(DEPTH)).map_err(|e| e.to_string())?;
    println!("READY");
    let end = Instant::now() + HELLO_LIMIT;
    loop {
        control(&publisher, "hello")?;
        if wait_ack(&acks, "hello", Duration::from_millis(200))? {
            break;
        }
        if Instant::now() > end {
            return Err(format!("no subscriber acked within {} s", HELLO_LIMIT.as_secs()));
        }
    }
    let len = {
        let mut probe = M::default();
        probe.describe(&args.dims);
        probe.announced_len()
    };
    let (mut measured, mut start) = (0u32, None::<Instant>);
    for k in 0..args.warmup.saturating_add(args.count) {
        if k == args.warmup {
            start = Some(Instant::now());
        } else if start.is_some_and(|s| s.elapsed().as_secs_f64() >= args.duration) {
            break;
        }
        let value = fill_value(k);
        // The camera writes its whole frame into the loan: every byte, in shared memory.
        let mut msg: Loan<M> = publisher.loan(len).map_err(|e| format!("freight: {e}"))?.write_from_fn(move |_| value);
        msg.describe(&args.dims);
        let name = format!("{}{k}", if start.is_some() { 'm' } else { 'w' });
        msg.header_mut().frame_id = name.clone();
        set_stamp(msg.header_mut(), monotonic_ns());
        publisher.publish(msg).map_err(|e| format!("freight: {e}"))?;
        if !wait_ack(&acks, &name, ACK_LIMIT)? {
            return Err(format!("timed out: no ack for message {k} within {} s", ACK_LIMIT.as_secs()));
        }
        measured += u32::from(start.is_some());
    }
    let elapsed = start.map_or(0, |s| s.elapsed().as_nanos() as u64);
    control(&publisher, "stop")?;
    if !wait_ack(&acks, "stop", ACK_LIMIT)? {
        return Err(format!("timed out: no ack for stop within {} s", ACK_LIMIT.as_secs()));
    }
    println!("RESULT {}", serde_json::json!({ "round_trips": measured, "elapsed_ns": elapsed }));
    Ok(())
}

/// `None` when `data` has `expected` bytes and the checked ones hold `value`.
fn first_bad(data: &[u8], expected: usize, value: u8) -> Option<String> {
    if data.len() != expected || expected == 0 {
        return Some(format!("{} bytes, expected {expected}", data.len()));
    }
    (0..CHECKS)
        .map(|j| j * (expected - 1) / (CHECKS - 1))
        .find(|&i| data[i] != value)
        .map(|i| format!("byte {i} is {}, expected {value}", data[i]))
}

fn subscriber<M: Frame>(node: &Node, args: &Ros2PeerArgs) -> Result<(), String> {
    let acks = node.create_publisher::<Header>(&ack_topic(args), QoS::keep_last(DEPTH)).map_err(|e| e.to_string())?;
    let data = node.create_subscription::<M>(&args.topic, QoS::keep_last(DEPTH)).map_err(|e| e.to_string())?;
    println!("READY");
    let mut samples: Vec<u64> = Vec::with_capacity(args.count as usize);
    loop {
        let Some(msg) = data.take(IDLE_LIMIT).map_err(|e| format!("freight: {e}"))? else {
            return Err(format!("timed out: no message for {} s", IDLE_LIMIT.as_secs()));
        };
        let name = msg.header().frame_id.clone();
        if let Some(k) = name.strip_prefix(['w', 'm']).and_then(|k| k.parse::<u32>().ok()) {
            let bytes = msg.payload().as_bytes().ok_or("the payload arrived in device memory")?;
            let bad = first_bad(bytes, msg.announced_len(), fill_value(k));
            let now = monotonic_ns();
            if let Some(bad) = bad {
                return Err(format!("message {k}: {bad}"));
            }
            if name.starts_with('m') {
                samples.push(now.saturating_sub(stamp_ns(msg.header())));
            }
        }
        // Let the sample go back to the publisher before acking, as a callback returns.
        drop(msg);
        acks.publish_copy(&Header { frame_id: name.clone(), ..Default::default() })
            .map_err(|e| format!("freight: {e}"))?;
        if name == "stop" {
            break;
        }
    }
    println!("SAMPLES {}", serde_json::json!({ "latency_ns": samples }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_finds_a_wrong_byte_and_a_wrong_length() {
        let mut data = vec![7u8; 1000];
        assert_eq!(first_bad(&data, 1000, 7), None);
        assert!(first_bad(&data, 999, 7).unwrap().contains("1000 bytes, expected 999"));
        data[999] = 0;
        assert!(first_bad(&data, 1000, 7).unwrap().starts_with("byte 999 is 0"));
        assert!(first_bad(&[], 0, 7).is_some());
    }

    #[test]
    fn fill_values_are_never_zero() {
        assert!((0..2000).all(|k| fill_value(k) != 0));
        assert_eq!(fill_value(0), 1);
        assert_eq!(fill_value(254), 255);
        assert_eq!(fill_value(255), 1);
    }
}
