//! freight's CDR against an independent ROS 2 serializer: rosbags, a pure-Python
//! library that reads and writes ROS 2 messages without ROS.
//!
//! `tests/ros2_cdr/vectors.py encode` builds a fixed list of messages with rosbags
//! and prints, per case, the field values and rosbags' bytes. For every case this
//! test rebuilds the message in Rust and checks that
//!
//! 1. `to_cdr()` equals rosbags' bytes exactly;
//! 2. `from_cdr(rosbags' bytes)` equals the message, also with the bytes padded to a
//!    multiple of 4 as DDS delivers them;
//! 3. rosbags reads freight's bytes back to the same fields (`vectors.py decode`).
//!
//! It needs Python 3 with rosbags (`pip install rosbags`); without them it fails,
//! unless `FREIGHT_SKIP_PYTHON_INTEROP=1` is set, which skips it. `FREIGHT_PYTHON`
//! names the interpreter (default: `python3`, then `python`).

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use freight_msg::msgs::builtin_interfaces::{Duration, Time};
use freight_msg::msgs::sensor_msgs::{Image, PointCloud2, PointField};
use freight_msg::msgs::std_msgs::{Header, MultiArrayDimension, MultiArrayLayout, UInt64MultiArray, UInt8MultiArray};
use freight_msg::msgs::tensor_msgs::Tensor;
use freight_msg::{message, Buffer, Element, Message};
use freight_testkit::{skip, Lack};

// Test-only types; their .msg definitions are in vectors.py (USER_MSGS).

message! {
    /// Nested message that starts with a 1-byte field and ends with an 8-byte one.
    pub struct Inner = "freight_test_msgs/msg/Inner" {
        pub flag: bool,
        pub label: String,
        pub weight: f64,
    }
}

message! {
    /// Nested message that starts with an 8-byte field and ends with a 1-byte one.
    pub struct Wide = "freight_test_msgs/msg/Wide" {
        pub scale: f64,
        pub tag: u8,
    }
}

message! {
    /// Every kind of field, ordered so that most of them need padding before them.
    pub struct Everything = "freight_test_msgs/msg/Everything" {
        pub header: Header,
        pub flag: bool,
        pub int64_value: i64,
        pub int8_value: i8,
        pub int32_value: i32,
        pub uint8_value: u8,
        pub uint64_value: u64,
        pub int16_value: i16,
        pub float64_value: f64,
        pub uint16_value: u16,
        pub float32_value: f32,
        pub uint32_value: u32,
        pub rgb: [u8; 3],
        pub covariance: [f64; 9],
        pub names: Vec<String>,
        pub inner: Inner,
        pub inners: Vec<Inner>,
        pub stamps: [Time; 2],
        pub odd: u8,
        pub wide: Wide,
        pub bytes: Buffer<u8>,
        pub shorts: Buffer<u16>,
        pub words: Buffer<u32>,
        pub floats: Buffer<f32>,
        pub doubles: Buffer<f64>,
        pub flags: Vec<bool>,
        pub longs: Vec<i64>,
        pub done: bool,
    }
}

message! {
    /// `std_msgs/msg/Empty` as a user would declare it with `message!`: no fields.
    pub struct Empty = "std_msgs/msg/Empty" {}
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ros2_cdr/vectors.py");
const SKIP_VAR: &str = "FREIGHT_SKIP_PYTHON_INTEROP";
const INSTALL_HINT: &str = "this test needs Python 3 with rosbags: pip install rosbags \
     (or set FREIGHT_SKIP_PYTHON_INTEROP=1 to skip it)";

/// The case that ROS 2's implicit member of empty messages is about; it has its own test.
const EMPTY_CASE: &str = "empty_message";

#[test]
fn freight_cdr_is_byte_exact_with_rosbags() {
    let Some(vectors) = vectors("freight_cdr_is_byte_exact_with_rosbags") else { return };
    let cases: Vec<&Case> = vectors.cases.iter().filter(|c| c.name != EMPTY_CASE).collect();
    // A script edit must not silently drop a type from the comparison.
    let expected_types = [
        Time::TYPE_NAME,
        Duration::TYPE_NAME,
        Header::TYPE_NAME,
        MultiArrayDimension::TYPE_NAME,
        MultiArrayLayout::TYPE_NAME,
        UInt8MultiArray::TYPE_NAME,
        UInt64MultiArray::TYPE_NAME,
        Image::TYPE_NAME,
        PointField::TYPE_NAME,
        PointCloud2::TYPE_NAME,
        Tensor::TYPE_NAME,
        Everything::TYPE_NAME,
    ];
    for t in expected_types {
        assert!(cases.iter().any(|c| c.type_name == t), "vectors.py has no case of {t}");
    }
    assert!(cases.len() >= 40, "vectors.py printed only {} cases", cases.len());
    check_cases(vectors, &cases);
}

/// ROS 2 gives a message without fields a `uint8 structure_needs_at_least_one_member`,
/// so `std_msgs/msg/Empty` is one byte on the wire.
#[test]
fn empty_message_matches_ros2() {
    let Some(vectors) = vectors("empty_message_matches_ros2") else { return };
    let cases: Vec<&Case> = vectors.cases.iter().filter(|c| c.name == EMPTY_CASE).collect();
    assert_eq!(cases.len(), 1, "vectors.py has no {EMPTY_CASE} case");
    check_cases(vectors, &cases);
}

// ------------------------------------------------------------------ checking

struct Case {
    name: String,
    type_name: String,
    fields: Json,
    cdr: Vec<u8>,
}

struct Vectors {
    python: String,
    rosbags: String,
    cases: Vec<Case>,
}

/// Checks the fields rosbags read from freight's bytes against the message.
type Verify = Box<dyn Fn(&Json) -> Result<(), String>>;

/// What the decode step needs of a case that was checked in Rust.
struct Encoded {
    name: String,
    type_name: String,
    ours: Vec<u8>,
    verify: Verify,
}

fn check_cases(vectors: &Vectors, cases: &[&Case]) {
    let mut failures = Vec::new();
    let mut encoded = Vec::new();
    for case in cases {
        if let Some(e) = check_case(case, &mut failures) {
            encoded.push(e);
        }
    }

    // rosbags reads freight's bytes: one script run for all cases.
    let mut input = String::new();
    for e in &encoded {
        input.push_str(&e.type_name);
        input.push(' ');
        input.push_str(&to_hex(&e.ours));
        input.push('\n');
    }
    let out = run_script(&vectors.python, &["decode"], Some(input.into_bytes()))
        .unwrap_or_else(|e| panic!("vectors.py decode failed: {e}"));
    let results = match Json::parse(&out) {
        Ok(Json::Arr(r)) if r.len() == encoded.len() => r,
        Ok(_) => panic!("vectors.py decode did not print one result per message"),
        Err(e) => panic!("vectors.py decode printed invalid JSON: {e}"),
    };
    for (e, result) in encoded.iter().zip(&results) {
        let outcome = match (result.get("fields"), result.get("error")) {
            (Some(fields), _) => (e.verify)(fields),
            (None, Some(Json::Str(err))) => Err(format!("rosbags cannot deserialize freight's bytes: {err}")),
            _ => Err(format!("unexpected decode result {result:?}")),
        };
        if let Err(msg) = outcome {
            failures.push(format!("[{}] {}: rosbags reading freight's bytes: {msg}", e.name, e.type_name));
        }
    }

    let failed: std::collections::BTreeSet<&str> =
        failures.iter().filter_map(|f| f.strip_prefix('[')?.split(']').next()).collect();
    println!(
        "{} of {} cases match rosbags {} byte for byte in both directions",
        cases.len() - failed.len(),
        cases.len(),
        vectors.rosbags
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from rosbags {}:\n\n{}",
        failed.len(),
        cases.len(),
        vectors.rosbags,
        failures.join("\n\n")
    );
}

macro_rules! dispatch {
    ($case:expr, $failures:expr; $($t:ty),* $(,)?) => {
        $( if $case.type_name == <$t as Message>::TYPE_NAME { check_as::<$t>($case, $failures) } else )* {
            $failures.push(format!("[{}] no Rust type for {}", $case.name, $case.type_name));
            None
        }
    };
}

fn check_case(case: &Case, failures: &mut Vec<String>) -> Option<Encoded> {
    dispatch!(case, failures; Time, Duration, Header, MultiArrayDimension, MultiArrayLayout, UInt8MultiArray,
        UInt64MultiArray, Image, PointField, PointCloud2, Tensor, Everything, Empty)
}

fn check_as<M: Message + FromJson>(case: &Case, failures: &mut Vec<String>) -> Option<Encoded> {
    let fail = |failures: &mut Vec<String>, what: String| {
        failures.push(format!("[{}] {}: {what}", case.name, case.type_name));
    };
    let msg = match M::from_json(&case.fields) {
        Ok(m) => m,
        Err(e) => {
            fail(failures, format!("cannot rebuild the message from the script's fields: {e}"));
            return None;
        }
    };
    let ours = match msg.to_cdr() {
        Ok(b) => b,
        Err(e) => {
            fail(failures, format!("to_cdr() failed: {e}"));
            return None;
        }
    };
    if ours != case.cdr {
        fail(
            failures,
            format!("to_cdr() differs from rosbags' serialization\n{}", describe_difference(&ours, &case.cdr)),
        );
    }
    let mut padded = case.cdr.clone();
    padded.resize(case.cdr.len().next_multiple_of(4), 0);
    for (what, bytes) in [("rosbags' bytes", &case.cdr), ("rosbags' bytes padded to 4", &padded)] {
        match M::from_cdr(bytes) {
            Ok(back) if back == msg => {}
            Ok(back) => fail(failures, format!("from_cdr({what}) gives\n  {back:?}\nexpected\n  {msg:?}")),
            Err(e) => fail(failures, format!("from_cdr({what}) failed: {e}")),
        }
    }
    Some(Encoded {
        name: case.name.clone(),
        type_name: case.type_name.clone(),
        ours,
        verify: Box::new(move |fields| {
            let back = M::from_json(fields).map_err(|e| format!("cannot rebuild what rosbags read: {e}"))?;
            if back == msg {
                Ok(())
            } else {
                Err(format!("rosbags read\n  {back:?}\nexpected\n  {msg:?}"))
            }
        }),
    })
}

/// The first differing byte of two encodings, with the bytes around it.
fn describe_difference(ours: &[u8], theirs: &[u8]) -> String {
    let at = ours.iter().zip(theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
    let from = at.saturating_sub(16);
    let dump = |b: &[u8]| {
        let end = (at + 17).min(b.len());
        let mut s = String::new();
        for (i, byte) in b.iter().enumerate().take(end).skip(from) {
            if i == at {
                s.push_str(&format!("[{byte:02x}] "));
            } else {
                s.push_str(&format!("{byte:02x} "));
            }
        }
        if at >= b.len() {
            s.push_str("[end]");
        }
        s
    };
    format!(
        "  freight {} bytes, rosbags {} bytes; first difference at byte {at} \
         (offset {} in the body after the 4-byte encapsulation header)\n  \
         freight from byte {from}: {}\n  rosbags from byte {from}: {}",
        ours.len(),
        theirs.len(),
        at.saturating_sub(4),
        dump(ours),
        dump(theirs)
    )
}

// ------------------------------------------------------------------ the script

fn vectors(test: &str) -> Option<&'static Vectors> {
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        skip(test, Lack::OptedOut, &format!("{SKIP_VAR}=1, freight's CDR is not compared with rosbags (ROS 2)"));
        return None;
    }
    static VECTORS: OnceLock<Result<Vectors, String>> = OnceLock::new();
    match VECTORS.get_or_init(load_vectors) {
        Ok(v) => Some(v),
        Err(e) => panic!("{e}"),
    }
}

fn find_python() -> Result<String, String> {
    let candidates = match std::env::var("FREIGHT_PYTHON") {
        Ok(p) => vec![p],
        Err(_) => vec!["python3".to_string(), "python".to_string()],
    };
    for p in &candidates {
        if let Ok(out) = Command::new(p).arg("--version").output() {
            let v = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            if out.status.success() && v.contains("Python 3") {
                return Ok(p.clone());
            }
        }
    }
    Err(format!("no Python 3 interpreter found (tried {}); {INSTALL_HINT}", candidates.join(", ")))
}

fn load_vectors() -> Result<Vectors, String> {
    let python = find_python()?;
    let out = run_script(&python, &["encode"], None)?;
    let json = Json::parse(&out).map_err(|e| format!("vectors.py encode printed invalid JSON: {e}"))?;
    let field = |v: &Json, k: &str| v.get(k).cloned().ok_or_else(|| format!("vectors.py output lacks {k:?}"));
    let text = |v: &Json, k: &str| match field(v, k)? {
        Json::Str(s) => Ok(s),
        other => Err(format!("{k:?} is not a string: {other:?}")),
    };
    let Json::Arr(list) = field(&json, "cases")? else { return Err("\"cases\" is not a list".into()) };
    let mut cases = Vec::new();
    for c in &list {
        cases.push(Case {
            name: text(c, "name")?,
            type_name: text(c, "type")?,
            fields: field(c, "fields")?,
            cdr: from_hex(&text(c, "cdr")?)?,
        });
    }
    Ok(Vectors { rosbags: format!("{} ({})", text(&json, "rosbags")?, text(&json, "store")?), python, cases })
}

fn run_script(python: &str, args: &[&str], stdin: Option<Vec<u8>>) -> Result<String, String> {
    let mut child = Command::new(python)
        .arg(SCRIPT)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {python} {SCRIPT}: {e}; {INSTALL_HINT}"))?;
    let writer = stdin.map(|data| {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        std::thread::spawn(move || pipe.write_all(&data))
    });
    let out = child.wait_with_output().map_err(|e| format!("{python} {SCRIPT}: {e}"))?;
    if let Some(w) = writer {
        w.join().expect("stdin writer").map_err(|e| format!("writing to vectors.py: {e}"))?;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => String::from_utf8(out.stdout).map_err(|e| format!("vectors.py printed non-UTF-8: {e}")),
        Some(3) => Err(format!("{} — {INSTALL_HINT}", stderr.trim())),
        _ => Err(format!("{python} {SCRIPT} {} failed ({}):\n{stderr}", args.join(" "), out.status)),
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize]);
        s.push(DIGITS[(b & 15) as usize]);
    }
    String::from_utf8(s).expect("hex digits are ASCII")
}

fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    fn nibble(c: u8) -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!("{:?} is not a hex digit", c as char)),
        }
    }
    if !s.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    s.as_bytes().chunks_exact(2).map(|p| Ok(nibble(p[0])? << 4 | nibble(p[1])?)).collect()
}

// ------------------------------------------------------------------ JSON

/// Just enough JSON for the script's output; numbers keep their text so that
/// 64-bit integers and floats are parsed as the field's own type.
#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = JsonParser { s: text.as_bytes(), i: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing characters at {}", p.i));
        }
        Ok(v)
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a bool",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "a list",
            Json::Obj(_) => "an object",
        }
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                if self.eat(b'}') {
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    if !self.eat(b':') {
                        return self.err("expected ':'");
                    }
                    fields.push((k, self.value()?));
                    if self.eat(b'}') {
                        return Ok(Json::Obj(fields));
                    }
                    if !self.eat(b',') {
                        return self.err("expected ',' or '}'");
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat(b']') {
                        return Ok(Json::Arr(items));
                    }
                    if !self.eat(b',') {
                        return self.err("expected ',' or ']'");
                    }
                }
            }
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                while self.i < self.s.len() && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.i += 1;
                }
                Ok(Json::Num(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
            }
            _ => self.err("expected a value"),
        }
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            self.err("bad literal")
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.s.get(self.i..self.i + 4).ok_or("truncated \\u escape")?;
        let text = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
        self.i += 4;
        u32::from_str_radix(text, 16).map_err(|e| format!("bad \\u escape: {e}"))
    }

    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i] != b'"' && self.s[self.i] != b'\\' {
                self.i += 1;
            }
            out.extend_from_slice(&self.s[start..self.i]);
            match self.s.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|e| e.to_string());
                }
                Some(b'\\') => {
                    let esc = *self.s.get(self.i + 1).ok_or("truncated escape")?;
                    self.i += 2;
                    let c = match esc {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xd800..0xdc00).contains(&code) {
                                if !self.s[self.i..].starts_with(b"\\u") {
                                    return self.err("lone surrogate");
                                }
                                self.i += 2;
                                let low = self.hex4()?;
                                code = 0x10000 + ((code - 0xd800) << 10) + (low.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            char::from_u32(code).ok_or("bad \\u escape")?
                        }
                        _ => return self.err("bad escape"),
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => return self.err("unterminated string"),
            }
        }
    }
}

// ------------------------------------------------------------------ JSON -> messages

/// Builds a field value from the script's JSON (see the schema in vectors.py).
trait FromJson: Sized {
    fn from_json(v: &Json) -> Result<Self, String>;

    /// A sequence or array of values: a JSON list (numbers have more forms).
    fn seq_from_json(v: &Json) -> Result<Vec<Self>, String> {
        match v {
            Json::Arr(items) => {
                items.iter().enumerate().map(|(i, x)| Self::from_json(x).map_err(|e| format!("[{i}]: {e}"))).collect()
            }
            other => Err(format!("expected a list, got {}", other.kind())),
        }
    }
}

/// `(i*A+B)%M` as (A, B, M); `+B` and `%M` are optional.
fn parse_pattern(p: &str) -> Result<(u64, u64, Option<u64>), String> {
    let bad = || format!("bad pattern {p:?}");
    let p: String = p.chars().filter(|c| !c.is_whitespace()).collect();
    let (body, modulo) = match p.rsplit_once('%') {
        Some((b, m)) => (b, Some(m.parse::<u64>().map_err(|_| bad())?)),
        None => (p.as_str(), None),
    };
    let (body, parens) = match body.strip_prefix('(').and_then(|b| b.strip_suffix(')')) {
        Some(b) => (b, true),
        None => (body, false),
    };
    let rest = body.strip_prefix("i*").ok_or_else(bad)?;
    let (mul, add) = match rest.split_once('+') {
        Some((m, a)) if parens => (m, a),
        Some(_) => return Err(bad()),
        None => (rest, "0"),
    };
    let (mul, add) = (mul.parse().map_err(|_| bad())?, add.parse().map_err(|_| bad())?);
    if modulo == Some(0) {
        return Err(bad());
    }
    Ok((mul, add, modulo))
}

/// A number array in any of its forms: list, `{"pattern", "len"}`, `{"hex"}`.
fn number_seq<T: FromJson>(
    v: &Json,
    size: usize,
    from_le: fn(&[u8]) -> T,
    from_pattern: Option<fn(u64) -> T>,
) -> Result<Vec<T>, String> {
    if let Json::Arr(items) = v {
        return items.iter().enumerate().map(|(i, x)| T::from_json(x).map_err(|e| format!("[{i}]: {e}"))).collect();
    }
    if let Some(Json::Str(hex)) = v.get("hex") {
        let bytes = from_hex(hex)?;
        if !bytes.len().is_multiple_of(size) {
            return Err(format!("{} bytes of hex are not whole {size}-byte elements", bytes.len()));
        }
        return Ok(bytes.chunks_exact(size).map(from_le).collect());
    }
    if let (Some(Json::Str(p)), Some(Json::Num(len))) = (v.get("pattern"), v.get("len")) {
        let from_pattern = from_pattern.ok_or("patterns are for integer arrays")?;
        let len: u64 = len.parse().map_err(|e| format!("bad len {len:?}: {e}"))?;
        let (mul, add, modulo) = parse_pattern(p)?;
        return Ok((0..len)
            .map(|i| {
                let x = i.wrapping_mul(mul).wrapping_add(add);
                from_pattern(modulo.map_or(x, |m| x % m))
            })
            .collect());
    }
    Err(format!("expected a number array, got {v:?}"))
}

macro_rules! int_from_json {
    ($($t:ty),*) => {$(
        impl FromJson for $t {
            fn from_json(v: &Json) -> Result<Self, String> {
                match v {
                    Json::Num(s) => s.parse().map_err(|e| format!("{s:?} is not a {}: {e}", stringify!($t))),
                    other => Err(format!("expected a {}, got {}", stringify!($t), other.kind())),
                }
            }
            fn seq_from_json(v: &Json) -> Result<Vec<Self>, String> {
                number_seq(
                    v,
                    size_of::<$t>(),
                    |b| <$t>::from_le_bytes(b.try_into().expect("chunk of the element's size")),
                    Some(|x| x as $t),
                )
            }
        }
    )*};
}
int_from_json!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_from_json {
    ($($t:ty),*) => {$(
        impl FromJson for $t {
            fn from_json(v: &Json) -> Result<Self, String> {
                // Parsed as f64 and then narrowed, as Python does for float32 fields.
                let x: f64 = match v {
                    Json::Num(s) => s.parse().map_err(|e| format!("{s:?} is not a float: {e}"))?,
                    Json::Str(s) if s == "nan" => f64::NAN,
                    Json::Str(s) if s == "inf" => f64::INFINITY,
                    Json::Str(s) if s == "-inf" => f64::NEG_INFINITY,
                    other => return Err(format!("expected a float, got {other:?}")),
                };
                Ok(x as $t)
            }
            fn seq_from_json(v: &Json) -> Result<Vec<Self>, String> {
                number_seq(
                    v,
                    size_of::<$t>(),
                    |b| <$t>::from_le_bytes(b.try_into().expect("chunk of the element's size")),
                    None,
                )
            }
        }
    )*};
}
float_from_json!(f32, f64);

impl FromJson for bool {
    fn from_json(v: &Json) -> Result<Self, String> {
        match v {
            Json::Bool(b) => Ok(*b),
            other => Err(format!("expected a bool, got {}", other.kind())),
        }
    }
}

impl FromJson for String {
    fn from_json(v: &Json) -> Result<Self, String> {
        match v {
            Json::Str(s) => Ok(s.clone()),
            other => Err(format!("expected a string, got {}", other.kind())),
        }
    }
}

impl<T: FromJson> FromJson for Vec<T> {
    fn from_json(v: &Json) -> Result<Self, String> {
        T::seq_from_json(v)
    }
}

impl<T: FromJson, const N: usize> FromJson for [T; N] {
    fn from_json(v: &Json) -> Result<Self, String> {
        let items = T::seq_from_json(v)?;
        let n = items.len();
        items.try_into().map_err(|_| format!("expected {N} elements, got {n}"))
    }
}

impl<T: Element + FromJson> FromJson for Buffer<T> {
    fn from_json(v: &Json) -> Result<Self, String> {
        T::seq_from_json(v).map(Buffer::from)
    }
}

/// `FromJson` for message types: every field must be present, no other may be.
macro_rules! message_from_json {
    ($($t:ident { $($f:ident),* $(,)? })*) => {$(
        impl FromJson for $t {
            fn from_json(v: &Json) -> Result<Self, String> {
                const FIELDS: &[&str] = &[$(stringify!($f)),*];
                let Json::Obj(obj) = v else {
                    return Err(format!("{}: expected an object, got {}", stringify!($t), v.kind()));
                };
                if let Some((k, _)) = obj.iter().find(|(k, _)| !FIELDS.contains(&k.as_str())) {
                    return Err(format!("{}: unknown field {k:?}", stringify!($t)));
                }
                Ok($t {$(
                    $f: {
                        let name = stringify!($f);
                        let value = v.get(name).ok_or_else(|| format!("{}: field {name:?} missing", stringify!($t)))?;
                        FromJson::from_json(value).map_err(|e| format!("{}.{name}: {e}", stringify!($t)))?
                    },
                )*})
            }
        }
    )*};
}

message_from_json! {
    Time { sec, nanosec }
    Duration { sec, nanosec }
    Header { stamp, frame_id }
    MultiArrayDimension { label, size, stride }
    MultiArrayLayout { dim, data_offset }
    UInt8MultiArray { layout, data }
    UInt64MultiArray { layout, data }
    Image { header, height, width, encoding, is_bigendian, step, data }
    PointField { name, offset, datatype, count }
    PointCloud2 { header, height, width, fields, is_bigendian, point_step, row_step, data, is_dense }
    Tensor { dtype_code, dtype_bits, dtype_lanes, shape, strides, byte_offset, data }
    Inner { flag, label, weight }
    Wide { scale, tag }
    Everything {
        header, flag, int64_value, int8_value, int32_value, uint8_value, uint64_value, int16_value, float64_value,
        uint16_value, float32_value, uint32_value, rgb, covariance, names, inner, inners, stamps, odd, wide, bytes,
        shorts, words, floats, doubles, flags, longs, done,
    }
    Empty {}
}
