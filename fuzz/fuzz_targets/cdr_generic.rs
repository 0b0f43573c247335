//! Plain CDR of every generated message type, read by the layout freight
//! builds at run time from the type's definition (what a C++ type of a
//! user's own `.msg` file is carried by), against the generated Rust type.
//!
//! The first byte picks a type (modulo their number); the rest is fed to
//! both. They must agree on whether it decodes, and what decodes must encode
//! to the same bytes both ways; the generic message's small fields (buffer
//! ordinals) must make the same message again. Both read a string or
//! sequence over its `.msg` bound, and both refuse to send it again, naming
//! the same field.
//!
//! With `FREIGHT_FUZZ_SEED_DIR` set, the target writes the encoding of each
//! type's default value there and exits (see `scripts/fuzz-smoke.sh`).
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use freight_msg::generic::{GenericMessage, MessageLayout};
use freight_msg::message::InlineBuffers;
use freight_msg::cdr::DecodeErrorKind;
use freight_msg::{DecodeError, EncodeError, Message};
use libfuzzer_sys::fuzz_target;

#[allow(dead_code, clippy::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/generated.rs"));
}

include!(concat!(env!("OUT_DIR"), "/generic_types.rs"));

/// (type name, `ros2msg`, RIHS01) of every generated type.
static SCHEMAS: &[(&str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/schemas.rs"));

const _: () = assert!(TYPES.len() <= 256, "the first byte selects the type");

fn default_cdr<M: Message>() -> Vec<u8> {
    M::default().to_cdr().unwrap_or_else(|e| panic!("the default {} does not encode: {e}", M::TYPE_NAME))
}

/// Each type's layout, built once.
fn layout(type_name: &str) -> Arc<MessageLayout> {
    static LAYOUTS: OnceLock<HashMap<&'static str, Arc<MessageLayout>>> = OnceLock::new();
    let layouts = LAYOUTS.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|(name, ros2msg, _)| {
                let layout = freight_c::message_layout(name, ros2msg).unwrap_or_else(|e| panic!("{name}: {e}"));
                (*name, Arc::new(layout))
            })
            .collect()
    });
    layouts[type_name].clone()
}

/// Feeds `data` to `M` and to its layout; they must agree.
fn as_generic<M: Message>(type_name: &str, data: &[u8]) {
    let layout = layout(type_name);
    assert_eq!(layout.hash(), M::TYPE_HASH, "{type_name}: the layout's hash is not the Rust type's");
    let typed = M::from_cdr(data);
    let generic = GenericMessage::read(layout.clone(), data, &mut InlineBuffers);
    match (typed, generic) {
        (Ok(typed), Ok(generic)) => {
            let bytes = match typed.to_cdr() {
                Ok(bytes) => bytes,
                // Read as it came, refused when sent again: a string or a
                // sequence over its bound. The layout refuses to make it too,
                // for the same field (both check in wire order), and both give
                // its path from the message (`inner.label`, `names[1]`).
                Err(EncodeError::OverBound { field, .. }) => {
                    let (fields, buffers) = generic.into_parts();
                    let path = match GenericMessage::new(layout, fields, buffers) {
                        Err(DecodeError { kind: DecodeErrorKind::OverBound { field, .. }, .. }) => field,
                        made => panic!("{type_name}: `{field}` over a bound for the Rust type, not for the layout: {made:?}"),
                    };
                    assert_eq!(path, field, "{type_name}: the layout names `{path}` over a bound, the Rust type `{field}`");
                    return;
                }
                Err(e) => panic!("decoded {type_name} does not encode: {e}"),
            };
            assert_eq!(generic.to_cdr().unwrap(), bytes, "{type_name}: the layout encodes otherwise");
            let (fields, buffers) = generic.into_parts();
            let again = GenericMessage::new(layout, fields, buffers)
                .unwrap_or_else(|e| panic!("{type_name}: its own small fields are refused: {e}"));
            assert_eq!(again.to_cdr().unwrap(), bytes, "{type_name}: the small fields make another message");
        }
        (Err(_), Err(_)) => {}
        (typed, generic) => panic!(
            "{type_name}: the Rust type says {:?}, the layout {:?}",
            typed.map(|_| "decoded"),
            generic.map(|_| "decoded")
        ),
    }
}

fuzz_target!(
    init: {
        if let Some(dir) = std::env::var_os("FREIGHT_FUZZ_SEED_DIR") {
            std::fs::create_dir_all(&dir).expect("creating the seed directory");
            for (i, (name, _, seed)) in TYPES.iter().enumerate() {
                let mut input = vec![i as u8];
                input.extend(seed());
                let file = std::path::Path::new(&dir).join(format!("seed-{}", name.replace('/', "-")));
                std::fs::write(file, input).expect("writing a seed");
            }
            std::process::exit(0);
        }
    },
    |data: &[u8]| {
        if let Some((&selector, rest)) = data.split_first() {
            let (name, fuzz, _) = TYPES[selector as usize % TYPES.len()];
            fuzz(name, rest);
        }
    }
);
