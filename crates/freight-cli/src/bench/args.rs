//! Command-line arguments of `freight bench` and the parsers they need.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::WaitMode;

/// Largest accepted message size. Both the shared-memory segments and the `memcpy` buffers are
/// allocated in full, several times over; beyond this a typo would eat the machine.
pub const MAX_SIZE: u64 = 4 << 30;

/// Transport names accepted by `--transports`; each has an implementation registered in
/// [`super::registered_transports`] (a unit test checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum TransportKind {
    /// freight, publisher and subscriber as threads of one process.
    Intra,
    /// freight over shared memory, zero-copy (the subscriber reads the publisher's memory).
    ShmLoan,
    /// freight over shared memory, copying the user's buffer into shared memory.
    ShmCopy,
    /// raw iceoryx2, written the way freight uses it (the baseline for intra and shm-loan).
    Iceoryx2,
    /// the same on iceoryx2's thread-safe service, which freight's endpoints use (not
    /// measured by default): what the thread-safe service costs.
    Iceoryx2Threadsafe,
    /// one in-process memcpy of the payload (the baseline for shm-copy).
    Memcpy,
    /// stock ROS 2 over Cyclone DDS on loopback: serialize, UDP, deserialize (not measured by
    /// default: its large rows take long).
    Dds,
    /// freight's C++ API, both sides C++, loaning shared memory (baseline: shm-loan; the
    /// default of --lang cpp).
    CppLoan,
    /// freight's C++ API, both sides C++, publish_copy of the user's buffer (baseline:
    /// shm-copy; the default of --lang cpp).
    CppCopy,
}

impl TransportKind {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Intra => "intra",
            TransportKind::ShmLoan => "shm-loan",
            TransportKind::ShmCopy => "shm-copy",
            TransportKind::Iceoryx2 => "iceoryx2",
            TransportKind::Iceoryx2Threadsafe => "iceoryx2-threadsafe",
            TransportKind::Memcpy => "memcpy",
            TransportKind::Dds => "dds",
            TransportKind::CppLoan => "cpp-loan",
            TransportKind::CppCopy => "cpp-copy",
        }
    }
}

/// `--wait` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    /// the waiting side sleeps in the OS until woken.
    Block,
    /// the waiting side busy-polls.
    Spin,
    /// one row for each.
    Both,
}

impl WaitArg {
    /// The wait modes to measure, in table order.
    pub fn modes(self) -> Vec<WaitMode> {
        match self {
            WaitArg::Block => vec![WaitMode::Block],
            WaitArg::Spin => vec![WaitMode::Spin],
            WaitArg::Both => vec![WaitMode::Spin, WaitMode::Block],
        }
    }
}

/// `--lang` values: whose API the publisher and subscriber use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// freight's Rust API and the Rust baselines (the transports of --transports).
    Rust,
    /// freight's Python API against the iceoryx2 Python binding, both Python to Python
    /// (`python -m freight.bench latency`).
    Python,
    /// freight's C++ API against the Rust API and raw iceoryx2, in the same run: unless
    /// --transports says otherwise, cpp-loan, shm-loan, iceoryx2, cpp-copy, shm-copy, memcpy.
    Cpp,
}

impl Lang {
    /// The transports a run measures when --transports is not given.
    pub fn default_transports(self) -> &'static [TransportKind] {
        use TransportKind::*;
        match self {
            Lang::Rust | Lang::Python => &[Intra, ShmLoan, ShmCopy, Iceoryx2, Memcpy],
            Lang::Cpp => &[CppLoan, ShmLoan, Iceoryx2, CppCopy, ShmCopy, Memcpy],
        }
    }
}

/// Arguments of `freight bench latency`.
#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    /// Comma-separated message sizes. Units: B, KiB, MiB, GiB (powers of 2) and KB, MB, GB
    /// (powers of 10); a bare number is bytes.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_size_arg,
        default_value = "8B,64KiB,1MiB,8MiB,32MiB,128MiB",
        value_name = "SIZES"
    )]
    pub sizes: Vec<usize>,

    /// Comma-separated transports to measure [default: intra,shm-loan,shm-copy,iceoryx2,memcpy;
    /// with --lang cpp: cpp-loan,shm-loan,iceoryx2,cpp-copy,shm-copy,memcpy].
    #[arg(long, value_delimiter = ',', value_enum, value_name = "TRANSPORTS")]
    pub transports: Option<Vec<TransportKind>>,

    /// How the receiving side waits: busy-poll (spin), sleep in the OS (block), or both.
    #[arg(long, value_enum, default_value = "both")]
    pub wait: WaitArg,

    /// Comma-separated numbers of subscriber processes (fan-out, 1 to 16): every message goes
    /// to all of them, the next one once all acked; latencies are to the last subscriber, and
    /// the table adds the publisher's time per publish. Above 1 only for shm-loan, shm-copy
    /// and iceoryx2. Subscribers are pinned round robin to the CPUs after the publisher's;
    /// with fewer CPUs than subscribers + 1 they share cores.
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = "N")]
    pub subscribers: Vec<usize>,

    /// Measured round trips per row (after warm-up); at least 20.
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub iterations: u64,

    /// Time limit per row in seconds; a row stops at whichever limit comes first.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub duration_per_row: Duration,

    /// Also write the rows as a JSON list to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Also plot p50 latency against size (log-log) as a PNG to FILE.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,

    /// Whose API to measure. python: freight's Python API against the iceoryx2 Python binding,
    /// busy-polling, run by `<python> -m freight.bench latency` with --sizes, --iterations,
    /// --duration-per-row and --json (--transports, --wait and --plot are for rust and cpp
    /// only). cpp: freight's C++ API against the Rust API and raw iceoryx2 in the same run (the
    /// program `make build` compiles from crates/freight-c/bench/latency.cpp).
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,

    /// With --lang python, also measure a message type of a user's own package (the fields of
    /// std_msgs/UInt8MultiArray, as `freight msg python` would generate it): what a user's type
    /// costs per message beside a built-in class, in the same run.
    #[arg(long)]
    pub user_type: bool,

    /// Python interpreter for --lang python, with freight's Python package installed.
    /// [default: $FREIGHT_PYTHON, else python3]
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// Arguments of `freight bench throughput`.
#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    /// Comma-separated numbers of subscriber processes (1 to 16).
    #[arg(long, value_delimiter = ',', default_value = "1,8", value_name = "N")]
    pub subscribers: Vec<usize>,

    /// Comma-separated message sizes (units as for `bench latency`).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_size_arg,
        default_value = "8B,1MiB,8MiB,32MiB",
        value_name = "SIZES"
    )]
    pub sizes: Vec<usize>,

    /// Comma-separated transports to measure: shm-loan, shm-copy, iceoryx2.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "shm-loan,iceoryx2", value_name = "TRANSPORTS")]
    pub transports: Vec<TransportKind>,

    /// How the subscribers wait for data: busy-poll (spin), sleep in the OS (block), or both.
    #[arg(long, value_enum, default_value = "both")]
    pub wait: WaitArg,

    /// How long the publisher publishes per row, in seconds.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub duration_per_row: Duration,

    /// Also write the rows as a JSON list to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Arguments of the hidden `freight bench peer` subcommand. Only the harness writes these.
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// The row, as JSON (a serialized `RowConfig`).
    #[arg(long)]
    pub row: String,
    /// CPU to pin the subscriber to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Give up after this many milliseconds.
    #[arg(long)]
    pub timeout_ms: u64,
    /// Expected number of messages, to size the sample buffer up front.
    #[arg(long, default_value_t = 0)]
    pub capacity: usize,
}

/// Parses one size such as `8B`, `64KiB`, `1MB` or `4096` into bytes.
///
/// Binary units (KiB, MiB, GiB) are powers of 1024, decimal units (KB, MB, GB) powers of 1000;
/// units are case-insensitive and may be separated from the number by spaces. Only whole
/// numbers are accepted, and the size must be between 1 byte and 4 GiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let hint = "write sizes like 8B, 64KiB, 1MiB or 1MB";
    if digits.is_empty() {
        return Err(format!("`{text}` is not a size; {hint}"));
    }
    let number: u64 = digits.parse().map_err(|_| format!("`{text}` is too large; sizes go up to 4GiB"))?;
    if unit.starts_with(['.', ',']) {
        return Err(format!("`{text}` is not a whole number; use a smaller unit instead (1536KiB, not 1.5MiB)"));
    }
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(format!(
                "`{text}` has an unknown unit `{}`; {hint} (units: B, KiB, MiB, GiB, KB, MB, GB)",
                unit.trim()
            ))
        }
    };
    let bytes = number
        .checked_mul(multiplier)
        .filter(|&b| b <= MAX_SIZE)
        .ok_or_else(|| format!("`{text}` is too large; sizes go up to 4GiB"))?;
    if bytes == 0 {
        return Err(format!("`{text}` is zero bytes; sizes must be at least 1B"));
    }
    Ok(bytes)
}

fn parse_size_arg(text: &str) -> Result<usize, String> {
    let bytes = parse_size(text)?;
    usize::try_from(bytes).map_err(|_| format!("`{text}` does not fit in memory on this machine"))
}

/// Parses a positive number of seconds such as `2` or `0.5`.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 =
        text.trim().parse().map_err(|_| format!("`{text}` is not a number of seconds; write e.g. 2 or 0.5"))?;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!("`{text}` is out of range; use a duration between 0 and 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Formats a size for humans: the largest binary unit the size reaches, as a whole number when
/// it divides exactly (`64 KiB`), otherwise with one decimal (`30.2 MiB`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (scale, unit) in UNITS {
        if bytes >= scale {
            return if bytes.is_multiple_of(scale) {
                format!("{} {unit}", bytes / scale)
            } else {
                format!("{:.1} {unit}", bytes as f64 / scale as f64)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_and_decimal_units() {
        assert_eq!(parse_size("8B"), Ok(8));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 * 1024));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("128MiB"), Ok(128 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1KB"), Ok(1_000));
        assert_eq!(parse_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("8 mib"), Ok(8 << 20));
        assert_eq!(parse_size(" 16kib "), Ok(16 << 10));
        assert_eq!(parse_size("4GiB"), Ok(MAX_SIZE));
    }

    #[test]
    fn rejects_bad_sizes_with_a_hint() {
        for bad in ["", "B", "MiB", "1.5MiB", "-1", "12XB", "1TiB", "0", "0KiB", "5GiB"] {
            let err = parse_size(bad).expect_err(bad);
            assert!(err.contains('`'), "error for {bad:?} should quote it: {err}");
        }
        assert!(parse_size("12XB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("5GiB").unwrap_err().contains("too large"));
        assert!(parse_size("99999999999999999999999").unwrap_err().contains("too large"));
        assert!(parse_size("0").unwrap_err().contains("at least 1B"));
        assert!(parse_size("1.5MiB").unwrap_err().contains("whole number"));
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(1000), "1000 B");
        assert_eq!(format_size(64 << 10), "64 KiB");
        assert_eq!(format_size(128 << 20), "128 MiB");
        assert_eq!(format_size(3840 * 2160 * 4), "31.6 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(1 << 30), "1 GiB");
    }

    #[test]
    fn parses_seconds() {
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("NaN").is_err());
    }

    #[test]
    fn transport_names_round_trip_through_clap() {
        for kind in TransportKind::value_variants() {
            let parsed = TransportKind::from_str(kind.as_str(), false).unwrap();
            assert_eq!(parsed, *kind);
        }
    }

    #[test]
    fn every_accepted_transport_has_an_implementation() {
        for kind in TransportKind::value_variants() {
            let found = crate::bench::find_transport(kind.as_str());
            assert!(found.is_ok(), "{} is accepted but not registered", kind.as_str());
        }
    }
}
