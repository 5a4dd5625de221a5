//! The client's key namespace (`ClientOptions::key_prefix`), as Redisson's `NameMapper`: the
//! prefix maps the user's name to the name polylock works with (`app:` + `orders:42` ->
//! `app:orders:42`), and every key and channel a kind derives from a name (see
//! [`crate::keys`]) derives from that mapped name, so a Redisson client whose `NameMapper` adds
//! the same prefix shares the locks. Errors, metrics and `LockInfo` show the user's name.

use crate::foundation::error::{Error, Result};

/// Longest key prefix accepted: a namespace, not a payload.
pub const MAX_KEY_PREFIX_BYTES: usize = 128;

/// Characters a prefix may not hold: `{` `}` would become (or break) the cluster hash tag of
/// every name, and `*` `?` `[` `]` `\` are glob characters of the `SCAN` and ACL patterns the
/// prefix goes into.
const FORBIDDEN: &[char] = &['{', '}', '*', '?', '[', ']', '\\'];

/// Checks a key prefix: 1 to [`MAX_KEY_PREFIX_BYTES`] bytes, no whitespace or control
/// characters, none of `{ } * ? [ ] \`.
pub(crate) fn validate(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Err(Error::invalid_argument(
            "key_prefix must not be empty; leave it out for no prefix".to_owned(),
        ));
    }
    if prefix.len() > MAX_KEY_PREFIX_BYTES {
        return Err(Error::invalid_argument(format!(
            "key_prefix is {} bytes long; at most {MAX_KEY_PREFIX_BYTES} are accepted",
            prefix.len()
        )));
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| FORBIDDEN.contains(c) || c.is_whitespace() || c.is_control())
    {
        return Err(Error::invalid_argument(format!(
            "key_prefix must not contain {bad:?} (no whitespace or control characters, \
             no '{{' or '}}' which would change cluster hash tags, no glob characters * ? [ ] \\), \
             got {prefix:?}"
        )));
    }
    Ok(())
}

/// The name polylock works with for the user's `name`: `prefix + name`.
pub(crate) fn apply(prefix: Option<&str>, name: &str) -> String {
    match prefix {
        Some(prefix) => format!("{prefix}{name}"),
        None => name.to_owned(),
    }
}

/// The user's name of a mapped `key`, or `None` when it is outside the prefix.
pub(crate) fn strip<'a>(prefix: Option<&str>, key: &'a str) -> Option<&'a str> {
    match prefix {
        Some(prefix) => key.strip_prefix(prefix),
        None => Some(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_and_unmap_and_hash_tags_stay_in_the_name() {
        assert_eq!(apply(Some("app:"), "orders:42"), "app:orders:42");
        assert_eq!(apply(Some("app:"), "{tag}x"), "app:{tag}x");
        assert_eq!(apply(None, "x"), "x");
        assert_eq!(strip(Some("app:"), "app:x"), Some("x"));
        assert_eq!(strip(Some("app:"), "other:x"), None);
    }

    #[test]
    fn bad_prefixes_are_refused_with_the_reason() {
        for good in ["app:", "tenant-7/", "a"] {
            validate(good).unwrap();
        }
        for (bad, says) in [
            ("", "must not be empty"),
            ("{app}:", "must not contain '{'"),
            ("app}", "must not contain '}'"),
            ("a*", "must not contain '*'"),
            ("a b", "must not contain ' '"),
        ] {
            let err = validate(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
            assert!(err.to_string().contains(says), "{bad:?}: {err}");
        }
        let long = "p".repeat(MAX_KEY_PREFIX_BYTES + 1);
        assert!(validate(&long)
            .unwrap_err()
            .to_string()
            .contains("129 bytes"));
    }
}
