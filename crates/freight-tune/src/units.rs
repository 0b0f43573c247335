//! Parsers for the quantities `freight tune` takes on its command line: sizes (`512KiB`),
//! bit rates (`433Mbit`), durations (`100ms`), fractions (`1%`) and rates (`30Hz`).
//!
//! ```
//! use std::time::Duration;
//! use freight_tune::units;
//! assert_eq!(units::parse_size("512KiB"), Ok(524_288));
//! assert_eq!(units::parse_bitrate("433Mbit"), Ok(433e6));
//! assert_eq!(units::parse_duration("100ms"), Ok(Duration::from_millis(100)));
//! assert_eq!(units::parse_fraction("1%"), Ok(0.01));
//! assert_eq!(units::parse_hz("30Hz"), Ok(30.0));
//! assert!(units::parse_size("12 parsecs").is_err());
//! ```

use std::time::Duration;

/// A quantity that did not parse: the text, what was expected, and examples of what works.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not {expected}; write it like {examples}")]
pub struct UnitError {
    /// The text given.
    pub text: String,
    /// What it should have been ("a size", "a bit rate", ...).
    pub expected: &'static str,
    /// Examples of accepted spellings.
    pub examples: &'static str,
}

/// Splits `12.5 Mbit` into (12.5, "mbit"): a non-negative decimal number and a lowercase unit.
fn number_and_unit(text: &str) -> Option<(f64, String)> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    // Rust's f64 parser also takes "inf" and "NaN"; only digits and one dot get here.
    let value: f64 = num.parse().ok()?;
    value.is_finite().then(|| (value, unit.trim().to_ascii_lowercase()))
}

/// A size in bytes: `512KiB`, `64KB`, `1MiB`, `1500` or `1500B`. Binary units (KiB, MiB,
/// GiB) are powers of 1024, decimal ones (KB, MB, GB) powers of 1000; units are
/// case-insensitive. Fractions are allowed when the result is a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        text: text.into(),
        expected: "a size in bytes (a whole number of bytes, up to 1 TiB)",
        examples: "512KiB, 64KB, 1MiB or 1500",
    };
    let (value, unit) = number_and_unit(text).ok_or_else(err)?;
    let scale: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        _ => return Err(err()),
    };
    let bytes = value * scale;
    if bytes.fract() != 0.0 || bytes > (1u64 << 40) as f64 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// A bit rate in bits per second: `433Mbit`, `433Mbps`, `433Mbit/s`, `1Gbit`, `800kbit`,
/// or a plain number of bit/s. Units are decimal (as link rates are quoted) and
/// case-insensitive; `MB/s`-style byte rates are accepted too and multiplied by 8.
pub fn parse_bitrate(text: &str) -> Result<f64, UnitError> {
    let err = || UnitError { text: text.into(), expected: "a bit rate", examples: "433Mbit, 433Mbps, 1Gbit or 54MB/s" };
    let (value, unit) = number_and_unit(text).ok_or_else(err)?;
    // Byte rates are told apart by an upper-case `B`, which lower-casing would lose.
    let original = text.trim().trim_end_matches("/s");
    let scale = match unit.trim_end_matches("/s").trim_end_matches("ps") {
        _ if original.ends_with("kB") || original.ends_with("KB") => 8e3,
        _ if original.ends_with("MB") => 8e6,
        _ if original.ends_with("GB") => 8e9,
        "" | "bit" | "b" => 1.0,
        "kbit" | "k" | "kb" => 1e3,
        "mbit" | "m" | "mb" => 1e6,
        "gbit" | "g" | "gb" => 1e9,
        _ => return Err(err()),
    };
    Ok(value * scale)
}

/// A duration: `100ms`, `20s`, `1.5s`, `2min`, `500us`, or `0`. A plain non-zero number
/// without a unit is refused (seconds or milliseconds? the reader cannot tell).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let err = || UnitError { text: text.into(), expected: "a duration", examples: "100ms, 20s, 1.5s or 2min" };
    let (value, unit) = number_and_unit(text).ok_or_else(err)?;
    let scale = match unit.as_str() {
        "" if value == 0.0 => 0.0,
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| err())
}

/// A fraction: `1%`, `0.5 %` or a plain number `0.01`. It must lie in [0, 1].
pub fn parse_fraction(text: &str) -> Result<f64, UnitError> {
    let err = || UnitError { text: text.into(), expected: "a fraction between 0 and 1", examples: "1%, 20% or 0.01" };
    let (value, unit) = number_and_unit(text).ok_or_else(err)?;
    let fraction = match unit.as_str() {
        "%" => value / 100.0,
        "" => value,
        _ => return Err(err()),
    };
    if (0.0..=1.0).contains(&fraction) {
        Ok(fraction)
    } else {
        Err(err())
    }
}

/// A rate in Hz: `30`, `30Hz`, `2.5 hz`.
pub fn parse_hz(text: &str) -> Result<f64, UnitError> {
    let err = || UnitError { text: text.into(), expected: "a rate in Hz", examples: "30, 30Hz or 2.5Hz" };
    let (value, unit) = number_and_unit(text).ok_or_else(err)?;
    match unit.as_str() {
        "" | "hz" => Ok(value),
        _ => Err(err()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("64KB"), Ok(64_000));
        assert_eq!(parse_size("64 kb"), Ok(64_000));
        assert_eq!(parse_size("1.5MiB"), Ok(1536 * 1024));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert!(parse_size("1.5B").is_err());
        assert!(parse_size("-1KiB").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("inf").is_err());
        assert!(parse_size("5PiB").is_err());
    }

    #[test]
    fn bitrates() {
        assert_eq!(parse_bitrate("433Mbit"), Ok(433e6));
        assert_eq!(parse_bitrate("433 Mbps"), Ok(433e6));
        assert_eq!(parse_bitrate("433Mbit/s"), Ok(433e6));
        assert_eq!(parse_bitrate("1Gbit"), Ok(1e9));
        assert_eq!(parse_bitrate("54MB/s"), Ok(432e6));
        assert_eq!(parse_bitrate("1000"), Ok(1000.0));
        assert!(parse_bitrate("fast").is_err());
        assert!(parse_bitrate("433Mbaud").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("20").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn fractions_and_rates() {
        assert_eq!(parse_fraction("1%"), Ok(0.01));
        assert_eq!(parse_fraction("0.2"), Ok(0.2));
        assert!(parse_fraction("120%").is_err());
        assert!(parse_fraction("lots").is_err());
        assert_eq!(parse_hz("30"), Ok(30.0));
        assert_eq!(parse_hz("30Hz"), Ok(30.0));
        assert!(parse_hz("30kHz").is_err());
    }
}
