//! The decode check the CDR targets share: whatever decodes round-trips.

use freight_msg::{EncodeError, Message};

/// Feeds `data` to `M::from_cdr`. What decodes must encode again, unless a
/// string or sequence is over its `.msg` bound (read as it came, refused when
/// sent, as ROS 2's type support does), and decode to the same value
/// (compared by its printed form: a float may be NaN, which equals nothing),
/// encode to the same bytes, and take as many bytes as the input did (the
/// same fields at the same alignment take the same bytes; the input may only
/// add up to 3 bytes of trailing padding).
pub fn decoded<M: Message>(data: &[u8]) {
    let Ok(msg) = M::from_cdr(data) else { return };
    let name = M::TYPE_NAME;
    let bytes = match msg.to_cdr() {
        Ok(bytes) => bytes,
        Err(EncodeError::OverBound { .. }) => return,
        Err(e) => panic!("decoded {name} does not encode: {e}"),
    };
    let again = M::from_cdr(&bytes).unwrap_or_else(|e| panic!("re-encoded {name} does not decode: {e}"));
    assert_eq!(format!("{again:?}"), format!("{msg:?}"), "{name} changed in a round trip");
    assert_eq!(again.to_cdr().unwrap(), bytes, "{name} encodes two ways");
    assert!(
        bytes.len() <= data.len() && data.len() - bytes.len() < 4,
        "{name}: {} input bytes re-encode as {}",
        data.len(),
        bytes.len()
    );
}
