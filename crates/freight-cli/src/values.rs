//! The YAML a user types for a message's fields (`freight service call /set
//! std_srvs/srv/SetBool "{data: true}"`), parsed into the value tree that
//! [`freight_msg::fields`] sets a message from, as `ros2` reads its YAML
//! argument.

use freight_msg::FieldValue;
use yaml_rust2::{Yaml, YamlLoader};

/// `text` as one YAML document; empty text is `{}` (every field its default).
pub fn parse(text: &str) -> Result<FieldValue, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("the values are not YAML: {e}"))?;
    match docs.as_slice() {
        [] => Ok(FieldValue::Map(Vec::new())),
        [doc] => convert(doc, ""),
        more => Err(format!("the values are {} YAML documents; give one, as \"{{data: true}}\"", more.len())),
    }
}

fn convert(yaml: &Yaml, at: &str) -> Result<FieldValue, String> {
    let place = || if at.is_empty() { String::from("the values") } else { format!("`{at}`") };
    Ok(match yaml {
        Yaml::Null => FieldValue::Null,
        Yaml::Boolean(b) => FieldValue::Bool(*b),
        Yaml::Integer(i) => FieldValue::Int(i128::from(*i)),
        // An integer beyond i64 (a large uint64) is read as a real; keep it exact.
        Yaml::Real(text) => match text.parse::<i128>() {
            Ok(i) => FieldValue::Int(i),
            Err(_) => FieldValue::Float(yaml.as_f64().ok_or_else(|| format!("{}: `{text}` is no number", place()))?),
        },
        Yaml::String(s) => FieldValue::Str(s.clone()),
        Yaml::Array(items) => FieldValue::Seq(
            items.iter().enumerate().map(|(i, item)| convert(item, &format!("{at}[{i}]"))).collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(pairs) => {
            let mut fields = Vec::with_capacity(pairs.len());
            for (key, value) in pairs {
                let Yaml::String(name) = key else {
                    return Err(format!("{}: a field name must be a string, not {key:?}", place()));
                };
                let path = if at.is_empty() { name.clone() } else { format!("{at}.{name}") };
                fields.push((name.clone(), convert(value, &path)?));
            }
            FieldValue::Map(fields)
        }
        // The loader resolves aliases to their anchor's value; one it could not resolve is left.
        Yaml::Alias(_) => return Err(format!("{}: an alias to no anchor", place())),
        Yaml::BadValue => return Err(format!("{}: not a value", place())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: Vec<(&str, FieldValue)>) -> FieldValue {
        FieldValue::Map(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    #[test]
    fn flow_and_block_mappings_read_alike() {
        let expected = map(vec![
            ("data", FieldValue::Bool(true)),
            ("header", map(vec![("frame_id", FieldValue::Str("cam".into()))])),
            ("v", FieldValue::Seq(vec![FieldValue::Int(1), FieldValue::Float(2.5)])),
        ]);
        assert_eq!(parse("{data: true, header: {frame_id: cam}, v: [1, 2.5]}").unwrap(), expected);
        assert_eq!(parse("data: true\nheader:\n  frame_id: cam\nv:\n- 1\n- 2.5\n").unwrap(), expected);
    }

    #[test]
    fn nothing_is_an_empty_request_and_numbers_keep_their_precision() {
        assert_eq!(parse("").unwrap(), map(vec![]));
        assert_eq!(parse("{}").unwrap(), map(vec![]));
        assert_eq!(parse("{n: 18446744073709551615}").unwrap(), map(vec![("n", FieldValue::Int(u64::MAX.into()))]));
        assert_eq!(parse("{x: .inf}").unwrap(), map(vec![("x", FieldValue::Float(f64::INFINITY))]));
        assert_eq!(parse("{s: '42'}").unwrap(), map(vec![("s", FieldValue::Str("42".into()))]));
        let twice = map(vec![("a", FieldValue::Int(1)), ("b", FieldValue::Int(1))]);
        assert_eq!(parse("{a: &x 1, b: *x}").unwrap(), twice, "an alias is its anchor's value");
    }

    #[test]
    fn what_is_not_one_yaml_document_of_named_fields_is_refused() {
        assert!(parse("{data: [1, 2").unwrap_err().starts_with("the values are not YAML"));
        assert!(parse("a: 1\n---\nb: 2\n").unwrap_err().contains("2 YAML documents"));
        assert!(parse("{a: {1: x}}").unwrap_err().starts_with("`a`: a field name must be a string"));
    }
}
