//! Messages of a type known only at run time from its `.msg` files (a stock
//! node's `/rosout`, `nav_msgs/msg/Odometry`, a user's own package): their
//! CDR decoded into a tree of values that prints as `ros2 topic echo` prints
//! a message, the same YAML the built-in types print
//! ([`freight_msg::yaml`]); and the other way, a message from the values a
//! user types (`freight topic pub`), checked as the built-in types check them
//! ([`freight_msg::fields`]) and encoded as CDR.
//!
//! The CDR comes from other processes and the network: every length is
//! checked against the bytes that remain before anything is allocated, and a
//! type that contains itself is refused when the type is made, so decoding
//! never recurses without end.

use std::collections::HashMap;
use std::sync::Arc;

use freight_msg::fields::{self, FieldProblem};
use freight_msg::{
    CdrReader, CdrWriter, DecodeError, EncodeError, FieldError, FieldValue, YamlField, YamlOptions, YamlWriter,
};
use freight_msg_gen::{ArrayKind, BaseType, DefaultValue, MsgSpec, Primitive, Value as MsgValue};

/// Expands `$then!(Variant, RustType, reader)` for the primitive `$p`: the
/// one table of each primitive's [`Value`] and [`Items`] variant, Rust type
/// and [`CdrReader`] method (`byte` and `char` are bytes, as in freight's
/// Rust types).
macro_rules! with_primitive {
    ($p:expr, $then:ident) => {
        match $p {
            Primitive::Bool => $then!(Bool, bool, read_bool),
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => $then!(U8, u8, read_u8),
            Primitive::Int8 => $then!(I8, i8, read_i8),
            Primitive::UInt16 => $then!(U16, u16, read_u16),
            Primitive::Int16 => $then!(I16, i16, read_i16),
            Primitive::UInt32 => $then!(U32, u32, read_u32),
            Primitive::Int32 => $then!(I32, i32, read_i32),
            Primitive::UInt64 => $then!(U64, u64, read_u64),
            Primitive::Int64 => $then!(I64, i64, read_i64),
            Primitive::Float32 => $then!(F32, f32, read_f32),
            Primitive::Float64 => $then!(F64, f64, read_f64),
        }
    };
}

/// A message type read and written by its definition.
#[derive(Debug)]
pub struct DynamicType {
    root: Arc<Layout>,
}

/// One message type, its nested types resolved.
#[derive(Debug)]
struct Layout {
    /// Leaked, once per type a command uses: the error for a field the type
    /// does not have names it, and takes a `&'static str`.
    type_name: &'static str,
    fields: Vec<FieldLayout>,
}

#[derive(Debug)]
struct FieldLayout {
    name: Arc<str>,
    element: Element,
    array: ArrayKind,
    /// The `.msg` file's default, as the values a user types.
    default: Option<FieldValue>,
}

/// A field's element type.
#[derive(Debug)]
enum Element {
    Primitive(Primitive),
    /// `string`, or `string<=N` with its bound.
    String(Option<usize>),
    Message(Arc<Layout>),
}

/// Why a type cannot be read or written by its definitions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicTypeError {
    /// A type it uses is not among the definitions given.
    #[error("{used_by} uses {missing}, whose definition was not found")]
    Missing {
        /// The type that names it.
        used_by: String,
        /// The type not found.
        missing: String,
    },
    /// It contains itself, which no finite message does.
    #[error("{0} contains itself")]
    Recursive(String),
}

/// Why values could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeValuesError {
    /// A value does not fit its field.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A sequence or string longer than CDR holds.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl DynamicType {
    /// The type `type_name` (`pkg/msg/Type`) from `messages`, which must hold
    /// its definition and that of every type it uses (what
    /// `freight_bag::Schema::from_share_dirs_with_messages` returns).
    pub fn new(type_name: &str, messages: Vec<MsgSpec>) -> Result<DynamicType, DynamicTypeError> {
        let specs: HashMap<String, MsgSpec> = messages.into_iter().map(|m| (m.type_name(), m)).collect();
        let mut done = HashMap::new();
        let root = layout(type_name, "the topic", &specs, &mut done, &mut Vec::new())?;
        Ok(DynamicType { root })
    }

    /// The message `values` set, as CDR with its encapsulation header: fields
    /// not named keep their defaults (the `.msg` file's, else zero, empty),
    /// and values are checked as the built-in types check them, with the same
    /// errors (a field the type lacks, a number out of range, an array of
    /// another length).
    pub fn encode(&self, values: &FieldValue) -> Result<Vec<u8>, EncodeValuesError> {
        let message = message_from(&self.root, values)?;
        let mut w = CdrWriter::new();
        write_value(&mut w, &message)?;
        Ok(w.finish())
    }

    /// Decodes one message: CDR with its 4-byte encapsulation header.
    pub fn decode(&self, cdr: &[u8]) -> Result<Value, DecodeError> {
        let mut r = CdrReader::new(cdr)?;
        let v = read_message(&mut r, &self.root)?;
        r.finish()?;
        Ok(v)
    }
}

/// The layout of `type_name`, built once per type (`done`); `path` holds the
/// types being built, to catch one that contains itself.
fn layout(
    type_name: &str,
    used_by: &str,
    specs: &HashMap<String, MsgSpec>,
    done: &mut HashMap<String, Arc<Layout>>,
    path: &mut Vec<String>,
) -> Result<Arc<Layout>, DynamicTypeError> {
    if let Some(l) = done.get(type_name) {
        return Ok(l.clone());
    }
    if path.iter().any(|t| t == type_name) {
        return Err(DynamicTypeError::Recursive(type_name.to_string()));
    }
    let spec = specs
        .get(type_name)
        .ok_or_else(|| DynamicTypeError::Missing { used_by: used_by.to_string(), missing: type_name.to_string() })?;
    path.push(type_name.to_string());
    let mut fields = Vec::with_capacity(spec.fields.len());
    for f in &spec.fields {
        let element = match &f.ty.base {
            BaseType::Primitive(p) => Element::Primitive(*p),
            BaseType::String { bound } => Element::String(*bound),
            BaseType::Message { package, name } => {
                Element::Message(layout(&format!("{package}/msg/{name}"), type_name, specs, done, path)?)
            }
        };
        let default = f.default.as_ref().map(|d| match d {
            DefaultValue::Scalar(v) => field_value(v),
            DefaultValue::Array(items) => FieldValue::Seq(items.iter().map(field_value).collect()),
        });
        fields.push(FieldLayout { name: Arc::from(f.name.as_str()), element, array: f.ty.array, default });
    }
    path.pop();
    let type_name: &'static str = Box::leak(type_name.to_string().into_boxed_str());
    let l = Arc::new(Layout { type_name, fields });
    done.insert(type_name.to_string(), l.clone());
    Ok(l)
}

/// A `.msg` default as the value a user would type for it.
fn field_value(v: &MsgValue) -> FieldValue {
    match v {
        MsgValue::Bool(b) => FieldValue::Bool(*b),
        MsgValue::Int(i) => FieldValue::Int(*i),
        MsgValue::Float(x) => FieldValue::Float(*x),
        MsgValue::String(s) => FieldValue::Str(s.clone()),
    }
}

/// A message's value, decoded or made from typed values.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A `bool`.
    Bool(bool),
    /// A `uint8`, `byte` or `char` (bytes, as in freight's Rust types).
    U8(u8),
    /// An `int8`.
    I8(i8),
    /// A `uint16`.
    U16(u16),
    /// An `int16`.
    I16(i16),
    /// A `uint32`.
    U32(u32),
    /// An `int32`.
    I32(i32),
    /// A `uint64`.
    U64(u64),
    /// An `int64`.
    I64(i64),
    /// A `float32`.
    F32(f32),
    /// A `float64`.
    F64(f64),
    /// A `string`.
    Str(String),
    /// A message: its fields, in order.
    Message(Vec<(Arc<str>, Value)>),
    /// An array (`fixed`: `T[N]`) or a sequence.
    Array {
        /// The elements.
        items: Items,
        /// Whether it is a fixed-size array.
        fixed: bool,
    },
}

/// The elements of an array, one vector per element type: a megapixel
/// `uint8[]` is a megabyte, not a million values.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Items {
    Bool(Vec<bool>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Str(Vec<String>),
    /// Messages of the named type.
    Message(&'static str, Vec<Value>),
}

impl Value {
    /// The value as YAML, as `ros2 topic echo` prints a message (without the
    /// `---` line that follows).
    pub fn to_yaml(&self, options: &YamlOptions) -> String {
        freight_msg::yaml::to_string(self, options)
    }
}

impl YamlField for Value {
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        match self {
            Value::Bool(v) => v.write_yaml(w),
            Value::U8(v) => v.write_yaml(w),
            Value::I8(v) => v.write_yaml(w),
            Value::U16(v) => v.write_yaml(w),
            Value::I16(v) => v.write_yaml(w),
            Value::U32(v) => v.write_yaml(w),
            Value::I32(v) => v.write_yaml(w),
            Value::U64(v) => v.write_yaml(w),
            Value::I64(v) => v.write_yaml(w),
            Value::F32(v) => v.write_yaml(w),
            Value::F64(v) => v.write_yaml(w),
            Value::Str(v) => v.write_yaml(w),
            Value::Message(fields) => {
                let mut m = w.message();
                for (name, value) in fields {
                    m.field(name, value);
                }
                m.finish();
            }
            Value::Array { items, fixed } => {
                macro_rules! elements {
                    ($v:expr, $t:ty) => {
                        w.elements($v, <$t as YamlField>::IDL_NAME, *fixed)
                    };
                }
                match items {
                    Items::Bool(v) => elements!(v, bool),
                    Items::U8(v) => elements!(v, u8),
                    Items::I8(v) => elements!(v, i8),
                    Items::U16(v) => elements!(v, u16),
                    Items::I16(v) => elements!(v, i16),
                    Items::U32(v) => elements!(v, u32),
                    Items::I32(v) => elements!(v, i32),
                    Items::U64(v) => elements!(v, u64),
                    Items::I64(v) => elements!(v, i64),
                    Items::F32(v) => elements!(v, f32),
                    Items::F64(v) => elements!(v, f64),
                    Items::Str(v) => elements!(v, String),
                    Items::Message(type_name, v) => w.elements(v, type_name, *fixed),
                }
            }
        }
    }

    /// Decoded values are printed, not set: messages of a type known at run
    /// time are never built from YAML here.
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        Err(freight_msg::fields::wrong_kind("nothing: a decoded value is read-only", value))
    }
}

fn read_message(r: &mut CdrReader<'_>, layout: &Layout) -> Result<Value, DecodeError> {
    // A message without fields is one byte on the wire (ROS 2's
    // `structure_needs_at_least_one_member`).
    if layout.fields.is_empty() {
        r.read_u8()?;
    }
    let mut fields = Vec::with_capacity(layout.fields.len());
    for f in &layout.fields {
        fields.push((f.name.clone(), read_field(r, &f.element, f.array)?));
    }
    Ok(Value::Message(fields))
}

fn read_field(r: &mut CdrReader<'_>, element: &Element, array: ArrayKind) -> Result<Value, DecodeError> {
    let (count, fixed) = match array {
        ArrayKind::Single => return read_one(r, element),
        ArrayKind::Fixed(n) => (n, true),
        // A bounded sequence is read as the built-in types read it: its bound
        // is the publisher's to keep.
        ArrayKind::Bounded(_) | ArrayKind::Unbounded => (r.read_len(min_size(element))?, false),
    };
    // At most what the bytes left can hold: a count comes from the type, or
    // from a peer that may lie.
    let capacity = count.min(r.remaining());
    macro_rules! many {
        ($variant:ident, $t:ty, $read:ident) => {{
            let mut v = Vec::with_capacity(capacity);
            for _ in 0..count {
                v.push(r.$read()?);
            }
            Items::$variant(v)
        }};
    }
    let items = match element {
        // Bytes in one piece.
        Element::Primitive(Primitive::Byte | Primitive::Char | Primitive::UInt8) => Items::U8(r.take(count)?.to_vec()),
        Element::Primitive(p) => with_primitive!(p, many),
        Element::String(_) => many!(Str, String, read_string),
        Element::Message(layout) => {
            let mut v = Vec::with_capacity(capacity);
            for _ in 0..count {
                v.push(read_message(r, layout)?);
            }
            Items::Message(layout.type_name, v)
        }
    };
    Ok(Value::Array { items, fixed })
}

fn read_one(r: &mut CdrReader<'_>, element: &Element) -> Result<Value, DecodeError> {
    macro_rules! one {
        ($variant:ident, $t:ty, $read:ident) => {
            Value::$variant(r.$read()?)
        };
    }
    Ok(match element {
        Element::Primitive(p) => with_primitive!(p, one),
        Element::String(_) => Value::Str(r.read_string()?),
        Element::Message(layout) => read_message(r, layout)?,
    })
}

/// The fewest bytes one element takes on the wire, for the check of a
/// sequence's length against what remains.
fn min_size(element: &Element) -> usize {
    macro_rules! size {
        ($variant:ident, $t:ty, $read:ident) => {
            std::mem::size_of::<$t>()
        };
    }
    match element {
        Element::Primitive(p) => with_primitive!(p, size),
        // Its length and NUL.
        Element::String(_) => 5,
        // An empty message is one byte; any other at least that.
        Element::Message(_) => 1,
    }
}

/// The message of `layout` that `value` (a mapping, or null) sets.
fn message_from(layout: &Layout, value: &FieldValue) -> Result<Value, FieldError> {
    let given = fields::mapping(value)?;
    if let Some((name, _)) = given.iter().find(|(name, _)| !layout.fields.iter().any(|f| *f.name == **name)) {
        let names: Vec<&str> = layout.fields.iter().map(|f| &*f.name).collect();
        return Err(fields::unknown_field(layout.type_name, name, &names));
    }
    let mut out = Vec::with_capacity(layout.fields.len());
    for f in &layout.fields {
        // The last mention wins, as the built-in types set their fields in order.
        let value = match given.iter().rev().find(|(name, _)| *f.name == **name) {
            Some((_, v)) if !matches!(v, FieldValue::Null) => v,
            _ => f.default.as_ref().unwrap_or(&FieldValue::Null),
        };
        let v = field_from(&f.element, f.array, value).map_err(|e| e.within(&f.name))?;
        out.push((f.name.clone(), v));
    }
    Ok(Value::Message(out))
}

fn field_from(element: &Element, array: ArrayKind, value: &FieldValue) -> Result<Value, FieldError> {
    let fixed = matches!(array, ArrayKind::Fixed(_));
    let given: &[FieldValue] = match value {
        _ if array == ArrayKind::Single => return one_from(element, value),
        // Null is an empty sequence, or an array of defaults.
        FieldValue::Null => &[],
        FieldValue::Seq(items) => items,
        other => return Err(fields::wrong_kind("a sequence", other)),
    };
    let count = match array {
        ArrayKind::Fixed(n) if matches!(value, FieldValue::Null) => n,
        ArrayKind::Fixed(n) if given.len() != n => {
            return Err(FieldError::new(FieldProblem::WrongLength { expected: n, got: given.len() }));
        }
        // A bounded sequence longer than its bound would be refused by the
        // subscribers' deserializers: refused here, naming the bound.
        ArrayKind::Bounded(n) if given.len() > n => {
            return Err(FieldError::new(FieldProblem::OverBound { bound: n, got: given.len(), unit: "elements" }));
        }
        _ => given.len(),
    };
    let item = |i: usize| given.get(i).unwrap_or(&FieldValue::Null);
    macro_rules! many {
        ($variant:ident, $t:ty, $read:ident) => {{
            let mut v = Vec::with_capacity(count);
            for i in 0..count {
                let mut x = <$t>::default();
                x.set_from(item(i)).map_err(|e| e.at(i))?;
                v.push(x);
            }
            Items::$variant(v)
        }};
    }
    let items = match element {
        Element::Primitive(p) => with_primitive!(p, many),
        Element::String(bound) => {
            let mut v = Vec::with_capacity(count);
            for i in 0..count {
                v.push(string_from(item(i), *bound).map_err(|e| e.at(i))?);
            }
            Items::Str(v)
        }
        Element::Message(layout) => {
            let mut v = Vec::with_capacity(count);
            for i in 0..count {
                v.push(message_from(layout, item(i)).map_err(|e| e.at(i))?);
            }
            Items::Message(layout.type_name, v)
        }
    };
    Ok(Value::Array { items, fixed })
}

fn one_from(element: &Element, value: &FieldValue) -> Result<Value, FieldError> {
    macro_rules! one {
        ($variant:ident, $t:ty, $read:ident) => {{
            let mut x = <$t>::default();
            x.set_from(value)?;
            Value::$variant(x)
        }};
    }
    Ok(match element {
        Element::Primitive(p) => with_primitive!(p, one),
        Element::String(bound) => Value::Str(string_from(value, *bound)?),
        Element::Message(layout) => message_from(layout, value)?,
    })
}

/// The string for a `string` field, or a `string<=bound` one: a longer one
/// (in bytes, as subscribers' deserializers count) is refused.
fn string_from(value: &FieldValue, bound: Option<usize>) -> Result<String, FieldError> {
    let mut s = String::new();
    s.set_from(value)?;
    match bound {
        Some(bound) if s.len() > bound => {
            Err(FieldError::new(FieldProblem::OverBound { bound, got: s.len(), unit: "bytes" }))
        }
        _ => Ok(s),
    }
}

/// Writes `value` as CDR, as the reader above reads it.
fn write_value(w: &mut CdrWriter, value: &Value) -> Result<(), EncodeError> {
    match value {
        Value::Bool(v) => w.write_bool(*v),
        Value::U8(v) => w.write_u8(*v),
        Value::I8(v) => w.write_i8(*v),
        Value::U16(v) => w.write_u16(*v),
        Value::I16(v) => w.write_i16(*v),
        Value::U32(v) => w.write_u32(*v),
        Value::I32(v) => w.write_i32(*v),
        Value::U64(v) => w.write_u64(*v),
        Value::I64(v) => w.write_i64(*v),
        Value::F32(v) => w.write_f32(*v),
        Value::F64(v) => w.write_f64(*v),
        Value::Str(v) => w.write_string(v)?,
        Value::Message(fields) if fields.is_empty() => w.write_u8(0),
        Value::Message(fields) => {
            for (_, v) in fields {
                write_value(w, v)?;
            }
        }
        Value::Array { items, fixed } => {
            macro_rules! each {
                ($v:expr, $write:ident) => {{
                    if !fixed {
                        w.write_len($v.len())?;
                    }
                    for x in $v {
                        w.$write(*x);
                    }
                }};
            }
            match items {
                Items::Bool(v) => each!(v, write_bool),
                Items::U8(v) => {
                    if !fixed {
                        w.write_len(v.len())?;
                    }
                    w.write_raw(v);
                }
                Items::I8(v) => each!(v, write_i8),
                Items::U16(v) => each!(v, write_u16),
                Items::I16(v) => each!(v, write_i16),
                Items::U32(v) => each!(v, write_u32),
                Items::I32(v) => each!(v, write_i32),
                Items::U64(v) => each!(v, write_u64),
                Items::I64(v) => each!(v, write_i64),
                Items::F32(v) => each!(v, write_f32),
                Items::F64(v) => each!(v, write_f64),
                Items::Str(v) => {
                    if !fixed {
                        w.write_len(v.len())?;
                    }
                    for s in v {
                        w.write_string(s)?;
                    }
                }
                Items::Message(_, v) => {
                    if !fixed {
                        w.write_len(v.len())?;
                    }
                    for m in v {
                        write_value(w, m)?;
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use freight_msg::msgs::geometry_msgs::{Quaternion, Vector3};
    use freight_msg::msgs::sensor_msgs::{Image, Imu, PointCloud2, PointField};
    use freight_msg::msgs::std_msgs::{MultiArrayDimension, String as StdString, UInt8MultiArray};
    use freight_msg::{Buffer, Message};

    use super::*;

    /// The `.msg` files freight's built-in types are generated from.
    fn shipped() -> Vec<MsgSpec> {
        let dir = freight_msg_gen::shipped_interfaces_dir();
        freight_msg_gen::BUILT_IN_PACKAGES
            .iter()
            .flat_map(|p| freight_msg_gen::load_package(&dir.join(p)).unwrap().messages)
            .collect()
    }

    fn image() -> Image {
        let mut m = Image { height: 2, width: 3, encoding: "rgb8".into(), step: 9, ..Image::default() };
        m.header.stamp.sec = -5;
        m.header.stamp.nanosec = 7;
        m.header.frame_id = "cam: left".into();
        m.data = Buffer::from((0..18u8).collect::<Vec<_>>());
        m
    }

    fn imu() -> Imu {
        let mut m = Imu {
            orientation: Quaternion { x: 0.1, y: -2.5, z: 1e-5, w: f64::NAN },
            angular_velocity: Vector3 { x: 1.0, y: 2.0, z: f64::INFINITY },
            orientation_covariance: [0.5; 9],
            ..Imu::default()
        };
        m.linear_acceleration_covariance[4] = -1.0;
        m
    }

    fn cloud() -> PointCloud2 {
        let field = |name: &str, offset| PointField { name: name.into(), offset, datatype: 7, count: 1 };
        PointCloud2 {
            height: 1,
            width: 2,
            fields: vec![field("x", 0), field("y", 4), field("z", 8)],
            is_bigendian: false,
            point_step: 12,
            row_step: 24,
            data: Buffer::from(vec![1u8; 24]),
            is_dense: true,
            ..PointCloud2::default()
        }
    }

    fn blob() -> UInt8MultiArray {
        let mut m = UInt8MultiArray { data: Buffer::from(vec![3u8; 5]), ..UInt8MultiArray::default() };
        m.layout.dim.push(MultiArrayDimension { label: "".into(), size: 5, stride: 5 });
        m.layout.data_offset = 2;
        m
    }

    fn options() -> Vec<YamlOptions> {
        let mut all = vec![YamlOptions::default()];
        for f in [
            |o: &mut YamlOptions| o.no_arr = true,
            |o: &mut YamlOptions| o.no_str = true,
            |o: &mut YamlOptions| o.truncate_length = Some(2),
            |o: &mut YamlOptions| o.truncate_length = None,
        ] {
            let mut o = YamlOptions::default();
            f(&mut o);
            all.push(o);
        }
        all
    }

    /// freight's typed YAML, less the comment it adds on a truncated buffer's
    /// line (`data:  # 18 elements (uint8) in cpu`), which ROS 2 does not print.
    fn typed_yaml<M: Message>(m: &M, o: &YamlOptions) -> String {
        let text = m.to_yaml(o);
        text.lines().map(|l| format!("{}\n", l.split("  # ").next().unwrap_or(l))).collect()
    }

    fn same_as_typed<M: Message>(m: &M) {
        let ty = DynamicType::new(M::TYPE_NAME, shipped()).unwrap();
        let value = ty.decode(&m.to_cdr().unwrap()).unwrap();
        for o in options() {
            assert_eq!(value.to_yaml(&o), typed_yaml(m, &o), "{} with {o:?}", M::TYPE_NAME);
        }
    }

    /// Decoded by the `.msg` files alone, a message prints exactly as its
    /// generated Rust type prints it, under every echo option: nested
    /// messages, fixed arrays, sequences of messages, strings that need
    /// quoting, floats that are not finite.
    #[test]
    fn a_message_decoded_by_its_definition_prints_as_its_typed_self() {
        same_as_typed(&image());
        same_as_typed(&imu());
        same_as_typed(&cloud());
        same_as_typed(&blob());
        same_as_typed(&StdString { data: "yes".into() });
    }

    /// Every cut of a message, and lengths no bytes back, are errors, never a
    /// panic or a huge allocation.
    #[test]
    fn short_or_lying_input_is_an_error() {
        let ty = DynamicType::new(PointCloud2::TYPE_NAME, shipped()).unwrap();
        let cdr = cloud().to_cdr().unwrap();
        for n in 0..cdr.len() - 3 {
            assert!(ty.decode(&cdr[..n]).is_err(), "a cut at {n} of {} decoded", cdr.len());
        }
        // The `fields` sequence claims four billion entries. It follows the
        // encapsulation (4 bytes), the header (stamp, empty frame_id: 16)
        // and height and width (8).
        let at = 4 + 16 + 8;
        assert_eq!(cdr[at..at + 4], 3u32.to_le_bytes());
        let mut lying = cdr.clone();
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = ty.decode(&lying).unwrap_err();
        assert!(e.to_string().contains("length 4294967295"), "{e}");
    }

    /// Ten thousand messages with random bytes overwritten decode or fail
    /// with an error, never a panic; what decodes prints.
    #[test]
    fn mutated_input_decodes_or_is_an_error() {
        let specs = shipped();
        let cases = [
            (PointCloud2::TYPE_NAME, cloud().to_cdr().unwrap()),
            (Imu::TYPE_NAME, imu().to_cdr().unwrap()),
            (Image::TYPE_NAME, image().to_cdr().unwrap()),
            (UInt8MultiArray::TYPE_NAME, blob().to_cdr().unwrap()),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (type_name, cdr) in cases {
            let ty = DynamicType::new(type_name, specs.clone()).unwrap();
            for _ in 0..2500 {
                let mut bytes = cdr.clone();
                for _ in 0..1 + next() % 4 {
                    let at = 4 + (next() as usize) % (bytes.len() - 4);
                    bytes[at] = next() as u8;
                }
                if let Ok(v) = ty.decode(&bytes) {
                    v.to_yaml(&YamlOptions::default());
                }
            }
        }
    }

    #[test]
    fn a_type_that_contains_itself_or_lacks_a_definition_is_refused() {
        let parse = |name: &str, text: &str| freight_msg_gen::parse_str("p", name, text, Path::new("x.msg")).unwrap();
        let looped = vec![parse("A", "B[] b\n"), parse("B", "A a\n")];
        assert_eq!(DynamicType::new("p/msg/A", looped).unwrap_err(), DynamicTypeError::Recursive("p/msg/A".into()));
        let e = DynamicType::new("p/msg/A", vec![parse("A", "C c\n")]).unwrap_err();
        assert_eq!(e, DynamicTypeError::Missing { used_by: "p/msg/A".into(), missing: "p/msg/C".into() });
        let e = DynamicType::new("p/msg/Z", vec![]).unwrap_err();
        assert_eq!(e.to_string(), "the topic uses p/msg/Z, whose definition was not found");
    }

    fn values(text: &str) -> FieldValue {
        crate::values::parse(text).unwrap()
    }

    /// Values set a message of a type known at run time to the same CDR its
    /// typed self gets from them, and refuse what the typed self refuses, with
    /// the same words.
    fn encodes_as_typed<M: Message>(good: &[&str], bad: &[&str]) {
        let ty = DynamicType::new(M::TYPE_NAME, shipped()).unwrap();
        for text in good {
            let mut typed = M::default();
            typed.set_from(&values(text)).unwrap();
            let cdr = ty.encode(&values(text)).unwrap();
            assert_eq!(cdr, typed.to_cdr().unwrap(), "{} from {text}", M::TYPE_NAME);
            assert_eq!(
                ty.decode(&cdr).unwrap().to_yaml(&YamlOptions::default()),
                typed_yaml(&typed, &YamlOptions::default())
            );
        }
        for text in bad {
            let typed = M::default().set_from(&values(text)).unwrap_err();
            let dynamic = ty.encode(&values(text)).unwrap_err();
            assert_eq!(dynamic.to_string(), typed.to_string(), "{} from {text}", M::TYPE_NAME);
        }
    }

    #[test]
    fn values_encode_as_the_typed_message_sets_them_and_are_refused_alike() {
        encodes_as_typed::<Imu>(
            &["{}", "{orientation: {x: 1.5, w: 1}, orientation_covariance: [1, 2, 3, 4, 5, 6, 7, 8, 9.5]}"],
            &["{nope: 1}", "{orientation_covariance: [1, 2]}", "{header: {stamp: {sec: x}}}", "{orientation: 3}"],
        );
        encodes_as_typed::<PointCloud2>(
            &["{height: 1, width: 2, fields: [{name: x, offset: 0, datatype: 7, count: 1}, {name: y}], data: [1, 2], \
               is_dense: true}"],
            &["{fields: [{name: x}, {name: 3}]}", "{height: -1}", "{data: [256]}", "{is_dense: 2}"],
        );
        encodes_as_typed::<Image>(&["{header: {frame_id: cam}, encoding: rgb8, data: [1, 2, 3]}"], &["{data: 5}"]);
        encodes_as_typed::<StdString>(&["{data: hi}", "{data: null}"], &["{data: [1]}"]);
    }

    /// A `.msg` file's defaults fill the fields not named; a bounded sequence
    /// or string longer than its bound is refused, as subscribers'
    /// deserializers would refuse it.
    #[test]
    fn defaults_of_the_msg_file_fill_the_fields_not_named() {
        let text = "uint8 a 5\nfloat64[2] b [1.5, 2.5]\nstring s \"hi\"\nint32[<=2] c\n";
        let spec = freight_msg_gen::parse_str("p", "D", text, Path::new("D.msg")).unwrap();
        let ty = DynamicType::new("p/msg/D", vec![spec]).unwrap();
        let yaml = |v: &str| ty.decode(&ty.encode(&values(v)).unwrap()).unwrap().to_yaml(&YamlOptions::default());
        assert_eq!(yaml("{}"), "a: 5\nb:\n- 1.5\n- 2.5\ns: hi\nc: []\n");
        assert_eq!(yaml("{a: 7, s: null, c: [1]}"), "a: 7\nb:\n- 1.5\n- 2.5\ns: hi\nc:\n- 1\n");
        let e = ty.encode(&values("{c: [1, 2, 3]}")).unwrap_err();
        assert_eq!(e.to_string(), "field c: 3 elements, over the bound of 2");
    }

    #[test]
    fn bounded_strings_are_refused_past_their_bound_in_bytes() {
        let text = "string<=3 t\nstring<=2[] u\n";
        let spec = freight_msg_gen::parse_str("p", "B", text, Path::new("B.msg")).unwrap();
        let ty = DynamicType::new("p/msg/B", vec![spec]).unwrap();
        assert!(ty.encode(&values("{t: abc, u: [ab, c]}")).is_ok());
        let refused = |v: &str| ty.encode(&values(v)).unwrap_err().to_string();
        assert_eq!(refused("{t: abcd}"), "field t: 4 bytes, over the bound of 3");
        // Two characters, four bytes: the wire counts bytes.
        assert_eq!(refused("{t: éé}"), "field t: 4 bytes, over the bound of 3");
        assert_eq!(refused("{u: [ab, abc]}"), "field u[1]: 3 bytes, over the bound of 2");
    }

    /// A message without fields is the one byte ROS 2 puts on the wire.
    #[test]
    fn an_empty_message_is_one_byte() {
        let empty = freight_msg_gen::parse_str("p", "E", "# nothing\n", Path::new("E.msg")).unwrap();
        let ty = DynamicType::new("p/msg/E", vec![empty]).unwrap();
        assert_eq!(ty.decode(&[0, 1, 0, 0, 0]).unwrap().to_yaml(&YamlOptions::default()), "{}\n");
        assert!(ty.decode(&[0, 1, 0, 0]).is_err());
    }
}
