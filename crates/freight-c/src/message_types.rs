//! The message types C and C++ endpoints are made of, each as the layout
//! the core's generic endpoints take: built from the type's definition (the
//! `ros2msg` text rosbag2 records), whether the type is built in (its
//! definition is in this library) or a user's own (`freight msg cpp`
//! generates its C++ type, which carries its definition, and the C++ API
//! registers it here with `freight_type_register` before its first
//! endpoint).
//!
//! The core reads the layout from the definition
//! (`freight::generic::layout_from_definition`), with the hash of the
//! generated Rust type of the same `.msg` file, so a C or C++ endpoint meets
//! Rust ones of its type, built in or the user's.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

use freight::generic::{layout_from_definition, MessageLayout};

use crate::error::{guard, str_arg, Failure, Status};

/// The types whose layout was built in this process, by name.
static LAYOUTS: Mutex<Option<HashMap<String, Known>>> = Mutex::new(None);

struct Known {
    definition: String,
    layout: Arc<MessageLayout>,
}

/// The built-in messages: (type name, `ros2msg`, RIHS01).
static BUILT_IN: &[(&str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/schemas.rs"));

fn built_in_definition(type_name: &str) -> Option<&'static str> {
    BUILT_IN.iter().find(|(name, _, _)| *name == type_name).map(|(_, ros2msg, _)| *ros2msg)
}

/// Registers the message type `type_name` (`"my_msgs/msg/Scan"`) with its
/// definition: the `ros2msg` text of the type and of every type it uses, as
/// a generated C++ type's `DEFINITION` holds it. Endpoints of the type can be
/// made after. Registering a type again with the same definition does
/// nothing; with another one it fails with `FREIGHT_ERROR_TYPE` (two
/// versions of one type in a process), as does a definition that does not
/// parse. A built-in type needs no registration; registering one with its
/// definition does nothing.
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
    known(type_name, definition).map(drop)
}

/// The layout of `type_name` with `definition`, built once per process.
fn known(type_name: &str, definition: &str) -> Result<Arc<MessageLayout>, Failure> {
    let mut layouts = lock();
    let layouts = layouts.get_or_insert_with(HashMap::new);
    if let Some(known) = layouts.get(type_name) {
        if known.definition == definition {
            return Ok(known.layout.clone());
        }
        return Err(Failure::new(
            Status::Type,
            format!("{type_name} is known already with another definition (two versions of the type in one process)"),
        ));
    }
    let layout = Arc::new(layout(type_name, definition)?);
    layouts.insert(type_name.to_string(), Known { definition: definition.to_string(), layout: layout.clone() });
    Ok(layout)
}

fn lock() -> std::sync::MutexGuard<'static, Option<HashMap<String, Known>>> {
    // A panic while the map was held left it whole: each change is one insert.
    LAYOUTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The layout of the message type `type_name`: registered, or built in.
pub(crate) fn layout_of(type_name: &str) -> Result<Arc<MessageLayout>, Failure> {
    if let Some(known) = lock().as_ref().and_then(|l| l.get(type_name)) {
        return Ok(known.layout.clone());
    }
    match built_in_definition(type_name) {
        Some(definition) => known(type_name, definition),
        None => Err(Failure::new(
            Status::Type,
            format!(
                "{type_name:?} is neither one of freight's {} built-in message types (freight/msgs/<package>.hpp) nor \
                 registered: a type of your own .msg files is registered with freight_type_register (the C++ API \
                 does it for the types `freight msg cpp` generates)",
                BUILT_IN.len()
            ),
        )),
    }
}

/// The layout [`freight_type_register`] builds of the type `type_name`
/// from its `ros2msg` definition: where its buffer fields are, and the hash
/// of the Rust type generated from the same files. Public for what checks it
/// against generated types (the `cdr_generic` fuzz target); C and C++ reach
/// it through endpoints.
///
/// ```
/// let layout = freight_c::message_layout("my_msgs/msg/Scan", "uint32 id\nfloat32[] ranges\n").unwrap();
/// assert_eq!(layout.fixed_buffer_count(), 1);
/// ```
pub fn message_layout(type_name: &str, definition: &str) -> Result<MessageLayout, String> {
    layout(type_name, definition).map_err(|e| e.message)
}

/// The layout of `type_name` from its `ros2msg` definition.
fn layout(type_name: &str, definition: &str) -> Result<MessageLayout, Failure> {
    layout_from_definition(type_name, definition).map_err(|e| Failure::new(Status::Type, e.to_string()))
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
        let find = |name: &str| built_in_definition(name).expect("a built-in definition");
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
        let header = built_in_definition("std_msgs/msg/Header").expect("a built-in type");
        register("std_msgs/msg/Header", header).unwrap();
        assert_eq!(layout_of("std_msgs/msg/Header").unwrap().hash(), freight::msgs::std_msgs::Header::TYPE_HASH);
        let e = register("std_msgs/msg/Header", "uint8 changed\n").unwrap_err();
        assert!(e.message.contains("another definition"), "{}", e.message);
        let e = layout_of("my_msgs/msg/Unknown").unwrap_err();
        assert!(e.message.contains("is neither one of freight's"), "{}", e.message);
    }
}
