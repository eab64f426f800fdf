//! Making what a peer sent storable before it is stored.
//!
//! Everything an attempt records — a receiver's body, a broker's error text, a plugin's output
//! and log lines — came from outside, and either database can refuse it: PostgreSQL rejects a
//! NUL character in `TEXT` and in `JSONB` strings (SQLSTATE 22P05), and both backends would
//! happily store megabytes per attempt. A refused row must never cost the result (or its
//! batch-mates in the same transaction), so every string is cleaned here, once, on the way to
//! the store: NUL becomes U+FFFD, strings are cut at a character boundary under a byte cap, and
//! whatever was cut is flagged. Invalid UTF-8 cannot reach this point: transports decode peer
//! bytes lossily (`String::from_utf8_lossy`) and a plugin's strings are checked by the
//! component model.

use std::borrow::Cow;

use serde_json::Value;

/// Bytes kept of one string inside an attempt's output or error.
pub const MAX_STRING_BYTES: usize = 64 * 1024;
/// Bytes kept of one log line.
pub const MAX_LOG_LINE_BYTES: usize = 8 * 1024;
/// Log lines kept per attempt (the host's own lines and a plugin's together).
pub const MAX_LOG_LINES: usize = 200;
/// Bytes kept of all strings of one JSON document (an output or an error) together.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// What replaces a NUL character.
const NUL_REPLACEMENT: char = '\u{FFFD}';

/// `text` without NUL characters and at most `max_bytes` long (cut at a character boundary);
/// whether anything was cut.
pub fn text(text: &str, max_bytes: usize) -> (Cow<'_, str>, bool) {
    let cut = if text.len() > max_bytes { floor_char_boundary(text, max_bytes) } else { text.len() };
    let kept = &text[..cut];
    let cleaned = if kept.contains('\0') { Cow::Owned(kept.replace('\0', "\u{FFFD}")) } else { Cow::Borrowed(kept) };
    (cleaned, cut < text.len())
}

/// Clean every string and object key of `value` in place: no NUL, each string at most
/// [`MAX_STRING_BYTES`], all of them together at most [`MAX_DOCUMENT_BYTES`] (strings past the
/// budget are emptied). Whether anything was cut.
pub fn value(value: &mut Value) -> bool {
    let mut budget = MAX_DOCUMENT_BYTES;
    clean(value, &mut budget)
}

fn clean(value: &mut Value, budget: &mut usize) -> bool {
    match value {
        Value::String(s) => clean_string(s, budget),
        Value::Array(items) => items.iter_mut().fold(false, |cut, item| clean(item, budget) | cut),
        Value::Object(map) => {
            let mut cut = false;
            if map.keys().any(|k| k.contains('\0')) {
                // Keys are rebuilt only in the rare case one holds a NUL.
                let entries = std::mem::take(map);
                for (key, item) in entries {
                    map.insert(key.replace('\0', &NUL_REPLACEMENT.to_string()), item);
                }
            }
            for item in map.values_mut() {
                cut |= clean(item, budget);
            }
            cut
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn clean_string(s: &mut String, budget: &mut usize) -> bool {
    let limit = MAX_STRING_BYTES.min(*budget);
    let (cleaned, cut) = text(s, limit);
    if let Cow::Owned(owned) = cleaned {
        *s = owned;
    } else if cut {
        let end = cleaned.len();
        s.truncate(end);
    }
    *budget = budget.saturating_sub(s.len());
    cut
}

/// The largest index `<= at` that is a char boundary of `s`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_is_replaced_and_length_is_capped_at_a_char_boundary() {
        assert_eq!(text("ok\0", 10), (Cow::Owned::<str>("ok\u{FFFD}".into()), false));
        assert_eq!(text("plain", 10), (Cow::Borrowed("plain"), false));
        // 'é' is two bytes: a cut inside it moves back to before it.
        let (cut, truncated) = text("aé", 2);
        assert_eq!((cut.as_ref(), truncated), ("a", true));
    }

    #[test]
    fn values_are_cleaned_everywhere_and_flagged_when_cut() {
        let mut v = json!({"ok": "a\u{0}b", "k\u{0}ey": ["x\u{0}"], "n": 1});
        assert!(!value(&mut v));
        assert_eq!(v, json!({"ok": "a\u{FFFD}b", "k\u{FFFD}ey": ["x\u{FFFD}"], "n": 1}));

        let mut big = json!({"body": "x".repeat(MAX_STRING_BYTES + 10)});
        assert!(value(&mut big));
        assert_eq!(big["body"].as_str().unwrap().len(), MAX_STRING_BYTES);

        // The document budget: five strings of 64 KiB exceed 256 KiB together.
        let mut many = Value::Array((0..5).map(|_| json!("y".repeat(MAX_STRING_BYTES))).collect());
        assert!(value(&mut many));
        let total: usize = many.as_array().unwrap().iter().map(|s| s.as_str().unwrap().len()).sum();
        assert_eq!(total, MAX_DOCUMENT_BYTES);
    }
}
