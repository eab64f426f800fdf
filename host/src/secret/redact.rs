//! Keeping secret values out of everything an attempt stores.
//!
//! A receiver may echo what it was sent — quoted in JSON (once, or twice when it quotes a
//! JSON request inside its JSON answer), URL-encoded in a query string,
//! base64-encoded in an `Authorization: Basic` header, upper-cased — and
//! the echo lands in the attempt's output, error or logs. So a [`Redactor`] looks for each
//! secret in all of those forms, ignoring ASCII case, and for any run of
//! [`RUN`] characters of any form, so a secret cut short, or embedded in a longer value, is
//! still hidden. Every match is replaced with `[redacted]` (overlapping matches merge into
//! one). Secrets shorter than [`RUN`] characters are matched whole in each form.
//!
//! All patterns are matched in one pass (Aho-Corasick), built once per attempt from the
//! secrets that attempt used.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::Value;

use super::SecretValue;
use crate::template::percent_encode;

/// Characters of a secret that, found together, are taken to be the secret.
pub const RUN: usize = 8;
const MARKER: &str = "[redacted]";

/// Finds and hides the secrets an attempt used, in any of their forms.
pub struct Redactor {
    matcher: Option<AhoCorasick>,
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a SecretValue>) -> Self {
        let mut patterns: Vec<String> = Vec::new();
        for secret in secrets {
            let value = secret.expose();
            if value.is_empty() {
                continue;
            }
            for form in forms(value) {
                let chars: Vec<char> = form.chars().collect();
                if chars.len() <= RUN {
                    patterns.push(form);
                } else {
                    patterns.extend(chars.windows(RUN).map(|w| w.iter().collect::<String>()));
                }
            }
        }
        patterns.sort();
        patterns.dedup();
        let matcher = (!patterns.is_empty()).then(|| {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(&patterns)
                .expect("literal patterns build")
        });
        Self { matcher }
    }

    /// `text` with every form of every secret replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let Some(matcher) = &self.matcher else { return text.to_owned() };
        // Overlapping matches (a run of 8 matches at every offset of a longer run) are
        // merged into covered ranges, each replaced once.
        let mut found: Vec<(usize, usize)> =
            matcher.find_overlapping_iter(text).map(|m| (m.start(), m.end())).collect();
        found.sort_unstable();
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (start, end) in found {
            match ranges.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => ranges.push((start, end)),
            }
        }
        if ranges.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in ranges {
            // Matches of ASCII-case-insensitive literals begin and end on char boundaries
            // unless a pattern was cut inside a multi-byte char; widen to boundaries.
            let start = floor_boundary(text, start.max(at));
            let end = ceil_boundary(text, end);
            out.push_str(&text[at..start]);
            out.push_str(MARKER);
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    /// Redact every string and object key of `value` in place.
    pub fn redact_value(&self, value: &mut Value) {
        if self.matcher.is_none() {
            return;
        }
        match value {
            Value::String(s) => {
                let redacted = self.redact(s);
                if redacted != *s {
                    *s = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.redact_value(&mut item);
                    map.insert(self.redact(&key), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// The forms a secret may take in a peer's echo.
fn forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_owned()];
    // Inside a JSON string: quotes, backslashes, control characters escaped.
    let json = serde_json::to_string(value).expect("a string serializes");
    let escaped = json[1..json.len() - 1].to_owned();
    // Twice: a receiver that quotes a JSON request inside its own JSON answer.
    let json = serde_json::to_string(&escaped).expect("a string serializes");
    forms.push(json[1..json.len() - 1].to_owned());
    forms.push(escaped);
    // URL-encoded, as a path or query component and as a form field.
    forms.push(percent_encode(value));
    forms.push(url::form_urlencoded::byte_serialize(value.as_bytes()).collect());
    // base64 (standard and URL-safe) at each of the three byte offsets it may start at
    // inside a longer encoded value (`user:secret` in Basic auth): only the characters that
    // depend on the secret's bytes alone.
    for offset in 0..3usize {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(value.as_bytes());
        let start = (offset * 8).div_ceil(6);
        let end = (bytes.len() * 8) / 6;
        if end <= start {
            continue;
        }
        for encoded in [STANDARD_NO_PAD.encode(&bytes), URL_SAFE_NO_PAD.encode(&bytes)] {
            forms.push(encoded[start..end].to_owned());
        }
    }
    forms.retain(|f| !f.is_empty());
    forms.sort();
    forms.dedup();
    forms
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(secrets: &[&str]) -> Redactor {
        let values: Vec<SecretValue> = secrets.iter().map(|s| SecretValue::new((*s).to_owned())).collect();
        Redactor::new(&values)
    }

    #[test]
    fn hides_every_form_of_a_secret() {
        let secret = "sk-li\"ve\\ab c/12\n34";
        let r = redactor(&[secret]);
        let json = serde_json::to_string(secret).unwrap();
        let basic = STANDARD_NO_PAD.encode(format!("user:{secret}"));
        for echo in [
            secret.to_owned(),
            secret.to_uppercase(),
            json.clone(),
            percent_encode(secret),
            url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>(),
            URL_SAFE_NO_PAD.encode(secret),
            basic.clone(),
        ] {
            let out = r.redact(&format!("before {echo} after"));
            assert!(out.contains("[redacted]"), "{echo:?} -> {out}");
            for run in secret.as_bytes().windows(RUN) {
                let run = String::from_utf8_lossy(run);
                assert!(!out.to_lowercase().contains(&run.to_lowercase()), "{echo:?} left {run:?} in {out}");
            }
        }
        // The Basic header's stable middle is gone; only the user part's characters remain.
        let out = r.redact(&format!("Basic {basic}"));
        assert!(out.starts_with("Basic ") && out.contains("[redacted]"), "{out}");
    }

    #[test]
    fn a_run_of_eight_characters_is_enough_and_short_secrets_match_whole() {
        let r = redactor(&["0123456789abcdef", "pin42"]);
        assert_eq!(r.redact("cut: 3456789a!"), "cut: [redacted]!");
        assert_eq!(r.redact("short run 0123456 stays"), "short run 0123456 stays");
        assert_eq!(r.redact("PIN42 and pin4"), "[redacted] and pin4");
    }

    #[test]
    fn values_are_redacted_in_strings_and_keys() {
        let r = redactor(&["hunter2hunter2"]);
        let mut v = serde_json::json!({"body": "x hunter2hunter2 y", "HUNTER2HUNTER2": [1, "hunter2hunter2"]});
        r.redact_value(&mut v);
        let text = v.to_string();
        assert!(!text.to_lowercase().contains("hunter2h"), "{text}");
        assert_eq!(v["body"], "x [redacted] y");
    }

    #[test]
    fn no_secrets_is_a_no_op() {
        let r = redactor(&[]);
        assert_eq!(r.redact("anything"), "anything");
    }
}
