//! The QoS a publisher offered, in the words of rosbag2's metadata
//! (format version 8: integer enums, the list as one YAML string).

use yaml_rust2::{Yaml, YamlLoader};

/// `RMW_DURATION_INFINITE` as rosbag2 writes it: {sec, nsec}.
const INFINITE: (i64, i64) = (9_223_372_036, 854_775_807);

/// Whether a publisher resends lost samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reliability {
    /// Resends (rmw value 1).
    Reliable,
    /// Does not (rmw value 2).
    BestEffort,
}

/// Whether a publisher keeps samples for late subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Keeps them (rmw value 1).
    TransientLocal,
    /// Does not (rmw value 2).
    Volatile,
}

/// One publisher's offered QoS, as a bag records it so that `ros2 bag play`
/// offers the same.
///
/// ```
/// use freight_bag::{Durability, OfferedQos, Reliability};
/// let qos = OfferedQos { reliability: Reliability::Reliable, durability: Durability::Volatile };
/// let text = OfferedQos::to_yaml(&[qos]);
/// assert!(text.starts_with("- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2"));
/// assert_eq!(OfferedQos::parse_list(&text), vec![qos]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferedQos {
    /// Reliable or best effort.
    pub reliability: Reliability,
    /// Transient local or volatile.
    pub durability: Durability,
}

impl OfferedQos {
    /// The profiles as the YAML string of `offered_qos_profiles` (history
    /// "unknown" and depth 0, since a publisher does not announce them;
    /// deadline, lifespan and lease infinite, liveliness automatic).
    pub fn to_yaml(profiles: &[OfferedQos]) -> String {
        let mut out = String::new();
        for q in profiles {
            let reliability = match q.reliability {
                Reliability::Reliable => 1,
                Reliability::BestEffort => 2,
            };
            let durability = match q.durability {
                Durability::TransientLocal => 1,
                Durability::Volatile => 2,
            };
            let (sec, nsec) = INFINITE;
            out.push_str(&format!(
                "- history: 3\n  depth: 0\n  reliability: {reliability}\n  durability: {durability}\n"
            ));
            for name in ["deadline", "lifespan"] {
                out.push_str(&format!("  {name}:\n    sec: {sec}\n    nsec: {nsec}\n"));
            }
            out.push_str(&format!(
                "  liveliness: 1\n  liveliness_lease_duration:\n    sec: {sec}\n    nsec: {nsec}\n  \
                 avoid_ros_namespace_conventions: false\n"
            ));
        }
        out.truncate(out.trim_end().len());
        out
    }

    /// Reads the profiles back from `offered_qos_profiles` as version 8
    /// (integers) or version 9 (`reliable`, `transient_local`, ...) writes them;
    /// entries it cannot read are left out (the reader then offers defaults).
    pub fn parse_list(text: &str) -> Vec<OfferedQos> {
        let Ok(docs) = YamlLoader::load_from_str(text) else { return Vec::new() };
        let Some(Yaml::Array(list)) = docs.into_iter().next() else { return Vec::new() };
        list.iter().filter_map(Self::parse_one).collect()
    }

    /// One profile from a YAML mapping (version 8 or 9).
    pub(crate) fn parse_one(y: &Yaml) -> Option<OfferedQos> {
        let reliability = match &y["reliability"] {
            Yaml::Integer(1) => Reliability::Reliable,
            Yaml::Integer(2) => Reliability::BestEffort,
            Yaml::String(s) if s == "reliable" => Reliability::Reliable,
            Yaml::String(s) if s == "best_effort" => Reliability::BestEffort,
            _ => return None,
        };
        let durability = match &y["durability"] {
            Yaml::Integer(1) => Durability::TransientLocal,
            Yaml::Integer(2) => Durability::Volatile,
            Yaml::String(s) if s == "transient_local" => Durability::TransientLocal,
            Yaml::String(s) if s == "volatile" => Durability::Volatile,
            _ => return None,
        };
        Some(OfferedQos { reliability, durability })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_9_words_read_too_and_garbage_reads_as_nothing() {
        let v9 = "- history: unknown\n  reliability: best_effort\n  durability: transient_local\n";
        assert_eq!(
            OfferedQos::parse_list(v9),
            vec![OfferedQos { reliability: Reliability::BestEffort, durability: Durability::TransientLocal }]
        );
        assert!(OfferedQos::parse_list("{{{").is_empty());
        assert!(OfferedQos::parse_list("- reliability: 7\n  durability: 1").is_empty());
        assert!(OfferedQos::parse_list("").is_empty());
    }
}
