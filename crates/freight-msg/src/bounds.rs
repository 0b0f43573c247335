//! The bounds of `.msg` fields (`string<=N`, `T[<=N]`), checked when a
//! message is encoded, as ROS 2's type support checks them when it
//! serializes (rmw_fastrtps refuses the message: "array size exceeds upper
//! bound"): what stock ROS 2 would not send, freight does not send either.
//! Received messages are not held to them (a freight reader takes what a
//! lenient writer sent). [`message!`](crate::message!) calls these for the
//! fields declared with bounds (`where (string(8))`).
//!
//! A string's bound counts bytes of UTF-8, as the length CDR carries does.
//!
//! ```
//! freight_msg::message! {
//!     pub struct Label = "my_msgs/msg/Label" {
//!         pub text: String where (string(4)),
//!         pub tags: Vec<String> where (sequence(2), strings(3)),
//!     }
//! }
//! use freight_msg::Message;
//! assert!(Label { text: "four".into(), tags: vec!["a".into()] }.to_cdr().is_ok());
//! let e = Label { text: "fives".into(), tags: vec![] }.to_cdr().unwrap_err();
//! assert_eq!(e.to_string(), "field `text`: a string<=4 holds at most 4 bytes, not 5");
//! ```

use crate::cdr::EncodeError;

/// `string<=bound field`.
pub fn string(s: &str, bound: usize, field: &str) -> Result<(), EncodeError> {
    OverBound::string(s.len(), bound)
        .map_or(Ok(()), |over| Err(EncodeError::OverBound { field: ros_name(field).into(), over }))
}

/// `T[<=bound] field`: its element count.
pub fn sequence<T>(items: &impl Items<T>, bound: usize, field: &str) -> Result<(), EncodeError> {
    OverBound::sequence(items.items().len(), bound)
        .map_or(Ok(()), |over| Err(EncodeError::OverBound { field: ros_name(field).into(), over }))
}

/// `string<=bound[...] field`: each of its strings (an error names the
/// element, `names[2]`).
pub fn strings(items: &impl Items<String>, bound: usize, field: &str) -> Result<(), EncodeError> {
    items.items().iter().enumerate().try_for_each(|(i, s)| string(s, bound, "").map_err(|e| e.at(i).within(field)))
}

/// A field's name as its `.msg` file says it: a Rust raw identifier
/// (`r#type`) without its `r#`.
pub(crate) fn ros_name(field: &str) -> &str {
    field.strip_prefix("r#").unwrap_or(field)
}

/// The elements of an array or sequence field.
pub trait Items<T> {
    /// The elements.
    fn items(&self) -> &[T];
}

impl<T> Items<T> for Vec<T> {
    fn items(&self) -> &[T] {
        self
    }
}

impl<T, const N: usize> Items<T> for [T; N] {
    fn items(&self) -> &[T] {
        self
    }
}

/// A string or sequence longer than its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverBound {
    /// `string<=bound` holding `len` bytes.
    #[error("a string<={bound} holds at most {bound} bytes, not {len}")]
    String {
        /// The bound.
        bound: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// `T[<=bound]` holding `len` elements.
    #[error("a sequence [<={bound}] holds at most {bound} elements, not {len}")]
    Sequence {
        /// The bound.
        bound: usize,
        /// Its element count.
        len: usize,
    },
}

impl OverBound {
    /// Whether a string of `len` bytes exceeds `bound`, and how.
    pub fn string(len: usize, bound: usize) -> Option<OverBound> {
        (len > bound).then_some(OverBound::String { bound, len })
    }

    /// Whether a sequence of `len` elements exceeds `bound`, and how.
    pub fn sequence(len: usize, bound: usize) -> Option<OverBound> {
        (len > bound).then_some(OverBound::Sequence { bound, len })
    }
}

/// The path of a field over its bound, `inner`, seen from around `segment`
/// (a field, `inner`, or an element of one, `inners[2]` or `[2]`): the path
/// an error gives, grown one level on the way out of a walk.
///
/// ```
/// use freight_msg::bounds::within;
/// assert_eq!(within("inners[2]", "label"), "inners[2].label");
/// assert_eq!(within("names", "[2]"), "names[2]");
/// assert_eq!(within("", "label"), "label"); // a level without a name
/// ```
pub fn within(segment: &str, inner: &str) -> String {
    match (segment, inner.chars().next()) {
        ("", _) => inner.to_string(),
        (_, None) => segment.to_string(),
        (_, Some('[')) => format!("{segment}{inner}"),
        _ => format!("{segment}.{inner}"),
    }
}
