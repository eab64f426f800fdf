//! `business-days`: a schedule for CRON jobs that fire on working days only — at set times of
//! day, on chosen weekdays, skipping a holiday calendar. Market open and close on trading days,
//! say: `{"times": ["09:30", "16:00"], "holidays": ["2026-12-25", "2027-01-01"]}`.
//!
//! Spec (every key optional): `times`, local times of day as `HH:MM` or `HH:MM:SS` (default
//! `["09:00"]`); `weekdays`, 1 (Monday) to 7 (Sunday) (default 1-5); `holidays`, dates as
//! `YYYY-MM-DD` on which it does not fire. The host places the local times in the job's
//! timezone, with cron's rules for daylight-saving changes.

use taskexec_plugin_sdk::schedule::{export, LocalTime, Schedule};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Spec {
    times: Vec<String>,
    weekdays: Vec<u8>,
    holidays: Vec<String>,
}

impl Default for Spec {
    fn default() -> Self {
        Self { times: vec!["09:00".into()], weekdays: vec![1, 2, 3, 4, 5], holidays: Vec::new() }
    }
}

/// A spec with its times and holidays parsed: times as (h, m, s), sorted; holidays as (y, m, d).
#[derive(Debug)]
pub struct Calendar {
    times: Vec<(u8, u8, u8)>,
    weekdays: Vec<u8>,
    holidays: Vec<(i32, u8, u8)>,
}

fn number<T: std::str::FromStr>(text: &str, field: &str, whole: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{field}: `{whole}` is not a valid value"))
}

pub fn parse(spec_json: &str) -> Result<Calendar, String> {
    let spec: Spec = serde_json::from_str(spec_json).map_err(|e| format!("spec: {e}"))?;
    let mut times = Vec::new();
    for time in &spec.times {
        let parts: Vec<&str> = time.split(':').collect();
        let [h, m, s @ ..] = parts.as_slice() else { return Err(format!("times: `{time}` is not HH:MM")) };
        let (h, m) = (number::<u8>(h, "times", time)?, number::<u8>(m, "times", time)?);
        let s = match s {
            [] => 0,
            [s] => number::<u8>(s, "times", time)?,
            _ => return Err(format!("times: `{time}` is not HH:MM:SS")),
        };
        if h > 23 || m > 59 || s > 59 {
            return Err(format!("times: `{time}` is not a time of day"));
        }
        times.push((h, m, s));
    }
    if times.is_empty() {
        return Err("times: give at least one time of day".into());
    }
    times.sort_unstable();
    if spec.weekdays.is_empty() || spec.weekdays.iter().any(|d| !(1..=7).contains(d)) {
        return Err("weekdays: give days from 1 (Monday) to 7 (Sunday)".into());
    }
    let mut holidays = Vec::new();
    for date in &spec.holidays {
        let parts: Vec<&str> = date.split('-').collect();
        let [y, m, d] = parts.as_slice() else { return Err(format!("holidays: `{date}` is not YYYY-MM-DD")) };
        let day = (number(y, "holidays", date)?, number(m, "holidays", date)?, number(d, "holidays", date)?);
        if !(1..=12).contains(&day.1) || day.2 == 0 || day.2 > days_in_month(day.0, day.1) {
            return Err(format!("holidays: `{date}` is not a date"));
        }
        holidays.push(day);
    }
    Ok(Calendar { times, weekdays: spec.weekdays, holidays })
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The first time in `calendar` strictly after `after` (within ten years).
pub fn next(calendar: &Calendar, after: &LocalTime) -> Option<LocalTime> {
    let mut day = LocalTime { hour: 0, minute: 0, second: 0, ..*after };
    for _ in 0..3660 {
        let working =
            calendar.weekdays.contains(&day.weekday) && !calendar.holidays.contains(&(day.year, day.month, day.day));
        if working {
            let later = |&&(h, m, s): &&(u8, u8, u8)| {
                (day.year, day.month, day.day) != (after.year, after.month, after.day)
                    || (h, m, s) > (after.hour, after.minute, after.second)
            };
            if let Some(&(hour, minute, second)) = calendar.times.iter().find(later) {
                return Some(LocalTime { hour, minute, second, ..day });
            }
        }
        // The next day.
        day.weekday = day.weekday % 7 + 1;
        day.day += 1;
        if day.day > days_in_month(day.year, day.month) {
            day.day = 1;
            day.month += 1;
            if day.month > 12 {
                day.month = 1;
                day.year += 1;
            }
        }
    }
    None
}

struct BusinessDays;

impl Schedule for BusinessDays {
    fn check(spec_json: String) -> Result<(), String> {
        parse(&spec_json).map(drop)
    }

    fn next(spec_json: String, after: LocalTime) -> Result<Option<LocalTime>, String> {
        Ok(next(&parse(&spec_json)?, &after))
    }
}

export!(BusinessDays);

#[cfg(test)]
mod tests {
    use super::*;

    fn at(year: i32, month: u8, day: u8, hour: u8, minute: u8, weekday: u8) -> LocalTime {
        LocalTime { year, month, day, hour, minute, second: 0, weekday }
    }

    #[test]
    fn weekends_and_holidays_are_skipped_and_times_follow_in_order() {
        let calendar = parse(r#"{"times": ["16:00", "09:30"], "holidays": ["2026-12-25"]}"#).unwrap();
        // Thursday 2026-12-24 10:00: the close that day, then Friday is a holiday, so Monday.
        let thursday = at(2026, 12, 24, 10, 0, 4);
        let close = next(&calendar, &thursday).unwrap();
        assert_eq!(close, at(2026, 12, 24, 16, 0, 4));
        assert_eq!(next(&calendar, &close).unwrap(), at(2026, 12, 28, 9, 30, 1));
        // Across a year's end and a leap day.
        let calendar = parse(r#"{"weekdays": [1, 2, 3, 4, 5, 6, 7]}"#).unwrap();
        assert_eq!(next(&calendar, &at(2026, 12, 31, 9, 0, 4)).unwrap(), at(2027, 1, 1, 9, 0, 5));
        assert_eq!(next(&calendar, &at(2028, 2, 28, 9, 0, 1)).unwrap(), at(2028, 2, 29, 9, 0, 2));
    }

    #[test]
    fn a_bad_spec_names_the_field() {
        assert!(parse(r#"{"times": ["25:00"]}"#).unwrap_err().starts_with("times"));
        assert!(parse(r#"{"weekdays": [0]}"#).unwrap_err().starts_with("weekdays"));
        assert!(parse(r#"{"holidays": ["2026-02-30"]}"#).unwrap_err().starts_with("holidays"));
        assert!(parse(r#"{"when": 1}"#).unwrap_err().contains("when"));
    }
}
