//! `freight_qos`: the QoS of a publisher or subscription, as rclcpp's
//! `rclcpp::QoS` sets it.

use freight::QoS;

/// A publisher's or subscription's QoS (`freight_qos` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreightQos {
    /// Keep the last `depth` messages; 0 keeps all.
    pub depth: u32,
    /// Reliable (the default); false is best effort.
    pub reliable: bool,
    /// Transient local: late subscriptions get what was last published.
    pub transient_local: bool,
}

impl From<FreightQos> for QoS {
    fn from(q: FreightQos) -> QoS {
        let qos = if q.depth == 0 { QoS::keep_all() } else { QoS::keep_last(q.depth as usize) };
        let qos = if q.reliable { qos.reliable() } else { qos.best_effort() };
        if q.transient_local {
            qos.transient_local()
        } else {
            qos.volatile()
        }
    }
}

/// rclcpp's `rclcpp::QoS(depth)`: keep last `depth`, reliable, volatile.
#[no_mangle]
pub extern "C" fn freight_qos_keep_last(depth: u32) -> FreightQos {
    FreightQos { depth, reliable: true, transient_local: false }
}

/// rclcpp's `rclcpp::SensorDataQoS()`: keep last 5, best effort, volatile.
#[no_mangle]
pub extern "C" fn freight_qos_sensor_data() -> FreightQos {
    FreightQos { depth: 5, reliable: false, transient_local: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presets_are_freights() {
        assert_eq!(QoS::from(freight_qos_keep_last(10)), QoS::keep_last(10));
        assert_eq!(QoS::from(freight_qos_sensor_data()), QoS::sensor_data());
        assert_eq!(
            QoS::from(FreightQos { depth: 0, reliable: true, transient_local: true }),
            QoS::keep_all().transient_local()
        );
    }
}
