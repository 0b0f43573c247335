//! Messages of a type known only at run time, carried as freight carries
//! every message in a frame: the small fields as CDR in which each buffer
//! field is written as its ordinal (a `u32`), and the buffers beside them.
//!
//! A [`MessageLayout`] says where a type's buffer fields are. Whoever has the
//! type's definition builds it (the C ABI builds one from the `.msg` text a
//! generated C++ type carries); [`GenericMessage`] then reads and writes the
//! same CDR a generated Rust type of that definition reads and writes, with
//! the buffers going through a [`BufferEncoder`] or [`BufferDecoder`] as
//! theirs do: to a frame's buffer table, or inline for DDS.
//!
//! Decoding walks the layout over bytes from other processes and the
//! network: every length is checked against what remains before anything is
//! allocated, and a layout cannot contain itself (it is built bottom-up from
//! [`Arc`]s), so a walk never recurses without end.
//!
//! ```
//! use std::sync::Arc;
//! use freight_msg::generic::{FieldKind, GenericMessage, Item, MessageLayout, Number, StructLayout};
//! use freight_msg::message::InlineBuffers;
//! use freight_msg::{Buffer, CdrWriter, ElementInfo, Message};
//! use freight_msg::msgs::std_msgs::UInt8MultiArray;
//!
//! // `uint8[] data` after a fixed-size field, as a user's `.msg` might say.
//! let layout = Arc::new(MessageLayout::new(
//!     "my_msgs/msg/Blob",
//!     0x1234,
//!     StructLayout::new(vec![
//!         ("id".into(), FieldKind::Single(Item::Number(Number::Four))),
//!         ("data".into(), FieldKind::Buffer(ElementInfo::of::<u8>())),
//!     ]),
//! ));
//! let mut fields = CdrWriter::new();
//! fields.write_u32(7);
//! fields.write_u32(0); // buffer field 0
//! let blob = GenericMessage::new(layout, fields.finish(), vec![Buffer::from(vec![1u8, 2, 3]).raw().clone()])?;
//! assert_eq!(blob.to_cdr()?, vec![0, 1, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3]);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use crate::bounds::OverBound;
use crate::cdr::DecodeErrorKind;
use crate::message::InlineBuffers;
use crate::{BufferDecoder, BufferEncoder, CdrReader, CdrWriter, DecodeError, ElementInfo, EncodeError, RawBuffer};

/// A message type known at run time: its ROS 2 name, the hash freight's
/// endpoints match on (`Message::TYPE_HASH` of the generated Rust type of
/// the same definition), and its fields.
#[derive(Debug)]
pub struct MessageLayout {
    type_name: String,
    hash: u64,
    root: Arc<StructLayout>,
}

impl MessageLayout {
    /// The type `type_name` (`pkg/msg/Name`) with the fields of `root`.
    pub fn new(type_name: impl Into<String>, hash: u64, root: StructLayout) -> MessageLayout {
        MessageLayout { type_name: type_name.into(), hash, root: Arc::new(root) }
    }

    /// The same type with the fields `before` written ahead of its own:
    /// what a service carries, a request header and then the message, under
    /// the message's name and hash. The message is a field without a name,
    /// so an error names its fields as the message's own.
    pub fn prefixed(&self, before: Vec<(String, FieldKind)>) -> MessageLayout {
        let mut fields = before;
        fields.push((String::new(), FieldKind::Single(Item::Message(self.root.clone()))));
        MessageLayout { type_name: self.type_name.clone(), hash: self.hash, root: Arc::new(StructLayout::new(fields)) }
    }

    /// The ROS 2 type name, `pkg/msg/Name`.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// The hash endpoints match on.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The DDS type name ROS 2 uses (`pkg::msg::dds_::Name_`).
    pub fn dds_type_name(&self) -> String {
        let (path, name) = self.type_name.rsplit_once('/').unwrap_or(("", &self.type_name));
        format!("{}::dds_::{name}_", path.replace('/', "::"))
    }

    /// The fields.
    pub fn root(&self) -> &Arc<StructLayout> {
        &self.root
    }

    /// How many buffer fields a message of this type has when its sequences
    /// are empty (what a loan lends: buffers inside sequences come and go
    /// with their elements).
    pub fn fixed_buffer_count(&self) -> usize {
        self.root.fixed_buffers
    }
}

/// The fields of one message type, in wire order.
#[derive(Debug)]
pub struct StructLayout {
    fields: Vec<FieldKind>,
    /// The fields' names, which errors give.
    names: Vec<String>,
    /// The fewest bytes one value occupies: bounds sequence lengths.
    min_size: usize,
    fixed_buffers: usize,
}

impl StructLayout {
    /// A message of `fields`, each with its name. One without fields is
    /// written as CDR writes an empty structure: one zero byte.
    pub fn new(named: Vec<(String, FieldKind)>) -> StructLayout {
        let (names, fields): (Vec<String>, Vec<FieldKind>) = named.into_iter().unzip();
        let min_size =
            if fields.is_empty() { 1 } else { fields.iter().fold(0usize, |sum, f| sum.saturating_add(f.min_size())) };
        let fixed_buffers = fields.iter().fold(0usize, |sum, f| {
            sum.saturating_add(match f {
                FieldKind::Buffer(_) => 1,
                FieldKind::Single(Item::Message(m)) => m.fixed_buffers,
                FieldKind::Array(Item::Message(m), n) => m.fixed_buffers.saturating_mul(*n),
                _ => 0,
            })
        });
        StructLayout { fields, names, min_size, fixed_buffers }
    }

    /// The fields.
    pub fn fields(&self) -> &[FieldKind] {
        &self.fields
    }
}

/// How one field is laid out.
#[derive(Debug)]
pub enum FieldKind {
    /// One value (`T`).
    Single(Item),
    /// A fixed number of values, no length on the wire (`T[N]`).
    Array(Item, usize),
    /// A length, then the values (`T[]` of what is not a buffer).
    Sequence(Item),
    /// A length of at most the bound, then the values (`T[<=N]`): the bound
    /// is checked when a message is made ([`GenericMessage::new`]), not
    /// when one is read.
    BoundedSequence(Item, usize),
    /// A buffer field (`T[]`, `T` a number other than `bool`): a sequence on
    /// the wire, its ordinal in a frame.
    Buffer(ElementInfo),
}

impl FieldKind {
    fn min_size(&self) -> usize {
        match self {
            FieldKind::Single(item) => item.min_size(),
            FieldKind::Array(item, n) => item.min_size().saturating_mul(*n),
            FieldKind::Sequence(_) | FieldKind::BoundedSequence(..) | FieldKind::Buffer(_) => 4,
        }
    }
}

/// The element of a field.
#[derive(Debug)]
pub enum Item {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// A number, copied as its bytes.
    Number(Number),
    /// `string`.
    String,
    /// `string<=N`: its bound, in bytes, checked as a
    /// [`FieldKind::BoundedSequence`]'s is.
    BoundedString(usize),
    /// A nested message.
    Message(Arc<StructLayout>),
}

impl Item {
    fn min_size(&self) -> usize {
        match self {
            Item::Bool => 1,
            Item::Number(n) => n.size(),
            // A length and the terminating NUL.
            Item::String | Item::BoundedString(_) => 5,
            Item::Message(m) => m.min_size,
        }
    }
}

/// The size of a number, which is also its CDR alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Number {
    /// `byte`, `char`, `int8`, `uint8`.
    One,
    /// `int16`, `uint16`.
    Two,
    /// `int32`, `uint32`, `float32`.
    Four,
    /// `int64`, `uint64`, `float64`.
    Eight,
}

impl Number {
    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            Number::One => 1,
            Number::Two => 2,
            Number::Four => 4,
            Number::Eight => 8,
        }
    }
}

/// A message of a [`MessageLayout`]: its small fields as CDR with each buffer
/// field written as its ordinal, and its buffers, in order.
#[derive(Debug, Clone)]
pub struct GenericMessage {
    layout: Arc<MessageLayout>,
    fields: Vec<u8>,
    buffers: Vec<RawBuffer>,
}

impl GenericMessage {
    /// The message whose small fields are `fields` (CDR with its encapsulation
    /// header, buffer fields as ordinals 0, 1, … in order) and whose buffers
    /// are `buffers`. Fails when `fields` does not follow the layout, names
    /// buffers out of order or ones not given, or leaves some unnamed, when a
    /// buffer is not a whole number of its elements, or when a string or
    /// sequence is over its `.msg` bound ([`DecodeErrorKind::OverBound`]).
    pub fn new(layout: Arc<MessageLayout>, fields: Vec<u8>, buffers: Vec<RawBuffer>) -> Result<Self, DecodeError> {
        Self::made(layout, fields, buffers, Bounds::Check)
    }

    /// As [`new`](Self::new), for a message that arrived in parts (a service
    /// request without its header) or a copy of one made before: it is not
    /// held to its bounds, as no received message is.
    pub fn received(layout: Arc<MessageLayout>, fields: Vec<u8>, buffers: Vec<RawBuffer>) -> Result<Self, DecodeError> {
        Self::made(layout, fields, buffers, Bounds::Ignore)
    }

    fn made(
        layout: Arc<MessageLayout>,
        fields: Vec<u8>,
        buffers: Vec<RawBuffer>,
        bounds: Bounds,
    ) -> Result<Self, DecodeError> {
        let mut r = CdrReader::new(&fields)?;
        let mut named = 0usize;
        walk(&layout.root, bounds, &mut r, &mut Discard, &mut |r, _, element| {
            let at = r.read_u32()? as usize;
            let bad = |why: String| Walk::Decode(r.error(DecodeErrorKind::Buffer(why)));
            if at != named {
                return Err(bad(format!("buffer {at} where buffer {named} was due")));
            }
            let buffer = buffers.get(at).ok_or_else(|| bad(format!("buffer {at} was not given")))?;
            if buffer.len_bytes() % element.size != 0 {
                return Err(bad(format!(
                    "buffer {at}: {} bytes is not a whole number of {}",
                    buffer.len_bytes(),
                    element.ros_name
                )));
            }
            named += 1;
            Ok(())
        })
        .map_err(Walk::into_decode)?;
        r.finish()?;
        if named != buffers.len() {
            return Err(DecodeError {
                offset: fields.len(),
                kind: DecodeErrorKind::Buffer(format!("{} buffers given, the fields name {named}", buffers.len())),
            });
        }
        Ok(GenericMessage { layout, fields, buffers })
    }

    /// Reads a message of `layout` from CDR (encapsulation header first), its
    /// buffer fields through `bufs`: a frame's buffer table, or inline.
    pub fn read(layout: Arc<MessageLayout>, bytes: &[u8], bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        let mut r = CdrReader::new(bytes)?;
        let mut w = CdrWriter::with_capacity(bytes.len().min(4096));
        let mut buffers = Vec::new();
        walk(&layout.root, Bounds::Ignore, &mut r, &mut w, &mut |r, w, element| {
            let raw = bufs.read_buffer(r, element).map_err(Walk::Decode)?;
            let ordinal =
                u32::try_from(buffers.len()).map_err(|_| Walk::Encode(EncodeError::TooLong(buffers.len())))?;
            w.write_u32(ordinal);
            buffers.push(raw);
            Ok(())
        })
        .map_err(Walk::into_decode)?;
        r.finish()?;
        Ok(GenericMessage { layout, fields: w.finish(), buffers })
    }

    /// Writes the message at `w`'s position, its buffer fields through `bufs`.
    pub fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        let mut r = CdrReader::new(&self.fields).map_err(Walk::Decode).map_err(Walk::into_encode)?;
        walk(&self.layout.root, Bounds::Ignore, &mut r, w, &mut |r, w, element| {
            // `new` and `read` checked the ordinals: each names a buffer.
            let at = r.read_u32()? as usize;
            let raw =
                self.buffers.get(at).ok_or_else(|| Walk::Encode(EncodeError::Buffer(format!("no buffer {at}"))))?;
            bufs.write_buffer(w, raw, element).map_err(Walk::Encode)
        })
        .map_err(Walk::into_encode)
    }

    /// Plain CDR with the buffers inline, as a stock ROS 2 node expects.
    pub fn to_cdr(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w =
            CdrWriter::with_capacity(self.fields.len() + self.buffers.iter().map(RawBuffer::len_bytes).sum::<usize>());
        self.write(&mut w, &mut InlineBuffers)?;
        Ok(w.finish())
    }

    /// Its type.
    pub fn layout(&self) -> &Arc<MessageLayout> {
        &self.layout
    }

    /// The small fields: CDR, buffer fields as ordinals.
    pub fn fields(&self) -> &[u8] {
        &self.fields
    }

    /// The buffers, in the order of their ordinals.
    pub fn buffers(&self) -> &[RawBuffer] {
        &self.buffers
    }

    /// The small fields and the buffers, taken out.
    pub fn into_parts(self) -> (Vec<u8>, Vec<RawBuffer>) {
        (self.fields, self.buffers)
    }
}

/// Why a walk stopped: the input did not follow the layout, or the output
/// could not take it.
enum Walk {
    Decode(DecodeError),
    Encode(EncodeError),
}

impl From<DecodeError> for Walk {
    fn from(e: DecodeError) -> Self {
        Walk::Decode(e)
    }
}

impl From<EncodeError> for Walk {
    fn from(e: EncodeError) -> Self {
        Walk::Encode(e)
    }
}

impl Walk {
    /// A bound exceeded inside `segment` (a field, or an element of one):
    /// the path grows at its front on the way out (`label`, then
    /// `inner.label`, then `inners[2].label`).
    fn within(self, segment: impl FnOnce() -> String) -> Walk {
        match self {
            Walk::Decode(DecodeError { offset, kind: DecodeErrorKind::OverBound { field, over } }) => {
                let field = crate::bounds::within(&segment(), &field);
                Walk::Decode(DecodeError { offset, kind: DecodeErrorKind::OverBound { field, over } })
            }
            other => other,
        }
    }

    fn into_decode(self) -> DecodeError {
        match self {
            Walk::Decode(e) => e,
            // Only a sequence longer than 2^32 fails to encode, and no input
            // that was read can hold one.
            Walk::Encode(e) => DecodeError { offset: 0, kind: DecodeErrorKind::Buffer(e.to_string()) },
        }
    }

    fn into_encode(self) -> EncodeError {
        match self {
            Walk::Encode(e) => e,
            // The message's own fields, checked when it was made.
            Walk::Decode(e) => EncodeError::Buffer(format!("small fields do not follow the layout: {e}")),
        }
    }
}

/// Where a walk writes: CDR, or nowhere (to check input only).
trait Sink {
    fn u8(&mut self, v: u8);
    fn u16(&mut self, v: u16);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    fn len(&mut self, n: usize) -> Result<(), EncodeError>;
    fn string(&mut self, s: &str) -> Result<(), EncodeError>;
}

impl Sink for CdrWriter {
    fn u8(&mut self, v: u8) {
        self.write_u8(v)
    }
    fn u16(&mut self, v: u16) {
        self.write_u16(v)
    }
    fn u32(&mut self, v: u32) {
        self.write_u32(v)
    }
    fn u64(&mut self, v: u64) {
        self.write_u64(v)
    }
    fn len(&mut self, n: usize) -> Result<(), EncodeError> {
        self.write_len(n)
    }
    fn string(&mut self, s: &str) -> Result<(), EncodeError> {
        self.write_string(s)
    }
}

struct Discard;

impl Sink for Discard {
    fn u8(&mut self, _: u8) {}
    fn u16(&mut self, _: u16) {}
    fn u32(&mut self, _: u32) {}
    fn u64(&mut self, _: u64) {}
    fn len(&mut self, _: usize) -> Result<(), EncodeError> {
        Ok(())
    }
    fn string(&mut self, _: &str) -> Result<(), EncodeError> {
        Ok(())
    }
}

/// Whether a walk holds strings and sequences to their bounds: a message
/// being made is, one being read is not (a stock ROS 2 writer would not
/// have sent it, and a freight reader takes what a lenient one did).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bounds {
    Check,
    Ignore,
}

impl Bounds {
    fn check(self, r: &CdrReader<'_>, over: Option<OverBound>) -> Result<(), Walk> {
        match over.filter(|_| self == Bounds::Check) {
            Some(over) => Err(Walk::Decode(r.error(DecodeErrorKind::OverBound { field: String::new(), over }))),
            None => Ok(()),
        }
    }
}

/// Reads one message of `layout` from `r` and writes it to `w`, buffer
/// fields through `buffer`.
fn walk<S: Sink>(
    layout: &StructLayout,
    bounds: Bounds,
    r: &mut CdrReader<'_>,
    w: &mut S,
    buffer: &mut dyn FnMut(&mut CdrReader<'_>, &mut S, ElementInfo) -> Result<(), Walk>,
) -> Result<(), Walk> {
    if layout.fields.is_empty() {
        // The placeholder byte of an empty structure: whatever it holds, it
        // is written as the generated types write it.
        r.read_u8()?;
        w.u8(0);
        return Ok(());
    }
    for (field, name) in layout.fields.iter().zip(&layout.names) {
        let element = |i: usize| move || format!("{name}[{i}]");
        match field {
            FieldKind::Single(item) => walk_item(item, bounds, r, w, buffer).map_err(|e| e.within(|| name.clone()))?,
            FieldKind::Array(item, n) => {
                for i in 0..*n {
                    walk_item(item, bounds, r, w, buffer).map_err(|e| e.within(element(i)))?;
                }
            }
            FieldKind::Sequence(item) | FieldKind::BoundedSequence(item, _) => {
                let n = r.read_len(item.min_size())?;
                if let FieldKind::BoundedSequence(_, bound) = field {
                    bounds.check(r, OverBound::sequence(n, *bound)).map_err(|e| e.within(|| name.clone()))?;
                }
                w.len(n)?;
                for i in 0..n {
                    walk_item(item, bounds, r, w, buffer).map_err(|e| e.within(element(i)))?;
                }
            }
            FieldKind::Buffer(element) => buffer(r, w, *element)?,
        }
    }
    Ok(())
}

fn walk_item<S: Sink>(
    item: &Item,
    bounds: Bounds,
    r: &mut CdrReader<'_>,
    w: &mut S,
    buffer: &mut dyn FnMut(&mut CdrReader<'_>, &mut S, ElementInfo) -> Result<(), Walk>,
) -> Result<(), Walk> {
    match item {
        Item::Bool => w.u8(u8::from(r.read_bool()?)),
        Item::Number(Number::One) => w.u8(r.read_u8()?),
        Item::Number(Number::Two) => w.u16(r.read_u16()?),
        Item::Number(Number::Four) => w.u32(r.read_u32()?),
        Item::Number(Number::Eight) => w.u64(r.read_u64()?),
        Item::String => w.string(&r.read_string()?)?,
        Item::BoundedString(bound) => {
            let s = r.read_string()?;
            bounds.check(r, OverBound::string(s.len(), *bound))?;
            w.string(&s)?
        }
        Item::Message(m) => walk(m, bounds, r, w, buffer)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgs::sensor_msgs::Image;
    use crate::msgs::std_msgs::Header;
    use crate::{Buffer, Message};

    /// `sensor_msgs/msg/Image`, by hand, as the C ABI builds it from the `.msg` text.
    fn image_layout() -> Arc<MessageLayout> {
        let four = || FieldKind::Single(Item::Number(Number::Four));
        let time = Arc::new(StructLayout::new(vec![("sec".into(), four()), ("nanosec".into(), four())]));
        let header = Arc::new(StructLayout::new(vec![
            ("stamp".into(), FieldKind::Single(Item::Message(time))),
            ("frame_id".into(), FieldKind::Single(Item::String)),
        ]));
        Arc::new(MessageLayout::new(
            Image::TYPE_NAME,
            Image::TYPE_HASH,
            StructLayout::new(vec![
                ("header".into(), FieldKind::Single(Item::Message(header))),
                ("height".into(), four()),
                ("width".into(), four()),
                ("encoding".into(), FieldKind::Single(Item::String)),
                ("is_bigendian".into(), FieldKind::Single(Item::Number(Number::One))),
                ("step".into(), four()),
                ("data".into(), FieldKind::Buffer(ElementInfo::of::<u8>())),
            ]),
        ))
    }

    fn image() -> Image {
        Image {
            header: Header { frame_id: "camera".into(), ..Default::default() },
            width: 3,
            height: 2,
            encoding: "mono8".into(),
            is_bigendian: 0,
            step: 3,
            data: Buffer::from(vec![1u8, 2, 3, 4, 5, 6]),
        }
    }

    /// `string<=4 name` and `uint16[<=2] ids`: a message is made only within
    /// the bounds, one is read whatever they hold.
    #[test]
    fn bounds_hold_for_messages_made_not_for_messages_read() {
        let layout = Arc::new(MessageLayout::new(
            "my_msgs/msg/Tag",
            7,
            StructLayout::new(vec![
                ("name".into(), FieldKind::Single(Item::BoundedString(4))),
                ("ids".into(), FieldKind::BoundedSequence(Item::Number(Number::Two), 2)),
            ]),
        ));
        let fields = |name: &str, ids: &[u16]| {
            let mut w = CdrWriter::new();
            w.write_string(name).unwrap();
            w.write_len(ids.len()).unwrap();
            ids.iter().for_each(|&i| w.write_u16(i));
            w.finish()
        };
        assert!(GenericMessage::new(layout.clone(), fields("four", &[1, 2]), vec![]).is_ok());
        let e = GenericMessage::new(layout.clone(), fields("fives", &[]), vec![]).unwrap_err();
        let over = OverBound::String { bound: 4, len: 5 };
        assert_eq!(e.kind, DecodeErrorKind::OverBound { field: "name".into(), over });
        let e = GenericMessage::new(layout.clone(), fields("", &[1, 2, 3]), vec![]).unwrap_err();
        assert!(e.to_string().ends_with("field `ids`: a sequence [<=2] holds at most 2 elements, not 3"), "{e}");
        let received = GenericMessage::received(layout.clone(), fields("fives", &[1, 2, 3]), vec![]).expect("taken");
        assert_eq!(received.to_cdr().unwrap(), fields("fives", &[1, 2, 3]));
        let read = GenericMessage::read(layout, &fields("fives", &[1, 2, 3]), &mut InlineBuffers).expect("read");
        assert_eq!(read.to_cdr().unwrap(), fields("fives", &[1, 2, 3]));
    }

    /// An error names the field over its bound by its path from the message:
    /// through nested messages, array and sequence elements, and a service's
    /// request header, which adds no name of its own.
    #[test]
    fn a_bound_exceeded_is_named_by_its_path() {
        let label = Arc::new(StructLayout::new(vec![("text".into(), FieldKind::Single(Item::BoundedString(2)))]));
        let layout = MessageLayout::new(
            "my_msgs/msg/Labels",
            9,
            StructLayout::new(vec![
                ("first".into(), FieldKind::Single(Item::Message(label.clone()))),
                ("pair".into(), FieldKind::Array(Item::Message(label.clone()), 2)),
                ("more".into(), FieldKind::Sequence(Item::Message(label))),
                ("names".into(), FieldKind::Sequence(Item::BoundedString(1))),
            ]),
        );
        // Each string is "ok" (within its bound) but the one at `over`.
        let fields = |over: usize, header: bool| {
            let mut w = CdrWriter::new();
            if header {
                w.write_u64(1);
                w.write_u64(2);
            }
            let mut k = 0;
            let mut text = |w: &mut CdrWriter, fits: &str| {
                w.write_string(if k == over { "long" } else { fits }).unwrap();
                k += 1;
            };
            (0..3).for_each(|_| text(&mut w, "ok"));
            w.write_len(2).unwrap();
            (0..2).for_each(|_| text(&mut w, "ok"));
            w.write_len(2).unwrap();
            (0..2).for_each(|_| text(&mut w, "k"));
            w.finish()
        };
        let u64_field = || FieldKind::Single(Item::Number(Number::Eight));
        let enveloped =
            Arc::new(layout.prefixed(vec![("client".into(), u64_field()), ("sequence".into(), u64_field())]));
        let layout = Arc::new(layout);
        let paths =
            ["first.text", "pair[0].text", "pair[1].text", "more[0].text", "more[1].text", "names[0]", "names[1]"];
        for (k, path) in paths.into_iter().enumerate() {
            for (layout, header) in [(&layout, false), (&enveloped, true)] {
                let e = GenericMessage::new(layout.clone(), fields(k, header), vec![]).unwrap_err();
                assert!(matches!(&e.kind, DecodeErrorKind::OverBound { field, .. } if field == path), "{k}: {e}");
            }
        }
        assert!(GenericMessage::new(layout, fields(usize::MAX, false), vec![]).is_ok());
    }

    #[test]
    fn reads_and_writes_the_cdr_of_the_generated_type() {
        let layout = image_layout();
        assert_eq!(layout.dds_type_name(), Image::dds_type_name());
        assert_eq!(layout.fixed_buffer_count(), 1);
        let cdr = image().to_cdr().unwrap();
        let generic = GenericMessage::read(layout.clone(), &cdr, &mut InlineBuffers).unwrap();
        assert_eq!(generic.buffers().len(), 1);
        assert_eq!(generic.buffers()[0].host_bytes(), Some(&[1u8, 2, 3, 4, 5, 6][..]));
        assert_eq!(generic.to_cdr().unwrap(), cdr);
        // The small fields are what a frame carries: checked again, same bytes.
        let again = GenericMessage::new(layout, generic.fields().to_vec(), generic.buffers().to_vec()).unwrap();
        assert_eq!(again.to_cdr().unwrap(), cdr);
    }

    #[test]
    fn refuses_input_that_does_not_follow_the_layout() {
        let layout = image_layout();
        let cdr = image().to_cdr().unwrap();
        for cut in 4..cdr.len() - 1 {
            assert!(GenericMessage::read(layout.clone(), &cdr[..cut], &mut InlineBuffers).is_err(), "cut at {cut}");
        }
        let mut huge = cdr.clone();
        let at = huge.len() - 6 - 4;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = GenericMessage::read(layout.clone(), &huge, &mut InlineBuffers).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::LengthTooLarge { .. }), "{e}");
        let mut trailing = cdr;
        trailing.extend_from_slice(&[0; 8]);
        assert!(GenericMessage::read(layout, &trailing, &mut InlineBuffers).is_err());
    }

    #[test]
    fn checks_ordinals_and_buffers_given() {
        let layout = image_layout();
        let generic = GenericMessage::read(layout.clone(), &image().to_cdr().unwrap(), &mut InlineBuffers).unwrap();
        let fields = generic.fields().to_vec();
        let e = GenericMessage::new(layout.clone(), fields.clone(), vec![]).unwrap_err();
        assert!(e.to_string().contains("buffer 0 was not given"), "{e}");
        let two = vec![generic.buffers()[0].clone(), generic.buffers()[0].clone()];
        let e = GenericMessage::new(layout.clone(), fields.clone(), two).unwrap_err();
        assert!(e.to_string().contains("2 buffers given, the fields name 1"), "{e}");
        let mut wrong = fields;
        let at = wrong.len() - 4;
        wrong[at..].copy_from_slice(&1u32.to_le_bytes());
        let e = GenericMessage::new(layout, wrong, generic.buffers().to_vec()).unwrap_err();
        assert!(e.to_string().contains("buffer 1 where buffer 0 was due"), "{e}");
    }

    #[test]
    fn an_empty_message_is_one_byte() {
        let layout = Arc::new(MessageLayout::new("my_msgs/msg/Nothing", 1, StructLayout::new(vec![])));
        let mut w = CdrWriter::new();
        w.write_u8(0);
        let m = GenericMessage::new(layout.clone(), w.finish(), vec![]).unwrap();
        assert_eq!(m.to_cdr().unwrap(), vec![0, 1, 0, 0, 0]);
        // Its byte is a placeholder: read whatever it holds, written as 0, as
        // the generated types do (found by the cdr_generic fuzz target).
        let m = GenericMessage::read(layout, &[0, 1, 0, 0, 7], &mut InlineBuffers).unwrap();
        assert_eq!(m.to_cdr().unwrap(), vec![0, 1, 0, 0, 0]);
    }
}
