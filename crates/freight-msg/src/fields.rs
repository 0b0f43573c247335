//! Setting a message's fields from a tree of values, as ROS 2's
//! `rosidl_runtime_py.set_message_fields` sets them from a dictionary: what
//! `freight service call` does with the YAML on its command line.
//!
//! * a mapping sets the fields it names and leaves the others as they are (a
//!   new message's: their defaults); a name the type does not have is an error;
//! * a sequence sets an array, a sequence or a [`Buffer`](crate::Buffer); a
//!   fixed-size array takes exactly its length;
//! * a number must fit its field: `300` is no `uint8`, `1.5` no integer; a float
//!   field also takes an integer.
//!
//! An error names the field by its path (`header.stamp.sec`, `data[3]`).
//!
//! ```
//! use freight_msg::msgs::std_msgs::Header;
//! use freight_msg::{FieldValue, YamlField};
//!
//! let mut header = Header::default();
//! let stamp = FieldValue::Map(vec![("sec".into(), FieldValue::Int(7))]);
//! header.set_from(&FieldValue::Map(vec![("stamp".into(), stamp)])).unwrap();
//! assert_eq!(header.stamp.sec, 7);
//!
//! let wrong = FieldValue::Map(vec![("stamp".into(), FieldValue::Map(vec![("sec".into(), FieldValue::Float(1.5))]))]);
//! let e = header.set_from(&wrong).unwrap_err();
//! assert_eq!(e.to_string(), "field stamp.sec: expected an integer, got a float");
//! ```

use std::fmt;

use crate::bounds::ros_name;

/// A value to set a field from: what a YAML or JSON document, or a Python
/// dictionary, parses to.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// `null`, `~`, or nothing: sets nothing (the field keeps its value).
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// An integer, wide enough for every ROS 2 integer type.
    Int(i128),
    /// A number with a fraction or exponent, `.inf`, `.nan`.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence: an array's elements.
    Seq(Vec<FieldValue>),
    /// A mapping from field names to values, in the order written.
    Map(Vec<(String, FieldValue)>),
}

impl FieldValue {
    /// What the value is, for messages: "an integer", "a mapping".
    pub fn kind(&self) -> &'static str {
        match self {
            FieldValue::Null => "null",
            FieldValue::Bool(_) => "a boolean",
            FieldValue::Int(_) => "an integer",
            FieldValue::Float(_) => "a float",
            FieldValue::Str(_) => "a string",
            FieldValue::Seq(_) => "a sequence",
            FieldValue::Map(_) => "a mapping",
        }
    }
}

/// What is wrong with a value for a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// The value is of another kind than the field (a string for a number).
    #[error("expected {expected}, got {got}")]
    WrongKind {
        /// What the field takes: "an integer", "a mapping".
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
    /// A number that the field's type cannot hold.
    #[error("{value} does not fit a {ty}")]
    OutOfRange {
        /// The number as given.
        value: String,
        /// The field's type, as ROS 2's IDL names it (`uint8`, `float`).
        ty: &'static str,
    },
    /// A mapping names a field the message does not have.
    #[error("{message} has no field `{name}`; its fields are: {fields}")]
    UnknownField {
        /// The message type.
        message: &'static str,
        /// The name given.
        name: String,
        /// The fields it has, comma-separated.
        fields: String,
    },
    /// A fixed-size array got another number of elements.
    #[error("expected {expected} elements, got {got}")]
    WrongLength {
        /// The array's size.
        expected: usize,
        /// The sequence's length.
        got: usize,
    },
    /// A bounded sequence (`T[<=N]`) or string (`string<=N`) got more than
    /// its bound, which subscribers' deserializers would refuse.
    #[error("{got} {unit}, over the bound of {bound}")]
    OverBound {
        /// The bound `N`.
        bound: usize,
        /// The length given.
        got: usize,
        /// "elements" or "bytes".
        unit: &'static str,
    },
}

/// A value that could not be set: which field (its path from the message),
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FieldError {
    path: String,
    /// What is wrong.
    #[source]
    pub problem: FieldProblem,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "field {}: {}", self.path, self.problem)
        }
    }
}

impl FieldError {
    /// An error at the value being set (the path is added on the way out).
    pub fn new(problem: FieldProblem) -> FieldError {
        FieldError { path: String::new(), problem }
    }

    /// The field's path from the message (`header.stamp.sec`, `data[3]`);
    /// empty for the message itself.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The same error, in the field `name` of the message around it.
    pub fn within(mut self, name: &str) -> FieldError {
        self.path = crate::bounds::within(ros_name(name), &self.path);
        self
    }

    /// The same error, at element `index` of the sequence around it.
    pub fn at(mut self, index: usize) -> FieldError {
        self.path = match self.path.as_str() {
            "" => format!("[{index}]"),
            p if p.starts_with('[') => format!("[{index}]{p}"),
            p => format!("[{index}].{p}"),
        };
        self
    }
}

/// `value` must be of `expected` kind: the error if it is not.
pub fn wrong_kind(expected: &'static str, value: &FieldValue) -> FieldError {
    FieldError::new(FieldProblem::WrongKind { expected, got: value.kind() })
}

/// The fields a message's mapping sets: `value`'s pairs, or none for null.
/// Used by [`message!`](crate::message!).
pub fn mapping(value: &FieldValue) -> Result<&[(String, FieldValue)], FieldError> {
    match value {
        FieldValue::Map(pairs) => Ok(pairs),
        FieldValue::Null => Ok(&[]),
        other => Err(wrong_kind("a mapping", other)),
    }
}

/// The error for a name that is none of `fields` of `message`. Used by
/// [`message!`](crate::message!).
pub fn unknown_field(message: &'static str, name: &str, fields: &[&str]) -> FieldError {
    let fields = fields.iter().map(|f| ros_name(f)).collect::<Vec<_>>().join(", ");
    FieldError::new(FieldProblem::UnknownField { message, name: name.to_owned(), fields })
}

/// Whether the mapping key `key` names the declared field `field` (a raw
/// identifier's `r#` dropped).
pub fn names(field: &str, key: &str) -> bool {
    ros_name(field) == key
}

/// The elements of a sequence.
pub(crate) fn sequence(value: &FieldValue) -> Result<&[FieldValue], FieldError> {
    match value {
        FieldValue::Seq(items) => Ok(items),
        other => Err(wrong_kind("a sequence", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgs::sensor_msgs::{Image, Imu};
    use crate::msgs::std_msgs::{Header, UInt8MultiArray};
    use crate::YamlField;

    fn map(pairs: &[(&str, FieldValue)]) -> FieldValue {
        FieldValue::Map(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
    }

    #[test]
    fn named_fields_are_set_and_the_others_keep_their_defaults() {
        let mut image = Image::default();
        let header = map(&[("frame_id", FieldValue::Str("cam".into()))]);
        let pixels = FieldValue::Seq(vec![FieldValue::Int(1), FieldValue::Int(2), FieldValue::Int(255)]);
        image.set_from(&map(&[("header", header), ("width", FieldValue::Int(3)), ("data", pixels)])).unwrap();
        assert_eq!(image.header.frame_id, "cam");
        assert_eq!(image.width, 3);
        assert_eq!(image.data.as_slice(), Some(&[1u8, 2, 255][..]));
        assert_eq!(image.height, 0);
        assert_eq!(image.encoding, "");
    }

    #[test]
    fn null_sets_nothing_and_an_empty_mapping_neither() {
        let mut header = Header { frame_id: "kept".into(), ..Header::default() };
        header.set_from(&FieldValue::Null).unwrap();
        header.set_from(&map(&[])).unwrap();
        header.set_from(&map(&[("frame_id", FieldValue::Null)])).unwrap();
        assert_eq!(header.frame_id, "kept");
    }

    #[test]
    fn numbers_must_fit_their_field() {
        let mut array = UInt8MultiArray::default();
        let e = array.set_from(&map(&[("data", FieldValue::Seq(vec![FieldValue::Int(1), FieldValue::Int(300)]))]));
        assert_eq!(e.unwrap_err().to_string(), "field data[1]: 300 does not fit a uint8");
        let e = array.set_from(&map(&[("layout", map(&[("data_offset", FieldValue::Int(-1))]))])).unwrap_err();
        assert_eq!(e.path(), "layout.data_offset");
        assert_eq!(e.problem, FieldProblem::OutOfRange { value: "-1".into(), ty: "uint32" });

        let mut imu = Imu::default();
        imu.set_from(&map(&[("orientation", map(&[("x", FieldValue::Int(2))]))])).unwrap();
        assert_eq!(imu.orientation.x, 2.0);
        let too_big = map(&[("linear_acceleration_covariance", FieldValue::Seq(vec![FieldValue::Float(1e300); 9]))]);
        imu.set_from(&too_big).unwrap();
    }

    #[test]
    fn fixed_arrays_take_exactly_their_length() {
        let mut imu = Imu::default();
        let short = map(&[("orientation_covariance", FieldValue::Seq(vec![FieldValue::Float(1.0); 8]))]);
        let e = imu.set_from(&short).unwrap_err();
        assert_eq!(e.to_string(), "field orientation_covariance: expected 9 elements, got 8");
        let nine: Vec<FieldValue> = (0..9).map(|i| FieldValue::Float(f64::from(i))).collect();
        imu.set_from(&map(&[("orientation_covariance", FieldValue::Seq(nine))])).unwrap();
        assert_eq!(imu.orientation_covariance[8], 8.0);
    }

    #[test]
    fn a_wrong_kind_or_an_unknown_name_is_said_with_its_path() {
        let mut image = Image::default();
        let e = image.set_from(&map(&[("header", map(&[("stamp", FieldValue::Str("now".into()))]))])).unwrap_err();
        assert_eq!(e.to_string(), "field header.stamp: expected a mapping, got a string");
        let e = image.set_from(&map(&[("header", map(&[("frame", FieldValue::Str("x".into()))]))])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "field header: std_msgs/msg/Header has no field `frame`; its fields are: stamp, frame_id"
        );
        let e = image.set_from(&FieldValue::Int(3)).unwrap_err();
        assert_eq!(e.to_string(), "expected a mapping, got an integer");
        assert_eq!(e.path(), "");
    }

    #[test]
    fn float32_fields_refuse_what_only_a_float64_holds() {
        let mut imu = Imu::default();
        let e = imu.set_from(&map(&[("orientation", map(&[("w", FieldValue::Bool(true))]))])).unwrap_err();
        assert_eq!(e.to_string(), "field orientation.w: expected a number, got a boolean");
        let mut field = crate::msgs::sensor_msgs::RegionOfInterest::default();
        let e = field.set_from(&map(&[("do_rectify", FieldValue::Int(1))])).unwrap_err();
        assert_eq!(e.to_string(), "field do_rectify: expected a boolean, got an integer");
        let mut f = 0f32;
        assert_eq!(
            f.set_from(&FieldValue::Float(1e300)).unwrap_err().problem,
            FieldProblem::OutOfRange { value: "1e300".into(), ty: "float" }
        );
        f.set_from(&FieldValue::Float(f64::INFINITY)).unwrap();
        assert_eq!(f, f32::INFINITY);
    }
}
