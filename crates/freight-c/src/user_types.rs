//! Message types freight was not built with: a user's own `.msg` files,
//! whose C++ types `freight msg cpp` generates. Each such type carries its
//! definition (`T::DEFINITION`, the `ros2msg` text rosbag2 records), which
//! the C++ API registers here before it makes the type's first endpoint
//! (`freight_type_register`); the endpoints are then the core's generic
//! ones, whose layout is built from that text.
//!
//! The layout's hash is the one the generated Rust type of the same `.msg`
//! file has (`freight_msg_gen::rust_definition`), so a C++ endpoint of a
//! user's type meets a Rust one of it.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

use freight::generic::{ElementInfo, FieldKind, Item, MessageLayout, Number, StructLayout};
use freight_msg_gen::{parse_ros2msg, rust_definition, ArrayKind, BaseType, MsgSpec, Primitive};

use crate::error::{guard, str_arg, Failure, Status};

/// Types registered in this process, by name.
static REGISTERED: Mutex<Option<HashMap<String, Registered>>> = Mutex::new(None);

struct Registered {
    definition: String,
    layout: Arc<MessageLayout>,
}

/// Registers the message type `type_name` (`"my_msgs/msg/Scan"`) with its
/// definition: the `ros2msg` text of the type and of every type it uses, as
/// a generated C++ type's `DEFINITION` holds it. Endpoints of the type can be
/// made after. Registering a type again with the same definition does
/// nothing; with another one it fails with `FREIGHT_ERROR_TYPE` (two
/// versions of one type in a process). A built-in type needs no
/// registration, and registering one does nothing.
///
/// # Safety
/// Both arguments are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn freight_type_register(type_name: *const c_char, definition: *const c_char) -> Status {
    guard(|| {
        // SAFETY (both): as the caller promised.
        let type_name = unsafe { str_arg(type_name, "the type name") }?;
        let definition = unsafe { str_arg(definition, "the definition") }?;
        register(type_name, definition)
    })
}

fn register(type_name: &str, definition: &str) -> Result<(), Failure> {
    if crate::types::is_built_in(type_name) {
        return Ok(());
    }
    let mut registered = lock();
    let registered = registered.get_or_insert_with(HashMap::new);
    if let Some(known) = registered.get(type_name) {
        if known.definition == definition {
            return Ok(());
        }
        return Err(Failure::new(
            Status::Type,
            format!(
                "{type_name} is registered already with another definition (two versions of the type in one process)"
            ),
        ));
    }
    let layout = Arc::new(layout(type_name, definition)?);
    registered.insert(type_name.to_string(), Registered { definition: definition.to_string(), layout });
    Ok(())
}

fn lock() -> std::sync::MutexGuard<'static, Option<HashMap<String, Registered>>> {
    // A panic while the map was held left it whole: each change is one insert.
    REGISTERED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The layout of a registered type.
pub(crate) fn registered(type_name: &str) -> Option<Arc<MessageLayout>> {
    lock().as_ref()?.get(type_name).map(|r| r.layout.clone())
}

/// The layout of `type_name` from its `ros2msg` definition.
fn layout(type_name: &str, definition: &str) -> Result<MessageLayout, Failure> {
    let bad = |why: String| Failure::new(Status::Type, format!("the definition of {type_name}: {why}"));
    let specs = parse_ros2msg(type_name, definition).map_err(|e| bad(e.to_string()))?;
    let root = &specs[0];
    let by_name: HashMap<String, &MsgSpec> = specs.iter().map(|s| (format!("{}/{}", s.package, s.name), s)).collect();
    let fields = struct_layout(root, &by_name, &mut Vec::new()).map_err(bad)?;
    let hash = freight_msg::message::fnv1a(rust_definition(root).as_bytes());
    Ok(MessageLayout::new(type_name, hash, fields))
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
        let item = match &f.ty.base {
            BaseType::Primitive(p) => match (p, f.ty.array) {
                // The generated types' buffer fields: numbers in an unbounded sequence.
                (p, ArrayKind::Unbounded) if p.is_numeric() => {
                    fields.push(FieldKind::Buffer(element_info(*p)));
                    continue;
                }
                (Primitive::Bool, _) => Item::Bool,
                (p, _) => Item::Number(number(*p)),
            },
            BaseType::String { .. } => Item::String,
            BaseType::Message { package, name } => {
                let nested = by_name
                    .get(&format!("{package}/{name}"))
                    .ok_or_else(|| format!("{package}/msg/{name} (a field of {}) is not in it", spec.type_name()))?;
                Item::Message(Arc::new(struct_layout(nested, by_name, path)?))
            }
        };
        fields.push(match f.ty.array {
            ArrayKind::Single => FieldKind::Single(item),
            ArrayKind::Fixed(n) => FieldKind::Array(item, n),
            ArrayKind::Bounded(_) | ArrayKind::Unbounded => FieldKind::Sequence(item),
        });
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

/// The element of a buffer field of `p`, as the generated Rust type's `Buffer<T>` has it.
fn element_info(p: Primitive) -> ElementInfo {
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

#[cfg(test)]
mod tests {
    use super::*;
    use freight::generic::GenericMessage;
    use freight::Message;
    use freight_msg::message::InlineBuffers;

    /// Every built-in type, described at run time from its `ros2msg` text
    /// as a user's type is: the same hash as its Rust type, and its CDR read
    /// and written back byte for byte.
    #[test]
    fn layouts_from_definitions_match_the_rust_types() {
        let schemas = freight_msg_gen::Builder::built_ins().schemas().expect("the built-in schemas");
        let find = |name: &str| &schemas.iter().find(|s| s.type_name == name).expect("a schema").ros2msg;
        let mut checked = 0;
        macro_rules! dispatch {
            ($($t:ty),* $(,)?) => {{$({
                let layout = Arc::new(layout(<$t>::TYPE_NAME, find(<$t>::TYPE_NAME)).expect("a layout"));
                assert_eq!(layout.hash(), <$t>::TYPE_HASH, "hash of {}", <$t>::TYPE_NAME);
                let cdr = <$t>::default().to_cdr().expect("cdr");
                let generic = GenericMessage::read(layout, &cdr, &mut InlineBuffers).expect("read by the layout");
                assert_eq!(generic.to_cdr().expect("cdr"), cdr, "CDR of {}", <$t>::TYPE_NAME);
                checked += 1;
            })*}};
        }
        include!(concat!(env!("OUT_DIR"), "/built_ins.rs"));
        assert!(checked > 30, "only {checked} types");
    }

    #[test]
    fn refuses_bad_definitions_and_a_second_version() {
        let e = layout("my_msgs/msg/Bad", "uint32 x\nnot a field line\n").unwrap_err();
        assert_eq!(e.status, Status::Type);
        let e = layout("my_msgs/msg/Outer", "my_msgs/Inner inner\n").unwrap_err();
        assert!(e.message.contains("my_msgs/msg/Inner"), "{}", e.message);
        register("freight_test/msg/Twice", "uint32 x\n").unwrap();
        register("freight_test/msg/Twice", "uint32 x\n").unwrap();
        let e = register("freight_test/msg/Twice", "uint64 x\n").unwrap_err();
        assert!(e.message.contains("another definition"), "{}", e.message);
        register("std_msgs/msg/Header", "whatever: built in").unwrap();
    }
}
