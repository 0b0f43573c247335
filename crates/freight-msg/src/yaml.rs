//! Messages as YAML, in the shape `ros2 topic echo` prints them.
//!
//! ROS 2 prints a message with `rosidl_runtime_py.message_to_yaml`: the message
//! becomes an ordered mapping of its fields, which PyYAML dumps in block style.
//! This module writes the same text without Python:
//!
//! * nested messages are mappings indented by two spaces; sequences are not
//!   indented under their key (`data:` then `- 1`), empty ones are `[]`, and a
//!   message without fields is `{}`;
//! * numbers as Python prints them (`5`, `1.0`, `0.10000000149011612` for a
//!   `float32` 0.1, `1.0e-05`, `.nan`), `bool`s as `true` / `false`;
//! * strings plain where YAML reads them back as the same string (`cam`,
//!   `bgra8`), else single-quoted (`''`, `'123'`, `'yes'`, `'a: b'`), else
//!   double-quoted with escapes (`"tab\there"`);
//! * sequences and strings longer than [`YamlOptions::truncate_length`] (128, as
//!   `ros2 topic echo`) keep their first elements and end with `'...'`
//!   (sequences) or `...` (strings). A truncated [`Buffer`] also says its length
//!   and backend in a comment on its key's line, which ROS 2 has no equivalent
//!   for: `data:  # 33177600 elements (uint8) in shm`.
//!
//! ```
//! use freight_msg::msgs::sensor_msgs::Image;
//! use freight_msg::{Buffer, Message, YamlOptions};
//!
//! let mut img = Image { width: 2, height: 1, encoding: "mono8".into(), step: 2, ..Default::default() };
//! img.header.stamp.sec = 5;
//! img.header.frame_id = "cam".into();
//! img.data = Buffer::from(vec![7u8, 9]);
//! let expected = "\
//! header:
//!   stamp:
//!     sec: 5
//!     nanosec: 0
//!   frame_id: cam
//! height: 1
//! width: 2
//! encoding: mono8
//! is_bigendian: 0
//! step: 2
//! data:
//! - 7
//! - 9
//! ";
//! assert_eq!(img.to_yaml(&YamlOptions::default()), expected);
//! ```

use std::fmt::{self, Write as _};

use crate::buffer::{Buffer, Element};
use crate::fields::{self, FieldError, FieldProblem, FieldValue};

/// The length `ros2 topic echo` truncates sequences and strings to.
pub const DEFAULT_TRUNCATE_LENGTH: usize = 128;

/// What to print, as `ros2 topic echo`'s options say it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct YamlOptions {
    /// Sequences and strings longer than this keep this many elements
    /// (characters) and end with `'...'`; `None` prints everything
    /// (`--full-length`). Default: [`DEFAULT_TRUNCATE_LENGTH`].
    pub truncate_length: Option<usize>,
    /// Print a summary instead of each array and sequence field (`--no-arr`):
    /// `'<sequence type: uint8, length: 12288>'`, `'<array type: double[9]>'`.
    pub no_arr: bool,
    /// Print `'<string length: <5>>'` instead of each string (`--no-str`).
    pub no_str: bool,
}

impl Default for YamlOptions {
    fn default() -> Self {
        YamlOptions { truncate_length: Some(DEFAULT_TRUNCATE_LENGTH), no_arr: false, no_str: false }
    }
}

/// A type that can be a field of a message: how it is printed as YAML, and how
/// it is set from a parsed value ([`crate::fields`]).
/// [`message!`](crate::message!) implements it for messages; freight-msg for
/// numbers, `bool`, `String`, `Vec<T>`, `[T; N]` and [`Buffer<T>`].
pub trait YamlField {
    /// The type's name in `--no-arr` summaries, as ROS 2's interface
    /// definitions (IDL) name it: `uint8`, `double` (a `float64`), `boolean`,
    /// `string`, `sensor_msgs/msg/PointField`.
    const IDL_NAME: &'static str = "unknown";

    /// Writes the value where `w` stands (after a key, after a `-`, or as the
    /// whole document).
    fn write_yaml(&self, w: &mut YamlWriter<'_>);

    /// Sets the value from `value`, as [`crate::fields`] describes; on an
    /// error, what was set before it stays set.
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError>;
}

/// Where the next value goes; the number is the indentation of the mapping the
/// key is in, or of the `-` of the sequence item.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Document,
    Value(usize),
    Item(usize),
}

/// Writes YAML text for [`YamlField`] implementations.
pub struct YamlWriter<'a> {
    out: &'a mut String,
    options: &'a YamlOptions,
    slot: Slot,
}

impl fmt::Debug for YamlWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YamlWriter").field("options", self.options).field("slot", &self.slot).finish()
    }
}

/// `value` as a YAML document, each line ending with a newline: what
/// [`Message::to_yaml`](crate::Message::to_yaml) returns for a message, for
/// any [`YamlField`] (see [`YamlWriter::elements`] for an example).
pub fn to_string<T: YamlField + ?Sized>(value: &T, options: &YamlOptions) -> String {
    let mut out = String::new();
    value.write_yaml(&mut YamlWriter { out: &mut out, options, slot: Slot::Document });
    out
}

impl<'a> YamlWriter<'a> {
    /// Starts writing a message: a mapping of its fields, in order.
    pub fn message(&mut self) -> MessageWriter<'_, 'a> {
        MessageWriter { w: self, fields: 0 }
    }

    fn at(&mut self, slot: Slot) -> &mut Self {
        self.slot = slot;
        self
    }

    /// The indentation of continuation lines of a multi-line scalar here.
    fn scalar_indent(&self) -> usize {
        match self.slot {
            Slot::Document => 2,
            Slot::Value(i) | Slot::Item(i) => i + 2,
        }
    }

    /// A scalar that needs no quoting (numbers, `true`).
    fn plain(&mut self, text: impl fmt::Display) {
        if !matches!(self.slot, Slot::Document) {
            self.out.push(' ');
        }
        let _ = writeln!(self.out, "{text}");
    }

    /// A string value, after `--no-str` and truncation.
    fn string(&mut self, s: &str) {
        let chars = s.chars().count();
        if self.options.no_str {
            return self.literal(&format!("<string length: <{chars}>>"));
        }
        match self.options.truncate_length {
            Some(t) if chars > t => {
                let mut short: String = s.chars().take(t).collect();
                short.push_str("...");
                self.literal(&short)
            }
            _ => self.literal(s),
        }
    }

    /// A string value exactly as given, quoted as PyYAML would.
    fn literal(&mut self, s: &str) {
        if !matches!(self.slot, Slot::Document) {
            self.out.push(' ');
        }
        let indent = self.scalar_indent();
        write_scalar(self.out, s, false, indent);
        self.out.push('\n');
    }

    /// A sequence of `items`, truncated as ROS 2 truncates it, with `comment`
    /// at the end of the line of its key.
    fn sequence<T: YamlField>(&mut self, items: &[T], comment: Option<&str>) {
        let comment = comment.map(|c| format!("  # {}", c.replace(['\n', '\r'], " ")));
        if items.is_empty() {
            let space = if matches!(self.slot, Slot::Document) { "" } else { " " };
            let _ = writeln!(self.out, "{space}[]{}", comment.unwrap_or_default());
            return;
        }
        let (shown, truncated) = match self.options.truncate_length {
            Some(t) if items.len() > t => (&items[..t], true),
            _ => (items, false),
        };
        // Under a key the items are not indented (PyYAML's default); as an
        // item of a sequence the first one follows the outer `-` on its line.
        let (indent, mut inline) = match self.slot {
            Slot::Document => (0, false),
            Slot::Value(i) => (i, false),
            Slot::Item(i) => (i + 2, comment.is_none()),
        };
        if let Some(c) = &comment {
            self.out.push_str(c);
        }
        if !matches!(self.slot, Slot::Document) && !inline {
            self.out.push('\n');
        }
        let mut dash = |w: &mut Self| {
            if inline {
                w.out.push_str(" -");
                inline = false;
            } else {
                push_indent(w.out, indent);
                w.out.push('-');
            }
        };
        for item in shown {
            dash(self);
            item.write_yaml(self.at(Slot::Item(indent)));
        }
        if truncated {
            dash(self);
            self.at(Slot::Item(indent)).literal("...");
        }
    }

    /// Writes a sequence (an array `T[N]` when `fixed`) of a type known only
    /// at run time, a message decoded from its `.msg` definition, as
    /// `Vec<T>` and `[T; N]` write themselves: `idl_name` names the element
    /// type in the `--no-arr` summary (`uint8`, `sensor_msgs/msg/PointField`).
    ///
    /// ```
    /// use freight_msg::{YamlField, YamlOptions, YamlWriter};
    /// struct Pair([u16; 2]);
    /// impl YamlField for Pair {
    ///     fn write_yaml(&self, w: &mut YamlWriter<'_>) {
    ///         w.message().field("xs", &Items(&self.0)).finish();
    ///     }
    ///     fn set_from(&mut self, _: &freight_msg::FieldValue) -> Result<(), freight_msg::FieldError> {
    ///         unimplemented!()
    ///     }
    /// }
    /// struct Items<'a>(&'a [u16]);
    /// impl YamlField for Items<'_> {
    ///     fn write_yaml(&self, w: &mut YamlWriter<'_>) {
    ///         w.elements(self.0, "uint16", true);
    ///     }
    ///     fn set_from(&mut self, _: &freight_msg::FieldValue) -> Result<(), freight_msg::FieldError> {
    ///         unimplemented!()
    ///     }
    /// }
    /// let yaml = freight_msg::yaml::to_string(&Pair([1, 2]), &YamlOptions::default());
    /// assert_eq!(yaml, "xs:\n- 1\n- 2\n");
    /// let mut summary = YamlOptions::default();
    /// summary.no_arr = true;
    /// assert_eq!(freight_msg::yaml::to_string(&Pair([1, 2]), &summary), "xs: '<array type: uint16[2]>'\n");
    /// ```
    pub fn elements<T: YamlField>(&mut self, items: &[T], idl_name: &str, fixed: bool) {
        let summary = || match fixed {
            true => format!("<array type: {idl_name}[{}]>", items.len()),
            false => format!("<sequence type: {idl_name}, length: {}>", items.len()),
        };
        if !self.summarize(summary) {
            self.sequence(items, None);
        }
    }

    /// A `--no-arr` summary in place of an array field: only a message's
    /// fields are summarized, as in ROS 2.
    fn summarize(&mut self, summary: impl FnOnce() -> String) -> bool {
        if self.options.no_arr && matches!(self.slot, Slot::Value(_)) {
            self.literal(&summary());
            return true;
        }
        false
    }
}

/// Writes the fields of one message; from [`YamlWriter::message`].
#[derive(Debug)]
pub struct MessageWriter<'w, 'a> {
    w: &'w mut YamlWriter<'a>,
    fields: usize,
}

impl MessageWriter<'_, '_> {
    /// Writes the next field. A leading `r#` of a raw identifier is dropped
    /// from `name`.
    pub fn field<T: YamlField + ?Sized>(&mut self, name: &str, value: &T) -> &mut Self {
        let name = crate::bounds::ros_name(name);
        let (indent, slot) = (self.indent(), self.w.slot);
        match (self.fields, slot) {
            (0, Slot::Item(_)) => self.w.out.push(' '),
            (0, Slot::Value(_)) => {
                self.w.out.push('\n');
                push_indent(self.w.out, indent);
            }
            _ => push_indent(self.w.out, indent),
        }
        write_scalar(self.w.out, name, true, indent + 2);
        self.w.out.push(':');
        self.fields += 1;
        value.write_yaml(self.w.at(Slot::Value(indent)));
        self.w.slot = slot;
        self
    }

    /// Ends the message; one without fields is written `{}`.
    pub fn finish(&mut self) {
        if self.fields == 0 {
            let space = if matches!(self.w.slot, Slot::Document) { "" } else { " " };
            let _ = writeln!(self.w.out, "{space}{{}}");
        }
    }

    fn indent(&self) -> usize {
        match self.w.slot {
            Slot::Document => 0,
            Slot::Value(i) | Slot::Item(i) => i + 2,
        }
    }
}

fn push_indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

macro_rules! integer_fields {
    ($($t:ty => $idl:literal),* $(,)?) => {$(
        impl YamlField for $t {
            const IDL_NAME: &'static str = $idl;
            fn write_yaml(&self, w: &mut YamlWriter<'_>) {
                w.plain(self)
            }
            fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
                match value {
                    FieldValue::Int(i) => {
                        *self = <$t>::try_from(*i).map_err(|_| {
                            FieldError::new(FieldProblem::OutOfRange { value: i.to_string(), ty: $idl })
                        })?;
                        Ok(())
                    }
                    FieldValue::Null => Ok(()),
                    other => Err(fields::wrong_kind("an integer", other)),
                }
            }
        }
    )*};
}
integer_fields!(u8 => "uint8", i8 => "int8", u16 => "uint16", i16 => "int16", u32 => "uint32", i32 => "int32",
                u64 => "uint64", i64 => "int64");

/// The number a float field is set from: a float, or an integer.
fn number(value: &FieldValue) -> Result<Option<f64>, FieldError> {
    match value {
        FieldValue::Float(x) => Ok(Some(*x)),
        // As Python's float(): the nearest double.
        FieldValue::Int(i) => Ok(Some(*i as f64)),
        FieldValue::Null => Ok(None),
        other => Err(fields::wrong_kind("a number", other)),
    }
}

impl YamlField for f64 {
    const IDL_NAME: &'static str = "double";
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        w.plain(python_float(*self))
    }
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        if let Some(x) = number(value)? {
            *self = x;
        }
        Ok(())
    }
}

/// As ROS 2 does, a `float32` is printed as the `float64` it widens to.
impl YamlField for f32 {
    const IDL_NAME: &'static str = "float";
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        w.plain(python_float(f64::from(*self)))
    }
    /// A finite number beyond `f32::MAX` is refused, as rclpy refuses it.
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        if let Some(x) = number(value)? {
            let narrow = x as f32;
            if narrow.is_infinite() && x.is_finite() {
                return Err(FieldError::new(FieldProblem::OutOfRange { value: format!("{x:e}"), ty: Self::IDL_NAME }));
            }
            *self = narrow;
        }
        Ok(())
    }
}

impl YamlField for bool {
    const IDL_NAME: &'static str = "boolean";
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        w.plain(if *self { "true" } else { "false" })
    }
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        match value {
            FieldValue::Bool(b) => *self = *b,
            FieldValue::Null => {}
            other => return Err(fields::wrong_kind("a boolean", other)),
        }
        Ok(())
    }
}

impl YamlField for String {
    const IDL_NAME: &'static str = "string";
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        w.string(self)
    }
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        match value {
            FieldValue::Str(s) => s.clone_into(self),
            FieldValue::Null => {}
            other => return Err(fields::wrong_kind("a string", other)),
        }
        Ok(())
    }
}

/// The elements `value` sets a sequence to, each made from `T::default()`.
fn elements<T: YamlField + Default>(value: &FieldValue) -> Result<Vec<T>, FieldError> {
    let items = fields::sequence(value)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut element = T::default();
        element.set_from(item).map_err(|e| e.at(i))?;
        out.push(element);
    }
    Ok(out)
}

impl<T: YamlField + Default> YamlField for Vec<T> {
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        if !w.summarize(|| format!("<sequence type: {}, length: {}>", T::IDL_NAME, self.len())) {
            w.sequence(self, None);
        }
    }
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        if !matches!(value, FieldValue::Null) {
            *self = elements(value)?;
        }
        Ok(())
    }
}

impl<T: YamlField, const N: usize> YamlField for [T; N] {
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        if !w.summarize(|| format!("<array type: {}[{N}]>", T::IDL_NAME)) {
            w.sequence(self, None);
        }
    }
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        if matches!(value, FieldValue::Null) {
            return Ok(());
        }
        let items = fields::sequence(value)?;
        if items.len() != N {
            return Err(FieldError::new(FieldProblem::WrongLength { expected: N, got: items.len() }));
        }
        for (i, (element, item)) in self.iter_mut().zip(items).enumerate() {
            element.set_from(item).map_err(|e| e.at(i))?;
        }
        Ok(())
    }
}

/// Printed as the sequence it is on the wire. When truncated, the key's line
/// also says how long it is and where it lives: `data:  # 33177600 elements
/// (uint8) in shm`. Device memory is copied to the host to be printed.
impl<T: Element + YamlField> YamlField for Buffer<T> {
    fn write_yaml(&self, w: &mut YamlWriter<'_>) {
        if w.summarize(|| format!("<sequence type: {}, length: {}>", T::IDL_NAME, self.len())) {
            return;
        }
        let about = || format!("{} elements ({}) in {}", self.len(), T::ROS_NAME, self.backend());
        let truncated = w.options.truncate_length.is_some_and(|t| self.len() > t);
        let comment = truncated.then(about);
        match self.as_slice() {
            Some(items) => w.sequence(items, comment.as_deref()),
            None => match self.to_vec() {
                Ok(items) => w.sequence(&items, comment.as_deref()),
                Err(e) => w.sequence::<T>(&[], Some(&format!("{}; not readable here: {e}", about()))),
            },
        }
    }
    /// The buffer becomes host memory holding the elements given.
    fn set_from(&mut self, value: &FieldValue) -> Result<(), FieldError> {
        if !matches!(value, FieldValue::Null) {
            *self = Buffer::from(elements::<T>(value)?);
        }
        Ok(())
    }
}

/// A float as PyYAML writes a Python float: `repr` (the shortest digits that
/// read back the same, exponent form below 1e-4 and from 1e16 on), with `.0`
/// added to an exponent form without a point, and `.nan`, `.inf`, `-.inf`.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return ".nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    // `{:e}` gives the shortest round-trip digits: `1.2345e-5`, `0e0`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    // Python's decimal point position: the value is 0.<digits> x 10^point.
    let point = exp + 1;
    let mut s = String::from(if x.is_sign_negative() { "-" } else { "" });
    if point <= -4 || point > 16 {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        s.push_str(first);
        s.push('.');
        s.push_str(if rest.is_empty() { "0" } else { rest });
        let _ = write!(s, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs());
    } else if point <= 0 {
        s.push_str("0.");
        push_zeros(&mut s, point.unsigned_abs() as usize);
        s.push_str(&digits);
    } else {
        let point = point as usize;
        if point >= digits.len() {
            s.push_str(&digits);
            push_zeros(&mut s, point - digits.len());
            s.push_str(".0");
        } else {
            s.push_str(&digits[..point]);
            s.push('.');
            s.push_str(&digits[point..]);
        }
    }
    s
}

fn push_zeros(s: &mut String, n: usize) {
    s.extend(std::iter::repeat_n('0', n));
}

/// How PyYAML writes a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
}

/// Writes `s` as PyYAML (`allow_unicode`, unlimited width) does in block
/// context; `key` for a mapping key. Line breaks inside single quotes continue
/// at `indent`.
fn write_scalar(out: &mut String, s: &str, key: bool, indent: usize) {
    match style(s, key) {
        Style::Plain => out.push_str(s),
        Style::SingleQuoted => single_quoted(out, s, indent),
        Style::DoubleQuoted => double_quoted(out, s),
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_space_or_break(c: char) -> bool {
    matches!(c, '\0' | ' ' | '\t' | '\r') || is_break(c)
}

/// Printable without escapes (with `allow_unicode`).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFE}')
        && c != '\u{FEFF}'
}

/// PyYAML's choice of style for a string (`Emitter.analyze_scalar` and
/// `choose_scalar_style`, block context).
fn style(s: &str, key: bool) -> Style {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        // Plain would read back as null.
        return Style::SingleQuoted;
    }
    let (mut block_indicators, mut line_breaks, mut special) = (false, false, false);
    let (mut leading_space, mut trailing_space, mut leading_break, mut trailing_break) = (false, false, false, false);
    let (mut break_space, mut space_break, mut previous_space, mut previous_break) = (false, false, false, false);
    if s.starts_with("---") || s.starts_with("...") {
        block_indicators = true;
    }
    let last = chars.len() - 1;
    let mut preceded_by_whitespace = true;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = chars.get(i + 1).is_none_or(|&n| is_space_or_break(n));
        if i == 0 {
            block_indicators |=
                "#,[]{}&*!|>'\"%@`".contains(c) || (matches!(c, '?' | ':' | '-') && followed_by_whitespace);
        } else {
            block_indicators |= (c == ':' && followed_by_whitespace) || (c == '#' && preceded_by_whitespace);
        }
        line_breaks |= is_break(c);
        special |= !is_printable(c);
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == last;
            break_space |= previous_break;
            (previous_space, previous_break) = (true, false);
        } else if is_break(c) {
            leading_break |= i == 0;
            trailing_break |= i == last;
            space_break |= previous_space;
            (previous_space, previous_break) = (false, true);
        } else {
            (previous_space, previous_break) = (false, false);
        }
        preceded_by_whitespace = is_space_or_break(c);
    }
    let allow_plain = !(leading_space
        || leading_break
        || trailing_space
        || trailing_break
        || break_space
        || space_break
        || special
        || line_breaks
        || block_indicators);
    let allow_single = !(break_space || space_break || special);
    if allow_plain && !(key && line_breaks) && !resolves_to_other_type(s) {
        Style::Plain
    } else if allow_single && !(key && line_breaks) {
        Style::SingleQuoted
    } else {
        Style::DoubleQuoted
    }
}

fn single_quoted(out: &mut String, s: &str, indent: usize) {
    out.push('\'');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if is_break(c) {
            // A line break in single quotes folds to a space when read back,
            // so a run of breaks gets one more `\n` when it starts with one.
            if c == '\n' {
                out.push('\n');
            }
            out.push(c);
            while let Some(&b) = chars.peek().filter(|&&b| is_break(b)) {
                out.push(b);
                chars.next();
            }
            push_indent(out, indent);
        } else if c == '\'' {
            out.push_str("''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
}

fn double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        let escape = match c {
            '\0' => "0",
            '\u{7}' => "a",
            '\u{8}' => "b",
            '\t' => "t",
            '\n' => "n",
            '\u{B}' => "v",
            '\u{C}' => "f",
            '\r' => "r",
            '\u{1B}' => "e",
            '"' => "\"",
            '\\' => "\\",
            '\u{85}' => "N",
            '\u{2028}' => "L",
            '\u{2029}' => "P",
            _ if matches!(c, ' '..='~' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}') && c != '\u{FEFF}' => {
                out.push(c);
                continue;
            }
            _ => {
                let _ = match u32::from(c) {
                    n @ 0..=0xFF => write!(out, "\\x{n:02X}"),
                    n @ 0x100..=0xFFFF => write!(out, "\\u{n:04X}"),
                    n => write!(out, "\\U{n:08X}"),
                };
                continue;
            }
        };
        out.push('\\');
        out.push_str(escape);
    }
    out.push('"');
}

/// Whether YAML 1.1 (PyYAML's implicit resolvers) reads plain `s` as something
/// other than a string: null, bool, int, float, timestamp, merge or value key.
fn resolves_to_other_type(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "~", "null", "Null", "NULL", "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False",
        "FALSE", "on", "On", "ON", "off", "Off", "OFF", "<<", "=", "!", "&", "*",
    ];
    WORDS.contains(&s) || is_yaml_int(s) || is_yaml_float(s) || is_yaml_timestamp(s)
}

fn all(s: &str, f: impl Fn(char) -> bool) -> bool {
    s.chars().all(f)
}

fn digits_(s: &str) -> bool {
    all(s, |c| c.is_ascii_digit() || c == '_')
}

fn unsigned(s: &str) -> &str {
    s.strip_prefix(['-', '+']).unwrap_or(s)
}

/// `:[0-5]?[0-9]` groups after a first part (sexagesimal numbers, `1:30`).
fn sexagesimal_tail<'s>(mut parts: impl Iterator<Item = &'s str>, first: impl Fn(&str) -> bool) -> bool {
    let Some(head) = parts.next() else { return false };
    let mut groups = 0;
    for p in parts {
        let b = p.as_bytes();
        let ok = match b {
            [d] => d.is_ascii_digit(),
            [t, d] => (b'0'..=b'5').contains(t) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        groups += 1;
    }
    groups > 0 && first(head)
}

fn is_yaml_int(s: &str) -> bool {
    let u = unsigned(s);
    let nonempty = |r: &str, f: fn(char) -> bool| !r.is_empty() && all(r, f);
    if let Some(r) = u.strip_prefix("0b") {
        return nonempty(r, |c| matches!(c, '0' | '1' | '_'));
    }
    if let Some(r) = u.strip_prefix("0x") {
        return nonempty(r, |c| c.is_ascii_hexdigit() || c == '_');
    }
    if u == "0" {
        return true;
    }
    if let Some(r) = u.strip_prefix('0') {
        return all(r, |c| matches!(c, '0'..='7' | '_'));
    }
    let decimal = |h: &str| h.starts_with(|c: char| matches!(c, '1'..='9')) && digits_(h);
    decimal(u) || sexagesimal_tail(u.split(':'), decimal)
}

fn is_yaml_float(s: &str) -> bool {
    let u = unsigned(s);
    if matches!(u, ".inf" | ".Inf" | ".INF") || matches!(s, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let exponent_ok = |e: &str| {
        e.is_empty()
            || e.strip_prefix(['e', 'E'])
                .and_then(|e| e.strip_prefix(['-', '+']))
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    };
    let fraction_then_exponent = |r: &str| {
        let end = r.find(|c: char| !(c.is_ascii_digit() || c == '_')).unwrap_or(r.len());
        exponent_ok(&r[end..])
    };
    let starts_digit = |h: &str| h.starts_with(|c: char| c.is_ascii_digit()) && digits_(h);
    // `.5`, `.5e+3`: no sign allowed.
    if let Some(r) = s.strip_prefix('.') {
        if r.starts_with(|c: char| c.is_ascii_digit()) && fraction_then_exponent(r) {
            return true;
        }
    }
    let Some((whole, fraction)) = u.split_once('.') else { return false };
    (starts_digit(whole) && fraction_then_exponent(fraction))
        || (digits_(fraction) && sexagesimal_tail(whole.split(':'), starts_digit))
}

fn is_yaml_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    // `2001-12-14`
    if b.len() == 10
        && (0..4).all(digit)
        && b[4] == b'-'
        && digit(5)
        && digit(6)
        && b[7] == b'-'
        && digit(8)
        && digit(9)
    {
        return true;
    }
    // `2001-12-14t21:59:43.10-05:00`, `2001-12-14 21:59:43.10 -5`
    let mut i = 0;
    let take_digits = |i: &mut usize, min: usize, max: usize| {
        let start = *i;
        while *i < b.len() && *i - start < max && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start >= min
    };
    let expect = |i: &mut usize, c: u8| {
        let ok = b.get(*i) == Some(&c);
        *i += usize::from(ok);
        ok
    };
    if !(take_digits(&mut i, 4, 4)
        && expect(&mut i, b'-')
        && take_digits(&mut i, 1, 2)
        && expect(&mut i, b'-')
        && take_digits(&mut i, 1, 2))
    {
        return false;
    }
    if matches!(b.get(i), Some(b'T' | b't')) {
        i += 1;
    } else {
        let start = i;
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if !(take_digits(&mut i, 1, 2)
        && expect(&mut i, b':')
        && take_digits(&mut i, 2, 2)
        && expect(&mut i, b':')
        && take_digits(&mut i, 2, 2))
    {
        return false;
    }
    if expect(&mut i, b'.') {
        take_digits(&mut i, 0, usize::MAX);
    }
    if i == b.len() {
        return true;
    }
    // The zone: `Z` or `[-+]h(h)?(:mm)?`, maybe after blanks.
    while matches!(b.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    if expect(&mut i, b'Z') {
        return i == b.len();
    }
    if !matches!(b.get(i), Some(b'-' | b'+')) {
        return false;
    }
    i += 1;
    if !take_digits(&mut i, 1, 2) {
        return false;
    }
    if expect(&mut i, b':') && !take_digits(&mut i, 2, 2) {
        return false;
    }
    i == b.len()
}

#[cfg(test)]
mod tests;
