//! The `.msg` parser: one ROS 2 message definition → fields and constants.
//!
//! Grammar, line by line:
//!
//! * blank lines and comments (`# ...`, also after a field);
//! * a field `TYPE NAME`, optionally followed by a default value (`float64 w 1`,
//!   `int32[] xs [1, 2]`), parsed and checked against the field's type; the
//!   generated `Default` applies it;
//! * a constant `TYPE NAME=VALUE` (numbers, `bool`, `string`).
//!
//! Types: `bool`, `byte`, `char`, `int8`..`int64`, `uint8`..`uint64`, `float32`,
//! `float64`, `string`, bounded `string<=N`, a message of the same package `Name`,
//! of another package `pkg/Name`, and `Header` (= `std_msgs/Header`); each may be an
//! array `T[]`, `T[N]` or `T[<=N]`. `wstring` is not supported.
//!
//! Comments at the top of a file, up to the first blank line, document the
//! message; comments directly above a field or constant (and after it, on its line)
//! document it.
//!
//! A `.srv` file is two such definitions, the request's and the response's,
//! separated by a line `---` ([`parse_srv_str`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A parsed `.msg` file.
#[derive(Debug, Clone, PartialEq)]
pub struct MsgSpec {
    /// The package, e.g. `sensor_msgs`.
    pub package: String,
    /// The message name, e.g. `Image`.
    pub name: String,
    /// The message's documentation (comment lines, `#` stripped).
    pub doc: Vec<String>,
    /// The fields, in wire order.
    pub fields: Vec<Field>,
    /// The constants.
    pub constants: Vec<Constant>,
    /// The file it was parsed from.
    pub file: PathBuf,
    /// Whether it is a message or half of a service.
    pub interface: Interface,
}

impl MsgSpec {
    /// The ROS 2 type name, `package/msg/Name` (a service's request and
    /// response: `package/srv/Name_Request`, `package/srv/Name_Response`).
    pub fn type_name(&self) -> String {
        format!("{}/{}/{}", self.package, self.interface.folder(), self.name)
    }
}

/// Where a message is declared: a `.msg` file, or one half of a `.srv` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interface {
    /// `package/msg/Name.msg`.
    Msg,
    /// `package/srv/Name.srv`: the request or the response.
    Srv,
}

impl Interface {
    /// The package's folder, and the middle of the type name: `msg`, `srv`.
    pub fn folder(self) -> &'static str {
        match self {
            Interface::Msg => "msg",
            Interface::Srv => "srv",
        }
    }
}

/// A parsed `.srv` file: a request and a response message.
#[derive(Debug, Clone, PartialEq)]
pub struct SrvSpec {
    /// The package, e.g. `std_srvs`.
    pub package: String,
    /// The service name, e.g. `SetBool`.
    pub name: String,
    /// The request, `<Name>_Request`; its documentation is the service's.
    pub request: MsgSpec,
    /// The response, `<Name>_Response`.
    pub response: MsgSpec,
}

impl SrvSpec {
    /// The ROS 2 service type name, `package/srv/Name`.
    pub fn type_name(&self) -> String {
        format!("{}/srv/{}", self.package, self.name)
    }
}

/// A primitive ROS 2 type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Primitive {
    Bool,
    Byte,
    Char,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
}

impl Primitive {
    const ALL: [Primitive; 13] = [
        Primitive::Bool,
        Primitive::Byte,
        Primitive::Char,
        Primitive::Int8,
        Primitive::UInt8,
        Primitive::Int16,
        Primitive::UInt16,
        Primitive::Int32,
        Primitive::UInt32,
        Primitive::Int64,
        Primitive::UInt64,
        Primitive::Float32,
        Primitive::Float64,
    ];

    /// The `.msg` spelling (`uint8`, `float64`, ...).
    pub fn ros_name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Byte => "byte",
            Primitive::Char => "char",
            Primitive::Int8 => "int8",
            Primitive::UInt8 => "uint8",
            Primitive::Int16 => "int16",
            Primitive::UInt16 => "uint16",
            Primitive::Int32 => "int32",
            Primitive::UInt32 => "uint32",
            Primitive::Int64 => "int64",
            Primitive::UInt64 => "uint64",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
        }
    }

    /// The Rust type: `byte` and `char` are `u8`, as in ROS 2.
    pub fn rust_type(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => "u8",
            Primitive::Int8 => "i8",
            Primitive::Int16 => "i16",
            Primitive::UInt16 => "u16",
            Primitive::Int32 => "i32",
            Primitive::UInt32 => "u32",
            Primitive::Int64 => "i64",
            Primitive::UInt64 => "u64",
            Primitive::Float32 => "f32",
            Primitive::Float64 => "f64",
        }
    }

    /// Whether it is a number (everything but `bool`): unbounded sequences of
    /// numbers become `Buffer<T>`.
    pub fn is_numeric(self) -> bool {
        self != Primitive::Bool
    }

    fn from_name(s: &str) -> Option<Primitive> {
        Primitive::ALL.into_iter().find(|p| p.ros_name() == s)
    }

    /// The integer range, for integer types.
    fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => (0, u8::MAX.into()),
            Primitive::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Primitive::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Primitive::UInt16 => (0, u16::MAX.into()),
            Primitive::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Primitive::UInt32 => (0, u32::MAX.into()),
            Primitive::Int64 => (i64::MIN.into(), i64::MAX.into()),
            Primitive::UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }
}

/// The element type of a field, without its array part.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// A number or `bool`.
    Primitive(Primitive),
    /// `string` or `string<=N`.
    String {
        /// The bound `N` of `string<=N`.
        bound: Option<usize>,
    },
    /// Another message.
    Message {
        /// Its package.
        package: String,
        /// Its name.
        name: String,
    },
}

impl BaseType {
    /// The `.msg` spelling, with nested messages as `pkg/msg/Name`.
    pub fn ros_name(&self) -> String {
        match self {
            BaseType::Primitive(p) => p.ros_name().to_string(),
            BaseType::String { bound: None } => "string".to_string(),
            BaseType::String { bound: Some(n) } => format!("string<={n}"),
            BaseType::Message { package, name } => format!("{package}/msg/{name}"),
        }
    }
}

/// The array part of a field type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayKind {
    /// Not an array.
    Single,
    /// `T[N]`.
    Fixed(usize),
    /// `T[<=N]`.
    Bounded(usize),
    /// `T[]`.
    Unbounded,
}

/// A field's type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldType {
    /// The element type.
    pub base: BaseType,
    /// Whether and how it is an array.
    pub array: ArrayKind,
}

impl FieldType {
    /// The `.msg` spelling, with nested messages as `pkg/msg/Name`.
    pub fn ros_name(&self) -> String {
        let base = self.base.ros_name();
        match self.array {
            ArrayKind::Single => base,
            ArrayKind::Fixed(n) => format!("{base}[{n}]"),
            ArrayKind::Bounded(n) => format!("{base}[<={n}]"),
            ArrayKind::Unbounded => format!("{base}[]"),
        }
    }
}

/// A constant or default value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `true` / `false`.
    Bool(bool),
    /// An integer (in range of its type).
    Int(i128),
    /// A float (in range of its type).
    Float(f64),
    /// A string.
    String(String),
}

/// A field's default value.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
    /// The default of a single value.
    Scalar(Value),
    /// The default of an array, `[a, b, ...]`.
    Array(Vec<Value>),
}

/// A field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name as written in the `.msg` file.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Its default value, if one is given (the generated `Default` applies it).
    pub default: Option<DefaultValue>,
    /// Its documentation.
    pub doc: Vec<String>,
    /// The 1-based line it is declared on.
    pub line: usize,
}

/// A constant, `TYPE NAME=VALUE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    /// Its name.
    pub name: String,
    /// Its type: a primitive or a string.
    pub ty: BaseType,
    /// Its value.
    pub value: Value,
    /// Its documentation.
    pub doc: Vec<String>,
    /// The 1-based line it is declared on.
    pub line: usize,
}

/// A `.msg` file that could not be parsed: where and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: {kind}", file.display())]
pub struct ParseError {
    /// The file.
    pub file: PathBuf,
    /// The 1-based line; 0 for the file as a whole (a bad message name).
    pub line: usize,
    /// What is wrong (boxed to keep results small).
    pub kind: Box<ParseErrorKind>,
}

/// What is wrong in a `.msg` file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    /// A type that is neither a primitive nor a message name.
    #[error("unknown type `{0}`")]
    UnknownType(String),
    /// A type that ROS 2 has but freight does not support (`wstring`).
    #[error("type `{0}` is not supported by freight")]
    Unsupported(String),
    /// A malformed array or string bound.
    #[error("bad array or bound syntax in `{0}`: expected `T[]`, `T[N]`, `T[<=N]` or `string<=N` with N > 0")]
    BadArray(String),
    /// Two fields (or two constants) with one name.
    #[error("duplicate name `{0}`")]
    DuplicateField(String),
    /// A constant whose type cannot be a constant (an array or a message).
    #[error("constant `{name}` has type `{ty}`: constants must be a primitive or a string")]
    BadConstantType {
        /// The constant.
        name: String,
        /// Its type as written.
        ty: String,
    },
    /// A constant whose value does not fit its type.
    #[error("bad value `{value}` for constant `{name}` of type `{ty}`: {reason}")]
    BadConstantValue {
        /// The constant.
        name: String,
        /// Its type.
        ty: String,
        /// The value as written.
        value: String,
        /// Why it does not fit.
        reason: String,
    },
    /// A default value that does not fit its field's type.
    #[error("bad default `{value}` for field `{name}` of type `{ty}`: {reason}")]
    BadDefaultValue {
        /// The field.
        name: String,
        /// Its type.
        ty: String,
        /// The value as written.
        value: String,
        /// Why it does not fit.
        reason: String,
    },
    /// A field, constant or message name that ROS 2 does not allow.
    #[error("bad name `{name}`: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A line that is not a comment, field or constant.
    #[error("{0}")]
    Syntax(String),
}

/// Reads and parses `<dir>/<Name>.msg`; the package is given, the name is the file stem.
pub fn parse_file(package: &str, path: &Path) -> Result<MsgSpec, super::GenError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| super::GenError::Io { path: path.to_path_buf(), source: e })?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    Ok(parse_str(package, name, &text, path)?)
}

/// Reads and parses `<dir>/<Name>.srv`; the package is given, the name is the file stem.
pub fn parse_srv_file(package: &str, path: &Path) -> Result<SrvSpec, super::GenError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| super::GenError::Io { path: path.to_path_buf(), source: e })?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    Ok(parse_srv_str(package, name, &text, path)?)
}

/// Parses the text of `package/srv/name`: the request's fields, a line
/// `---`, the response's fields. `file` is only used in errors, whose line
/// numbers count from the top of the file in either half.
///
/// ```
/// use std::path::Path;
/// let srv = freight_msg_gen::parse_srv_str("std_srvs", "SetBool", "bool data\n---\nbool success\nstring message\n", Path::new("SetBool.srv")).unwrap();
/// assert_eq!(srv.request.type_name(), "std_srvs/srv/SetBool_Request");
/// assert_eq!(srv.response.fields.len(), 2);
/// ```
pub fn parse_srv_str(package: &str, name: &str, text: &str, file: &Path) -> Result<SrvSpec, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(split) = lines.iter().position(|l| l.trim() == "---") else {
        return Err(ParseError {
            file: file.to_path_buf(),
            line: lines.len(),
            kind: Box::new(ParseErrorKind::Syntax(
                "a `.srv` file has a line `---` between the request's fields and the response's".into(),
            )),
        });
    };
    let half = |spec: Result<MsgSpec, ParseError>, suffix: &str| {
        spec.map(|mut m| {
            m.name = format!("{name}_{suffix}");
            m.interface = Interface::Srv;
            m
        })
    };
    let request = half(parse_str(package, name, &lines[..split].join("\n"), file), "Request")?;
    // Blank lines in place of the request keep the response's line numbers
    // those of the file.
    let response_text = "\n".repeat(split + 1) + &lines[split + 1..].join("\n");
    let response = half(parse_str(package, name, &response_text, file), "Response")?;
    Ok(SrvSpec { package: package.to_string(), name: name.to_string(), request, response })
}

/// Parses the text of `package/msg/name`; `file` is only used in errors.
pub fn parse_str(package: &str, name: &str, text: &str, file: &Path) -> Result<MsgSpec, ParseError> {
    let err = |line: usize, kind: ParseErrorKind| ParseError { file: file.to_path_buf(), line, kind: Box::new(kind) };
    if !is_type_name(name) {
        return Err(err(0, ParseErrorKind::BadName { name: name.into(), reason: "message names are CamelCase" }));
    }
    if !is_package_name(package) {
        return Err(err(
            0,
            ParseErrorKind::BadName { name: package.into(), reason: "package names are lower_snake_case" },
        ));
    }
    let mut spec = MsgSpec {
        package: package.to_string(),
        name: name.to_string(),
        doc: Vec::new(),
        fields: Vec::new(),
        constants: Vec::new(),
        file: file.to_path_buf(),
        interface: Interface::Msg,
    };
    let mut pending: Vec<String> = Vec::new();
    let mut seen_item = false;
    let mut field_names = HashSet::new();
    let mut const_names = HashSet::new();

    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            if !seen_item && spec.doc.is_empty() {
                spec.doc = std::mem::take(&mut pending);
            } else {
                pending.clear();
            }
            continue;
        }
        if let Some(c) = trimmed.strip_prefix('#') {
            pending.push(comment_text(c));
            continue;
        }
        seen_item = true;
        let mut doc = std::mem::take(&mut pending);

        let (ty_tok, rest) = split_ws(trimmed);
        if rest.is_empty() || rest.starts_with('#') {
            return Err(err(line, ParseErrorKind::Syntax(format!("expected `TYPE NAME`, found `{trimmed}`"))));
        }
        let name_len = rest.find(|c: char| c.is_whitespace() || c == '=' || c == '#').unwrap_or(rest.len());
        let item_name = &rest[..name_len];
        let after = rest[name_len..].trim_start();

        if let Some(value_text) = after.strip_prefix('=') {
            // A constant.
            let ty = parse_type(ty_tok, package).map_err(|k| err(line, k))?;
            let base = match (&ty.base, ty.array) {
                (BaseType::Primitive(_) | BaseType::String { .. }, ArrayKind::Single) => ty.base,
                _ => {
                    return Err(err(
                        line,
                        ParseErrorKind::BadConstantType { name: item_name.into(), ty: ty_tok.into() },
                    ))
                }
            };
            if !is_constant_name(item_name) {
                return Err(err(
                    line,
                    ParseErrorKind::BadName { name: item_name.into(), reason: "constant names are UPPER_SNAKE_CASE" },
                ));
            }
            if !const_names.insert(item_name.to_string()) {
                return Err(err(line, ParseErrorKind::DuplicateField(item_name.into())));
            }
            let (value_text, comment) = split_comment(value_text.trim());
            doc.extend(comment);
            let value = parse_value(&base, value_text).map_err(|reason| {
                err(
                    line,
                    ParseErrorKind::BadConstantValue {
                        name: item_name.into(),
                        ty: ty_tok.into(),
                        value: value_text.into(),
                        reason,
                    },
                )
            })?;
            spec.constants.push(Constant { name: item_name.into(), ty: base, value, doc, line });
        } else {
            // A field, perhaps with a default.
            let ty = parse_type(ty_tok, package).map_err(|k| err(line, k))?;
            if !is_field_name(item_name) {
                return Err(err(
                    line,
                    ParseErrorKind::BadName {
                        name: item_name.into(),
                        reason: "field names are lower_snake_case, start with a letter, \
                                 and have no `__` and no trailing `_`",
                    },
                ));
            }
            if !field_names.insert(item_name.to_string()) {
                return Err(err(line, ParseErrorKind::DuplicateField(item_name.into())));
            }
            let (default_text, comment) = split_comment(after);
            doc.extend(comment);
            let default = if default_text.is_empty() {
                None
            } else {
                Some(parse_default(&ty, default_text).map_err(|reason| {
                    err(
                        line,
                        ParseErrorKind::BadDefaultValue {
                            name: item_name.into(),
                            ty: ty_tok.into(),
                            value: default_text.into(),
                            reason,
                        },
                    )
                })?)
            };
            spec.fields.push(Field { name: item_name.into(), ty, default, doc, line });
        }
    }
    if !seen_item && spec.doc.is_empty() {
        spec.doc = pending;
    }
    Ok(spec)
}

/// A comment's text: `# text` → `text` (one leading space dropped, the rest kept).
fn comment_text(c: &str) -> String {
    c.strip_prefix(' ').unwrap_or(c).trim_end().to_string()
}

fn split_ws(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

/// Splits `value # comment` at the first `#` outside quotes.
fn split_comment(s: &str) -> (&str, Option<String>) {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => return (s[..i].trim_end(), Some(comment_text(&s[i + 1..]))),
            _ => {}
        }
    }
    (s.trim_end(), None)
}

fn parse_usize_bound(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n > 0)
}

/// Parses a type token such as `float64[<=3]`, `string<=8[]` or `geometry_msgs/Point`.
fn parse_type(tok: &str, package: &str) -> Result<FieldType, ParseErrorKind> {
    let (base_tok, array) = match tok.find('[') {
        None => {
            if tok.contains(']') {
                return Err(ParseErrorKind::BadArray(tok.into()));
            }
            (tok, ArrayKind::Single)
        }
        Some(i) => {
            let inner = tok[i + 1..].strip_suffix(']').ok_or_else(|| ParseErrorKind::BadArray(tok.into()))?;
            let array = if inner.is_empty() {
                ArrayKind::Unbounded
            } else if let Some(n) = inner.strip_prefix("<=") {
                ArrayKind::Bounded(parse_usize_bound(n).ok_or_else(|| ParseErrorKind::BadArray(tok.into()))?)
            } else {
                ArrayKind::Fixed(parse_usize_bound(inner).ok_or_else(|| ParseErrorKind::BadArray(tok.into()))?)
            };
            (&tok[..i], array)
        }
    };
    let base = if base_tok == "wstring" || base_tok.starts_with("wstring<=") {
        return Err(ParseErrorKind::Unsupported("wstring".into()));
    } else if base_tok == "string" {
        BaseType::String { bound: None }
    } else if let Some(n) = base_tok.strip_prefix("string<=") {
        BaseType::String { bound: Some(parse_usize_bound(n).ok_or_else(|| ParseErrorKind::BadArray(tok.into()))?) }
    } else if let Some(p) = Primitive::from_name(base_tok) {
        BaseType::Primitive(p)
    } else if base_tok == "Header" {
        BaseType::Message { package: "std_msgs".into(), name: "Header".into() }
    } else if is_type_name(base_tok) {
        BaseType::Message { package: package.into(), name: base_tok.into() }
    } else {
        let parts: Vec<&str> = base_tok.split('/').collect();
        match parts.as_slice() {
            [pkg, name] | [pkg, "msg", name] if is_package_name(pkg) && is_type_name(name) => {
                BaseType::Message { package: (*pkg).into(), name: (*name).into() }
            }
            _ => return Err(ParseErrorKind::UnknownType(base_tok.into())),
        }
    };
    Ok(FieldType { base, array })
}

/// Parses a scalar value of `ty` (a primitive or a string).
fn parse_value(ty: &BaseType, s: &str) -> Result<Value, String> {
    let s = s.trim();
    match ty {
        BaseType::Primitive(Primitive::Bool) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err("expected `true` or `false`".into()),
        },
        BaseType::Primitive(p @ (Primitive::Float32 | Primitive::Float64)) => {
            let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
            if *p == Primitive::Float32 && v.is_finite() && v.abs() > f64::from(f32::MAX) {
                return Err("out of range of float32".into());
            }
            Ok(Value::Float(v))
        }
        BaseType::Primitive(p) => {
            let (lo, hi) = p.int_range().expect("integer type");
            let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err("not an integer".into());
            }
            let v: i128 = s.parse().map_err(|_| format!("out of range [{lo}, {hi}]"))?;
            if v < lo || v > hi {
                return Err(format!("out of range [{lo}, {hi}]"));
            }
            Ok(Value::Int(v))
        }
        BaseType::String { bound } => {
            let text = unquote(s)?;
            if let Some(n) = bound {
                if text.chars().count() > *n {
                    return Err(format!("longer than the bound {n}"));
                }
            }
            Ok(Value::String(text))
        }
        BaseType::Message { .. } => Err("messages have no literal values".into()),
    }
}

/// `"text"` or `'text'` (with `\` escapes) → text; unquoted text is taken as is.
fn unquote(s: &str) -> Result<String, String> {
    let Some(q) = s.chars().next().filter(|c| *c == '"' || *c == '\'') else {
        return Ok(s.to_string());
    };
    let mut out = String::new();
    let mut chars = s[1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c) => out.push(c),
                None => break,
            },
            c if c == q => {
                return if chars.as_str().trim().is_empty() {
                    Ok(out)
                } else {
                    Err("text after the closing quote".into())
                };
            }
            c => out.push(c),
        }
    }
    Err("unterminated string".into())
}

/// Splits `a, "b,c", d` at commas outside quotes.
fn split_list(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quote, mut escaped, mut start) = (None, false, 0);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, ',') => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

fn parse_default(ty: &FieldType, s: &str) -> Result<DefaultValue, String> {
    if let BaseType::Message { .. } = ty.base {
        return Err("message fields cannot have defaults".into());
    }
    match ty.array {
        ArrayKind::Single => parse_value(&ty.base, s).map(DefaultValue::Scalar),
        array => {
            let inner = s
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .ok_or_else(|| "an array default is `[a, b, ...]`".to_string())?;
            let values =
                split_list(inner).into_iter().map(|v| parse_value(&ty.base, v)).collect::<Result<Vec<_>, _>>()?;
            match array {
                ArrayKind::Fixed(n) if values.len() != n => Err(format!("{} values for an array of {n}", values.len())),
                ArrayKind::Bounded(n) if values.len() > n => {
                    Err(format!("{} values for an array of at most {n}", values.len()))
                }
                _ => Ok(DefaultValue::Array(values)),
            }
        }
    }
}

fn is_package_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

fn is_type_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_uppercase()) && b.all(|c| c.is_ascii_alphanumeric())
}

fn is_field_name(s: &str) -> bool {
    is_package_name(s) && !s.contains("__") && !s.ends_with('_')
}

fn is_constant_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_uppercase())
        && b.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MsgSpec, ParseError> {
        parse_str("my_msgs", "Thing", text, Path::new("my_msgs/msg/Thing.msg"))
    }

    fn kind(text: &str) -> (usize, ParseErrorKind) {
        let e = parse(text).unwrap_err();
        assert_eq!(e.file, Path::new("my_msgs/msg/Thing.msg"));
        (e.line, *e.kind)
    }

    #[test]
    fn parses_fields_types_and_arrays() {
        let spec = parse(
            "# A thing.\n# Second line.\n\n# The header.\nHeader header\nuint8[] data # pixels\nfloat64[9] k\n\
             int16[<=4] few\nstring<=8 short\nstring<=3[<=2] shorts\nInner inner\ngeometry_msgs/Point p\n\
             geometry_msgs/msg/Point q\nbyte b\nchar c\n",
        )
        .unwrap();
        assert_eq!(spec.type_name(), "my_msgs/msg/Thing");
        assert_eq!(spec.doc, ["A thing.", "Second line."]);
        let types: Vec<String> = spec.fields.iter().map(|f| f.ty.ros_name()).collect();
        assert_eq!(
            types,
            [
                "std_msgs/msg/Header",
                "uint8[]",
                "float64[9]",
                "int16[<=4]",
                "string<=8",
                "string<=3[<=2]",
                "my_msgs/msg/Inner",
                "geometry_msgs/msg/Point",
                "geometry_msgs/msg/Point",
                "byte",
                "char"
            ]
        );
        assert_eq!(spec.fields[0].doc, ["The header."]);
        assert_eq!(spec.fields[1].doc, ["pixels"]);
        assert_eq!(spec.fields[1].line, 6);
        assert!(spec.fields[2].doc.is_empty());
    }

    #[test]
    fn parses_constants() {
        let spec = parse(
            "int8 NEG=-1\nuint8 TOP = 255\nbool YES=true\nfloat32 HALF=0.5 # a half\n\
             string GREETING=\"hi # there\" # comment\nstring BARE=plain text\nuint64 BIG=18446744073709551615\n",
        )
        .unwrap();
        let values: Vec<(&str, &Value)> = spec.constants.iter().map(|c| (c.name.as_str(), &c.value)).collect();
        assert_eq!(
            values,
            [
                ("NEG", &Value::Int(-1)),
                ("TOP", &Value::Int(255)),
                ("YES", &Value::Bool(true)),
                ("HALF", &Value::Float(0.5)),
                ("GREETING", &Value::String("hi # there".into())),
                ("BARE", &Value::String("plain text".into())),
                ("BIG", &Value::Int(u64::MAX.into())),
            ]
        );
        assert_eq!(spec.constants[3].doc, ["a half"]);
        assert!(spec.fields.is_empty());
    }

    #[test]
    fn parses_defaults() {
        let spec =
            parse("float64 w 1\nint32[] xs [1, -2, 3]\nstring s \"a=b\"\nstring[2] two [\"x,y\", 'z']\nbool f false\n")
                .unwrap();
        assert_eq!(spec.fields[0].default, Some(DefaultValue::Scalar(Value::Float(1.0))));
        assert_eq!(
            spec.fields[1].default,
            Some(DefaultValue::Array(vec![Value::Int(1), Value::Int(-2), Value::Int(3)]))
        );
        assert_eq!(spec.fields[2].default, Some(DefaultValue::Scalar(Value::String("a=b".into()))));
        assert_eq!(
            spec.fields[3].default,
            Some(DefaultValue::Array(vec![Value::String("x,y".into()), Value::String("z".into())]))
        );
        assert!(spec.constants.is_empty());
    }

    #[test]
    fn empty_and_comment_only_files() {
        assert!(parse("").unwrap().fields.is_empty());
        let spec = parse("# Nothing here.\n").unwrap();
        assert_eq!(spec.doc, ["Nothing here."]);
        assert!(spec.fields.is_empty());
    }

    #[test]
    fn unknown_types() {
        assert_eq!(kind("int32 a\nfloat x\n"), (2, ParseErrorKind::UnknownType("float".into())));
        assert_eq!(kind("time t\n"), (1, ParseErrorKind::UnknownType("time".into())));
        assert_eq!(kind("\n\nBad-Name x\n"), (3, ParseErrorKind::UnknownType("Bad-Name".into())));
        assert_eq!(kind("a/b/C x\n"), (1, ParseErrorKind::UnknownType("a/b/C".into())));
    }

    #[test]
    fn wstring_is_unsupported() {
        assert_eq!(kind("wstring w\n"), (1, ParseErrorKind::Unsupported("wstring".into())));
        assert_eq!(kind("int8 a\nwstring<=3[] w\n"), (2, ParseErrorKind::Unsupported("wstring".into())));
        assert!(kind("wstring w\n").1.to_string().contains("not supported"));
    }

    #[test]
    fn bad_arrays() {
        for t in
            ["int32[", "int32[]]", "int32[x]", "int32[0]", "int32[<=]", "int32[<3]", "int32]", "string<=x", "string<=0"]
        {
            let (line, k) = kind(&format!("# c\n{t} a\n"));
            assert_eq!(line, 2, "{t}");
            assert_eq!(k, ParseErrorKind::BadArray(t.into()), "{t}");
        }
    }

    #[test]
    fn duplicates() {
        assert_eq!(kind("int32 a\nint32 b\nfloat64 a\n"), (3, ParseErrorKind::DuplicateField("a".into())));
        assert_eq!(kind("int32 A=1\nint32 A=2\n"), (2, ParseErrorKind::DuplicateField("A".into())));
    }

    #[test]
    fn bad_constant_values() {
        let bad = |text: &str| match kind(text) {
            (1, ParseErrorKind::BadConstantValue { reason, .. }) => reason,
            other => panic!("{text}: {other:?}"),
        };
        assert!(bad("uint8 X=256").contains("out of range"));
        assert!(bad("int8 X=-129").contains("out of range"));
        assert!(bad("uint32 X=-1").contains("out of range"));
        assert!(bad("int32 X=1.5").contains("not an integer"));
        assert!(bad("bool X=yes").contains("true"));
        assert!(bad("float32 X=abc").contains("not a number"));
        assert!(bad("float32 X=1e39").contains("float32"));
        assert!(bad("string<=2 X=\"abc\"").contains("bound"));
        assert!(bad("string X=\"open").contains("unterminated"));
        let e = parse("\nuint8 X=256\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "my_msgs/msg/Thing.msg:2: bad value `256` for constant `X` of type `uint8`: out of range [0, 255]"
        );
    }

    #[test]
    fn bad_constant_types_defaults_names_and_syntax() {
        assert!(matches!(kind("int32[] X=1").1, ParseErrorKind::BadConstantType { .. }));
        assert!(matches!(kind("Inner X=1").1, ParseErrorKind::BadConstantType { .. }));
        assert!(matches!(kind("int32 x 1.5").1, ParseErrorKind::BadDefaultValue { .. }));
        assert!(matches!(kind("int32[2] x [1]").1, ParseErrorKind::BadDefaultValue { .. }));
        assert!(matches!(kind("int32[] x 1").1, ParseErrorKind::BadDefaultValue { .. }));
        assert!(matches!(kind("Inner x 1").1, ParseErrorKind::BadDefaultValue { .. }));
        assert!(matches!(kind("int32 Bad").1, ParseErrorKind::BadName { .. }));
        assert!(matches!(kind("int32 a__b").1, ParseErrorKind::BadName { .. }));
        assert!(matches!(kind("int32 a_").1, ParseErrorKind::BadName { .. }));
        assert!(matches!(kind("int32 lower=1").1, ParseErrorKind::BadName { .. }));
        assert!(matches!(kind("int32").1, ParseErrorKind::Syntax(_)));
        assert!(matches!(kind("int32 # no name").1, ParseErrorKind::Syntax(_)));
        let e = parse_str("my_msgs", "lower", "", Path::new("x.msg")).unwrap_err();
        assert_eq!(e.line, 0);
        assert!(matches!(*e.kind, ParseErrorKind::BadName { .. }));
    }
}
