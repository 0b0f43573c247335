//! What `freight topic` and `freight service` take as `ros2` takes it: interface type
//! names, the domain, rates.

use freight::{Context, ContextError};

/// `pkg/<kind>/Type`, from that or from `pkg/Type` as `ros2` also takes it; `kind` is
/// `msg` or `srv`.
fn full_type_name(text: &str, kind: &str) -> Result<String, String> {
    match text.trim().split('/').collect::<Vec<_>>()[..] {
        [pkg, name] if !pkg.is_empty() && !name.is_empty() => Ok(format!("{pkg}/{kind}/{name}")),
        [pkg, k, name] if k == kind && !pkg.is_empty() && !name.is_empty() => Ok(text.trim().to_string()),
        _ => Err(format!("`{text}` is not a {kind} type; write it as pkg/{kind}/Type (or pkg/Type)")),
    }
}

/// A message type name, for clap.
pub fn message_type(text: &str) -> Result<String, String> {
    full_type_name(text, "msg")
}

/// A service type name, for clap.
pub fn service_type(text: &str) -> Result<String, String> {
    full_type_name(text, "srv")
}

/// A rate in Hz, for clap: more than 0, at most a million.
pub fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(hz) if hz.is_finite() && hz > 0.0 && hz <= 1e6 => Ok(hz),
        _ => Err(format!("`{text}` is not a rate; give times per second, more than 0 and at most 1000000")),
    }
}

/// A context on `domain` (else `ROS_DOMAIN_ID`, else 0), with the network plane.
pub fn context(domain: Option<u32>) -> Result<Context, ContextError> {
    match domain {
        Some(d) => Context::builder().domain_id(d).create(),
        None => Context::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_taken_with_or_without_their_kind() {
        assert_eq!(message_type("sensor_msgs/Image").as_deref(), Ok("sensor_msgs/msg/Image"));
        assert_eq!(message_type(" std_msgs/msg/UInt8MultiArray ").as_deref(), Ok("std_msgs/msg/UInt8MultiArray"));
        assert_eq!(service_type("std_srvs/SetBool").as_deref(), Ok("std_srvs/srv/SetBool"));
        for bad in ["String", "/String", "a/b/c", "std_msgs/srv/X", "pkg/"] {
            assert!(message_type(bad).is_err(), "{bad}");
        }
        assert!(service_type("std_srvs/msg/SetBool").unwrap_err().contains("pkg/srv/Type"));
    }

    #[test]
    fn rates_are_positive_and_bounded() {
        assert_eq!(rate(" 2.5 "), Ok(2.5));
        for bad in ["0", "-1", "fast", "inf", "NaN", "1e7"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }
}
