//! ROS 2 name rules for nodes, namespaces and topics, and topic expansion.

/// A name that breaks ROS 2's naming rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {name:?}: {reason}")]
pub struct NameError {
    /// What kind of name (`node name`, `namespace`, `topic name`).
    pub what: &'static str,
    /// The name as given.
    pub name: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

fn token_ok(t: &str) -> Result<(), &'static str> {
    let mut chars = t.chars();
    match chars.next() {
        None => Err("contains an empty token ('//' or a trailing '/')"),
        Some(c) if c.is_ascii_digit() => Err("a token starts with a digit"),
        Some(c) if !(c.is_ascii_alphanumeric() || c == '_') => Err("only letters, digits, '_' and '/' are allowed"),
        Some(_) if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => Ok(()),
        Some(_) => Err("only letters, digits, '_' and '/' are allowed"),
    }
}

/// Checks a node name (`camera_driver`).
pub fn validate_node_name(name: &str) -> Result<(), NameError> {
    let err = |reason| NameError { what: "node name", name: name.into(), reason };
    if name.is_empty() {
        return Err(err("is empty"));
    }
    if name.contains('/') {
        return Err(err("contains '/'; put the path in the namespace"));
    }
    token_ok(name).map_err(err)
}

/// Checks a namespace and returns it absolute (`""` and `"/"` → `"/"`, `"a"` → `"/a"`).
pub fn normalize_namespace(ns: &str) -> Result<String, NameError> {
    let err = |reason| NameError { what: "namespace", name: ns.into(), reason };
    let trimmed = ns.strip_prefix('/').unwrap_or(ns);
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    trimmed.split('/').try_for_each(token_ok).map_err(err)?;
    Ok(format!("/{trimmed}"))
}

/// Expands a topic name against a node's namespace and name, as rcl does:
/// absolute names stay, `~` is the node's private namespace, others are
/// relative to the namespace.
pub fn expand_topic(topic: &str, namespace: &str, node: &str) -> Result<String, NameError> {
    let err = |reason| NameError { what: "topic name", name: topic.into(), reason };
    if topic.is_empty() {
        return Err(err("is empty"));
    }
    let base = if namespace == "/" { String::new() } else { namespace.to_string() };
    let full = if let Some(rest) = topic.strip_prefix('~') {
        match rest {
            "" => format!("{base}/{node}"),
            r if r.starts_with('/') => format!("{base}/{node}{r}"),
            _ => return Err(err("'~' must be followed by '/' or nothing")),
        }
    } else if topic.starts_with('/') {
        topic.to_string()
    } else {
        format!("{base}/{topic}")
    };
    full[1..].split('/').try_for_each(token_ok).map_err(err)?;
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_expand_like_rcl() {
        assert_eq!(expand_topic("image", "/cam", "drv").unwrap(), "/cam/image");
        assert_eq!(expand_topic("/image", "/cam", "drv").unwrap(), "/image");
        assert_eq!(expand_topic("~/state", "/", "drv").unwrap(), "/drv/state");
        assert_eq!(expand_topic("image", "/", "drv").unwrap(), "/image");
    }

    #[test]
    fn bad_names_say_which_rule_they_break() {
        assert_eq!(expand_topic("", "/", "n").unwrap_err().reason, "is empty");
        assert!(expand_topic("a//b", "/", "n").is_err());
        assert!(expand_topic("a/", "/", "n").is_err());
        assert!(expand_topic("1abc", "/", "n").is_err());
        assert!(expand_topic("a b", "/", "n").is_err());
        assert!(validate_node_name("my-node").is_err());
        assert!(validate_node_name("").is_err());
        assert!(normalize_namespace("/a//b").is_err());
        assert_eq!(normalize_namespace("robot").unwrap(), "/robot");
    }
}
