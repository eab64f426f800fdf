//! Durations as people write them in settings and requests: `90s`, `15m`, `2h`, `7d`, or a bare
//! number of seconds.

/// Whole seconds of `text` (`90s`, `15m`, `2h`, `7d`, `120`); None when it is not one of those
/// forms or does not fit.
pub fn parse_seconds(text: &str) -> Option<i64> {
    let text = text.trim();
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    digits.parse::<i64>().ok()?.checked_mul(scale)
}

/// Seconds in the largest unit that divides them: `900` is `15m`, `0` is `0s`.
pub fn format_seconds(seconds: i64) -> String {
    for (unit, scale) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if seconds != 0 && seconds % scale == 0 {
            return format!("{}{unit}", seconds / scale);
        }
    }
    format!("{seconds}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print_in_their_largest_unit() {
        for (text, seconds, shown) in
            [("90", 90, "90s"), ("90s", 90, "90s"), ("15m", 900, "15m"), ("2h", 7200, "2h"), ("7d", 604_800, "7d")]
        {
            assert_eq!(parse_seconds(text), Some(seconds), "{text}");
            assert_eq!(format_seconds(seconds), shown);
        }
        for bad in ["", "-5s", "5w", "1.5h", "d", "99999999999999999999"] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
    }
}
