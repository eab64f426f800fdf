//! Timestamps as both backends store them.
//!
//! PostgreSQL keeps TIMESTAMPTZ at microsecond precision. SQLite has no time type, so it keeps
//! TEXT in one fixed-width UTC format; fixed width is what makes text order equal time order,
//! which the pagination and (later) the scheduler's `run_at <= now` comparisons rely on. sqlx's
//! own SQLite encoding of `DateTime` varies the number of fraction digits, hence [`DbTime`].

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo};
use sqlx::sqlite::{SqliteArgumentValue, SqliteTypeInfo};
use sqlx::{Encode, Postgres, Sqlite, Type};

/// The current time at the precision both backends keep, so a value read back equals the one
/// written (and a pagination cursor built from it matches exactly).
pub fn now() -> DateTime<Utc> {
    stored(Utc::now())
}

/// `t` as the store keeps it: whole microseconds.
pub fn stored(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// A timestamp bound as a query parameter.
#[derive(Debug, Clone, Copy)]
pub struct DbTime(pub DateTime<Utc>);

impl DbTime {
    const SQLITE_FORMAT: &'static str = "%Y-%m-%dT%H:%M:%S%.6fZ";

    pub fn sqlite_text(&self) -> String {
        self.0.format(Self::SQLITE_FORMAT).to_string()
    }
}

impl Type<Postgres> for DbTime {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for DbTime {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl Type<Sqlite> for DbTime {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for DbTime {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <String as Encode<'q, Sqlite>>::encode(self.sqlite_text(), buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn sqlite_text_is_fixed_width_so_text_order_is_time_order() {
        let whole = DbTime(Utc.with_ymd_and_hms(2026, 3, 15, 10, 0, 0).unwrap());
        let later = DbTime(whole.0 + chrono::Duration::microseconds(1));
        assert_eq!(whole.sqlite_text(), "2026-03-15T10:00:00.000000Z");
        assert_eq!(later.sqlite_text(), "2026-03-15T10:00:00.000001Z");
        assert!(whole.sqlite_text() < later.sqlite_text());
    }

    #[test]
    fn now_round_trips_through_sqlite_text() {
        let t = now();
        let parsed = DateTime::parse_from_rfc3339(&DbTime(t).sqlite_text()).unwrap();
        assert_eq!(parsed.with_timezone(&Utc), t);
    }
}
