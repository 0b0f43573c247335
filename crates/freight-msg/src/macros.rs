//! The [`message!`](crate::message!) macro that declares message types.

/// Declares a ROS 2 message type: a struct with `Clone`, `Debug`, `Default`,
/// `PartialEq`, its CDR encoding, its YAML form ([`YamlField`](crate::YamlField),
/// field names as declared) and [`Message`](crate::Message).
///
/// Fields are encoded in declaration order, as ROS 2 does. A field may be a
/// number, `bool`, `String`, `Vec<_>`, `[_; N]`, another message, or a
/// [`Buffer<T>`](crate::Buffer) for large data. `= expr` after a field's type
/// is its value in `Default` (a `.msg` file's default), else `T::default()`.
/// `where (string(8))`, `where (sequence(4))` or `where (strings(8))` after
/// the type declares a `.msg` bound (`string<=8`, `T[<=4]`, `string<=8[]`),
/// checked when the message is encoded ([`bounds`](crate::bounds)). A bound
/// is not part of [`Message::DEFINITION`](crate::Message::DEFINITION) (nor of
/// the hash endpoints match on): it does not change what is on the wire.
///
/// ```
/// freight_msg::message! {
///     /// One lidar return.
///     pub struct Return = "my_msgs/msg/Return" {
///         pub range: f32 = f32::INFINITY,
///         pub intensity: u8,
///     }
/// }
/// use freight_msg::Message;
/// let bytes = Return { range: 1.5, intensity: 7 }.to_cdr().unwrap();
/// assert_eq!(Return::from_cdr(&bytes).unwrap().intensity, 7);
/// assert_eq!(Return::default().range, f32::INFINITY);
/// ```
#[macro_export]
macro_rules! message {
    // A field's default: the one declared (`field: T = expr`, the `.msg`
    // file's), else `T::default()`.
    (@default $ty:ty) => { <$ty as ::core::default::Default>::default() };
    (@default $ty:ty, $default:expr) => { $default };
    // A message without fields: ROS 2 gives it one hidden byte
    // (`uint8 structure_needs_at_least_one_member`), so it is one byte on the wire.
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident = $ros:literal {}
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        $vis struct $name {}

        impl $crate::CdrField for $name {
            const MIN_SIZE: usize = 1;

            fn write(
                &self,
                w: &mut $crate::CdrWriter,
                _: &mut dyn $crate::BufferEncoder,
            ) -> ::core::result::Result<(), $crate::EncodeError> {
                w.write_u8(0);
                Ok(())
            }

            fn read(
                r: &mut $crate::CdrReader<'_>,
                _: &mut dyn $crate::BufferDecoder,
            ) -> ::core::result::Result<Self, $crate::DecodeError> {
                r.read_u8()?;
                Ok(Self {})
            }
        }

        impl $crate::YamlField for $name {
            const IDL_NAME: &'static str = $ros;

            fn write_yaml(&self, w: &mut $crate::YamlWriter<'_>) {
                w.message().finish();
            }

            fn set_from(&mut self, value: &$crate::FieldValue) -> ::core::result::Result<(), $crate::FieldError> {
                match $crate::fields::mapping(value)?.first() {
                    Some((name, _)) => Err($crate::fields::unknown_field($ros, name, &[])),
                    None => Ok(()),
                }
            }
        }

        impl $crate::Message for $name {
            const TYPE_NAME: &'static str = $ros;
            const DEFINITION: &'static str = concat!($ros, "{structure_needs_at_least_one_member:u8;}");
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident = $ros:literal {
            $(
                $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty
                $(where ($($check:ident($bound:literal)),+))? $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
        }

        impl ::core::default::Default for $name {
            fn default() -> Self {
                Self { $( $field: $crate::message!(@default $ty $(, $default)?), )* }
            }
        }

        impl $crate::CdrField for $name {
            const MIN_SIZE: usize = 0 $( + <$ty as $crate::CdrField>::MIN_SIZE )*;

            fn write(
                &self,
                w: &mut $crate::CdrWriter,
                bufs: &mut dyn $crate::BufferEncoder,
            ) -> ::core::result::Result<(), $crate::EncodeError> {
                $(
                    $($( $crate::bounds::$check(&self.$field, $bound, stringify!($field))?; )+)?
                    $crate::CdrField::write(&self.$field, w, bufs).map_err(|e| e.within(stringify!($field)))?;
                )*
                let _ = (w, bufs);
                Ok(())
            }

            fn read(
                r: &mut $crate::CdrReader<'_>,
                bufs: &mut dyn $crate::BufferDecoder,
            ) -> ::core::result::Result<Self, $crate::DecodeError> {
                let _ = (&r, &bufs);
                Ok(Self { $( $field: <$ty as $crate::CdrField>::read(r, bufs)?, )* })
            }

            fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a $crate::RawBuffer)) {
                $( $crate::CdrField::visit_buffers(&self.$field, f); )*
                let _ = f;
            }

            fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut $crate::RawBuffer)) {
                $( $crate::CdrField::visit_buffers_mut(&mut self.$field, f); )*
                let _ = f;
            }
        }

        impl $crate::YamlField for $name {
            const IDL_NAME: &'static str = $ros;

            fn write_yaml(&self, w: &mut $crate::YamlWriter<'_>) {
                w.message()
                    $( .field(stringify!($field), &self.$field) )*
                    .finish();
            }

            fn set_from(&mut self, value: &$crate::FieldValue) -> ::core::result::Result<(), $crate::FieldError> {
                for (name, v) in $crate::fields::mapping(value)? {
                    match name.as_str() {
                        $( k if $crate::fields::names(stringify!($field), k) => {
                            $crate::YamlField::set_from(&mut self.$field, v).map_err(|e| e.within(k))?
                        } )*
                        other => {
                            return Err($crate::fields::unknown_field($ros, other, &[$( stringify!($field) ),*]))
                        }
                    }
                }
                Ok(())
            }
        }

        impl $crate::Message for $name {
            const TYPE_NAME: &'static str = $ros;
            const DEFINITION: &'static str =
                concat!($ros, "{", $( stringify!($field), ":", stringify!($ty), ";", )* "}");
        }
    };
}
