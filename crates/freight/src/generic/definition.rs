//! Layouts read from a type's definition: the `ros2msg` text rosbag2 records
//! (the type's `.msg` fields, then each type it uses after a `MSG: pkg/Name`
//! line). This is how a type of a user's own package reaches the core from
//! C++ (`freight msg cpp` puts the text in the generated type) and from
//! Python (`freight msg python` does the same for a Python class).
//!
//! The layout's hash is the one the generated Rust type of the same `.msg`
//! file has ([`freight_msg_gen::rust_definition`]), so endpoints of a layout
//! meet Rust endpoints of its type, built in or the user's.
//!
//! ```
//! let layout = freight::generic::layout_from_definition("my_msgs/msg/Scan", "uint32 id\nfloat32[] ranges\n")?;
//! assert_eq!(layout.fixed_buffer_count(), 1);
//! # Ok::<_, freight::generic::DefinitionError>(())
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use freight_msg::generic::{FieldKind, Item, MessageLayout, Number, StructLayout};
use freight_msg::ElementInfo;
use freight_msg_gen::{parse_ros2msg, rust_definition, ArrayKind, BaseType, MsgSpec, ParseError, Primitive};

/// Why a definition gives no layout.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The text is not a `ros2msg` definition.
    #[error("the definition of {type_name}: {source}")]
    Parse {
        /// The type.
        type_name: String,
        /// Where and what.
        #[source]
        source: ParseError,
    },
    /// A field's type is not in the text, or a type contains itself.
    #[error("the definition of {type_name}: {why}")]
    Incomplete {
        /// The type.
        type_name: String,
        /// What is missing.
        why: String,
    },
}

/// The layout of `type_name` (`"my_msgs/msg/Scan"`) from its `ros2msg`
/// definition.
pub fn layout_from_definition(type_name: &str, ros2msg: &str) -> Result<MessageLayout, DefinitionError> {
    let specs = parse_ros2msg(type_name, ros2msg)
        .map_err(|source| DefinitionError::Parse { type_name: type_name.to_string(), source })?;
    layout_from_specs(&specs)
}

/// The layout of `specs[0]`, the types it uses among the rest (what
/// [`freight_msg_gen::parse_ros2msg`] returns). No specs: no type.
pub fn layout_from_specs(specs: &[MsgSpec]) -> Result<MessageLayout, DefinitionError> {
    let Some(root) = specs.first() else {
        let type_name = String::new();
        return Err(DefinitionError::Incomplete { type_name, why: "no type in it".to_string() });
    };
    let by_name: HashMap<String, &MsgSpec> = specs.iter().map(|s| (format!("{}/{}", s.package, s.name), s)).collect();
    let fields = struct_layout(root, &by_name, &mut Vec::new())
        .map_err(|why| DefinitionError::Incomplete { type_name: root.type_name(), why })?;
    let hash = freight_msg::message::fnv1a(rust_definition(root).as_bytes());
    Ok(MessageLayout::new(root.type_name(), hash, fields))
}

/// Whether a field of `ty` is a buffer field: an unbounded sequence of
/// numbers, as the generated types have it (`Buffer<T>`).
pub fn is_buffer_field(ty: &freight_msg_gen::FieldType) -> bool {
    matches!((&ty.base, ty.array), (BaseType::Primitive(p), ArrayKind::Unbounded) if p.is_numeric())
}

/// The element of a buffer field of `p`, as the generated type's `Buffer<T>`
/// has it (`bool`, `byte` and `char` are bytes).
pub fn buffer_element(p: Primitive) -> ElementInfo {
    match p {
        Primitive::Bool | Primitive::Byte | Primitive::Char | Primitive::UInt8 => ElementInfo::of::<u8>(),
        Primitive::Int8 => ElementInfo::of::<i8>(),
        Primitive::UInt16 => ElementInfo::of::<u16>(),
        Primitive::Int16 => ElementInfo::of::<i16>(),
        Primitive::UInt32 => ElementInfo::of::<u32>(),
        Primitive::Int32 => ElementInfo::of::<i32>(),
        Primitive::Float32 => ElementInfo::of::<f32>(),
        Primitive::UInt64 => ElementInfo::of::<u64>(),
        Primitive::Int64 => ElementInfo::of::<i64>(),
        Primitive::Float64 => ElementInfo::of::<f64>(),
    }
}

/// The fields of `spec`, its nested types from `by_name`; `path` holds the
/// types being built, to refuse one that contains itself.
fn struct_layout(
    spec: &MsgSpec,
    by_name: &HashMap<String, &MsgSpec>,
    path: &mut Vec<String>,
) -> Result<StructLayout, String> {
    let name = spec.type_name();
    if path.contains(&name) {
        return Err(format!("{name} contains itself"));
    }
    path.push(name);
    let mut fields = Vec::with_capacity(spec.fields.len());
    for f in &spec.fields {
        if let (true, BaseType::Primitive(p)) = (is_buffer_field(&f.ty), &f.ty.base) {
            fields.push((f.name.clone(), FieldKind::Buffer(buffer_element(*p))));
            continue;
        }
        let item = match &f.ty.base {
            BaseType::Primitive(Primitive::Bool) => Item::Bool,
            BaseType::Primitive(p) => Item::Number(number(*p)),
            BaseType::String { bound: None } => Item::String,
            BaseType::String { bound: Some(n) } => Item::BoundedString(*n),
            BaseType::Message { package, name } => {
                let nested = by_name
                    .get(&format!("{package}/{name}"))
                    .ok_or_else(|| format!("{package}/msg/{name} (a field of {}) is not in it", spec.type_name()))?;
                Item::Message(Arc::new(struct_layout(nested, by_name, path)?))
            }
        };
        let kind = match f.ty.array {
            ArrayKind::Single => FieldKind::Single(item),
            ArrayKind::Fixed(n) => FieldKind::Array(item, n),
            ArrayKind::Bounded(n) => FieldKind::BoundedSequence(item, n),
            ArrayKind::Unbounded => FieldKind::Sequence(item),
        };
        fields.push((f.name.clone(), kind));
    }
    path.pop();
    Ok(StructLayout::new(fields))
}

fn number(p: Primitive) -> Number {
    match p {
        Primitive::Bool | Primitive::Byte | Primitive::Char | Primitive::Int8 | Primitive::UInt8 => Number::One,
        Primitive::Int16 | Primitive::UInt16 => Number::Two,
        Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => Number::Four,
        Primitive::Int64 | Primitive::UInt64 | Primitive::Float64 => Number::Eight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_no_complete_definition() {
        let e = layout_from_definition("my_msgs/msg/Bad", "uint32 x\nnot a field line\n").unwrap_err();
        assert!(matches!(e, DefinitionError::Parse { .. }), "{e}");
        let e = layout_from_definition("my_msgs/msg/Outer", "my_msgs/Inner inner\n").unwrap_err();
        assert!(e.to_string().contains("my_msgs/msg/Inner"), "{e}");
        assert!(layout_from_specs(&[]).is_err());
    }

    #[test]
    fn unbounded_numbers_are_buffers_and_the_rest_is_cdr() {
        let text = "uint8[] a\nbool[] b\nint32[<=4] c\nfloat64[3] d\nstring<=8 e\nstring<=2[<=3] f\n";
        let layout = layout_from_definition("my_msgs/msg/Mix", text).expect("a layout");
        let kinds: Vec<String> = layout.root().fields().iter().map(|f| format!("{f:?}")).collect();
        assert!(kinds[0].starts_with("Buffer"), "{kinds:?}");
        assert!(kinds[1].starts_with("Sequence(Bool"), "{kinds:?}");
        assert!(kinds[2].starts_with("BoundedSequence(Number(Four), 4"), "{kinds:?}");
        assert!(kinds[3].starts_with("Array(Number"), "{kinds:?}");
        assert_eq!(kinds[4], "Single(BoundedString(8))");
        assert_eq!(kinds[5], "BoundedSequence(BoundedString(2), 3)");
    }
}
