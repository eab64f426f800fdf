//! Cron schedules in IANA timezones.
//!
//! Accepted forms: the standard 5 fields (`minute hour day-of-month month day-of-week`), a
//! 6-field form with a leading seconds field for second-granular schedules, and the aliases
//! `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`. Day-of-week
//! numbers are standard cron's: 0 and 7 are Sunday, 1 is Monday; names (`MON`) work too.
//!
//! The `cron` crate parses; it numbers days 1=Sunday…7=Saturday, so numeric day-of-week
//! fields are translated. It also mishandles DST when asked to iterate in a timezone (in the
//! repeated hour it fires twice and out of order), so ticks are computed here: the schedule
//! is iterated in wall-clock time and each local time is placed in the zone —
//! - a local time that does not exist (the spring-forward gap) is skipped;
//! - a local time that happens twice (the fall-back hour) fires once, at its first occurrence.

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone)]
pub struct CronSchedule {
    schedule: cron::Schedule,
    timezone: Tz,
}

/// Why an expression or timezone was refused, for a 422 the user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl CronSchedule {
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let timezone: Tz = timezone.parse().map_err(|_| {
            ScheduleError(format!("`{timezone}` is not an IANA timezone name (like `Asia/Kolkata` or `UTC`)"))
        })?;
        let normalized = normalize(expression)?;
        let schedule = cron::Schedule::from_str(&normalized).map_err(|e| {
            let reason = e.to_string().lines().last().unwrap_or_default().trim().to_owned();
            ScheduleError(format!("`{expression}` is not a valid cron expression: {reason}"))
        })?;
        Ok(Self { schedule, timezone })
    }

    /// The first tick strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Start an hour and a bit before `after` in wall-clock time: in a fall-back hour the
        // local clock reads earlier than it did, and a tick there must not be missed.
        let local_start = after.with_timezone(&self.timezone).naive_local() - Duration::minutes(61);
        let wall_clock = Utc.from_utc_datetime(&local_start);
        self.schedule.after(&wall_clock).take(1_000_000).find_map(|candidate| {
            let at = place(self.timezone, candidate.naive_utc())?;
            (at > after).then_some(at)
        })
    }
}

/// A wall-clock time in `timezone`: None in a gap, the first occurrence when repeated. The one
/// placement rule for every schedule, cron or plugin (`ticks`).
pub fn place(timezone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match timezone.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => None,
    }
}

/// Bring an expression to the `cron` crate's 6-or-7-field form.
fn normalize(expression: &str) -> Result<String, ScheduleError> {
    let trimmed = expression.trim();
    let expanded = match trimmed.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        other if other.starts_with('@') => {
            return Err(ScheduleError(format!(
                "`{trimmed}` is not a known alias (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)"
            )))
        }
        _ => trimmed,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    let (seconds, rest) = match fields.len() {
        5 => ("0", &fields[..]),
        6 => (fields[0], &fields[1..]),
        n => {
            return Err(ScheduleError(format!(
                "`{trimmed}` has {n} fields; use 5 (minute hour day-of-month month day-of-week) or 6 (a leading seconds field)"
            )))
        }
    };
    // Ranges checked here, with the names and bounds of standard cron: the `cron` crate's own
    // messages are off by one ("Minutes must be less than 59" for 60).
    if fields.len() == 6 {
        check_range("second", seconds, 0, 59)?;
    }
    check_range("minute", rest[0], 0, 59)?;
    check_range("hour", rest[1], 0, 23)?;
    check_range("day-of-month", rest[2], 1, 31)?;
    check_range("month", rest[3], 1, 12)?;
    let day_of_week = translate_day_of_week(rest[4])?;
    Ok(format!("{seconds} {} {} {} {} {day_of_week}", rest[0], rest[1], rest[2], rest[3]))
}

/// Every number of a field (in lists and ranges; not step sizes) within `min..=max`.
fn check_range(name: &str, field: &str, min: u32, max: u32) -> Result<(), ScheduleError> {
    for part in field.split(',') {
        let range = part.split_once('/').map_or(part, |(range, _step)| range);
        for number in range.split('-').filter_map(|n| n.parse::<u32>().ok()) {
            if number < min || number > max {
                return Err(ScheduleError(format!("{name} {number} is out of range: use {min}-{max}")));
            }
        }
    }
    Ok(())
}

/// Standard day-of-week (0-7, 0 and 7 Sunday) to the `cron` crate's (1-7, 1 Sunday). Numeric
/// parts are expanded into an explicit list; names and `*`/`?` pass through.
fn translate_day_of_week(field: &str) -> Result<String, ScheduleError> {
    if field == "*" || field == "?" || field.chars().any(|c| c.is_ascii_alphabetic()) {
        return Ok(field.to_owned());
    }
    let bad = || ScheduleError(format!("day-of-week `{field}` is not valid: use 0-7 (0 and 7 are Sunday) or MON-SUN"));
    let number = |s: &str| s.parse::<u32>().ok().filter(|n| *n <= 7).ok_or_else(bad);
    let mut days = std::collections::BTreeSet::new();
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(bad)?),
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (0, 6),
            r => match r.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None if step > 1 => (number(r)?, 6),
                None => (number(r)?, number(r)?),
            },
        };
        if from > to {
            return Err(bad());
        }
        days.extend((from..=to).step_by(step as usize).map(|d| d % 7 + 1));
    }
    Ok(days.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_fields_name_the_field_and_its_bounds() {
        let err = CronSchedule::parse("60 * * * *", "UTC").unwrap_err();
        assert_eq!(err.0, "minute 60 is out of range: use 0-59");
        assert!(CronSchedule::parse("59 23 31 12 *", "UTC").is_ok(), "the top of every range is valid");
        assert_eq!(CronSchedule::parse("0 24 * * *", "UTC").unwrap_err().0, "hour 24 is out of range: use 0-23");
        assert_eq!(CronSchedule::parse("0 0 0 * *", "UTC").unwrap_err().0, "day-of-month 0 is out of range: use 1-31");
        assert_eq!(CronSchedule::parse("0 0 1 1-13 *", "UTC").unwrap_err().0, "month 13 is out of range: use 1-12");
        assert_eq!(CronSchedule::parse("61 0 * * * *", "UTC").unwrap_err().0, "second 61 is out of range: use 0-59");
        assert!(CronSchedule::parse("*/15 * * * *", "UTC").is_ok(), "a step is not a value");
    }

    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ticks(expr: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
        let s = CronSchedule::parse(expr, tz).unwrap();
        let mut at = utc(from);
        (0..n)
            .map(|_| {
                at = s.next_after(at).unwrap();
                at.with_timezone(&s.timezone).to_rfc3339()
            })
            .collect()
    }

    #[test]
    fn standard_five_fields_in_a_timezone() {
        // Every Monday 09:00 in Kolkata, from Sunday 2026-03-15.
        assert_eq!(
            ticks("0 9 * * MON", "Asia/Kolkata", "2026-03-15T00:00:00Z", 2),
            ["2026-03-16T09:00:00+05:30", "2026-03-23T09:00:00+05:30"]
        );
        // Standard numbering: 1 is Monday, 0 and 7 are Sunday, ranges and steps work.
        assert_eq!(ticks("0 9 * * 1", "UTC", "2026-03-14T00:00:00Z", 1), ["2026-03-16T09:00:00+00:00"]);
        assert_eq!(ticks("0 9 * * 0", "UTC", "2026-03-14T00:00:00Z", 1), ["2026-03-15T09:00:00+00:00"]);
        assert_eq!(ticks("0 9 * * 7", "UTC", "2026-03-14T00:00:00Z", 1), ["2026-03-15T09:00:00+00:00"]);
        assert_eq!(
            ticks("0 9 * * 1-5", "UTC", "2026-03-13T10:00:00Z", 3),
            ["2026-03-16T09:00:00+00:00", "2026-03-17T09:00:00+00:00", "2026-03-18T09:00:00+00:00"]
        );
        assert_eq!(ticks("0 9 * * 5-7", "UTC", "2026-03-16T10:00:00Z", 3)[2], "2026-03-22T09:00:00+00:00");
    }

    #[test]
    fn seconds_field_and_aliases() {
        assert_eq!(
            ticks("*/15 * * * * *", "UTC", "2026-01-01T00:00:00Z", 3),
            ["2026-01-01T00:00:15+00:00", "2026-01-01T00:00:30+00:00", "2026-01-01T00:00:45+00:00"]
        );
        assert_eq!(ticks("@hourly", "UTC", "2026-01-01T00:10:00Z", 1), ["2026-01-01T01:00:00+00:00"]);
        assert_eq!(ticks("@daily", "Europe/Paris", "2026-01-01T00:10:00Z", 1), ["2026-01-02T00:00:00+01:00"]);
        assert_eq!(ticks("@weekly", "UTC", "2026-03-14T00:00:00Z", 1), ["2026-03-15T00:00:00+00:00"]);
        assert_eq!(ticks("@yearly", "UTC", "2026-03-14T00:00:00Z", 1), ["2027-01-01T00:00:00+00:00"]);
    }

    #[test]
    fn bad_expressions_and_zones_explain_themselves() {
        for (expr, tz, words) in [
            ("* * * *", "UTC", "4 fields"),
            ("61 * * * *", "UTC", "minute 61 is out of range"),
            ("0 9 * * MONX", "UTC", "not a valid cron expression"),
            ("0 9 * * 8", "UTC", "day-of-week"),
            ("@fortnightly", "UTC", "not a known alias"),
            ("0 9 * * *", "Mars/Olympus", "IANA"),
        ] {
            let err = CronSchedule::parse(expr, tz).unwrap_err().0;
            assert!(err.contains(words), "{expr}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn a_local_time_that_does_not_exist_is_skipped() {
        // 2026-03-08 02:30 does not exist in New York (clocks jump 02:00 -> 03:00).
        assert_eq!(
            ticks("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
            ["2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
        );
    }

    #[test]
    fn a_repeated_local_time_fires_once() {
        // 2026-11-01 01:30 happens twice in New York (EDT, then EST): one tick, the first.
        assert_eq!(
            ticks("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
        );
        // Every 20 minutes through the repeated hour: each wall-clock time once, in order.
        let all = ticks("0 */20 * * * *", "America/New_York", "2026-11-01T04:30:00Z", 6);
        assert_eq!(
            all,
            [
                "2026-11-01T00:40:00-04:00",
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:20:00-04:00",
                "2026-11-01T01:40:00-04:00",
                "2026-11-01T02:00:00-05:00",
                "2026-11-01T02:20:00-05:00",
            ]
        );
    }
}
