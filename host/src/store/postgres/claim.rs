//! The PostgreSQL claim (`Claims::execution_claim`): the endpoints whose limits it must hold
//! locked first, their rate-limit buckets, and the one statement (`statements::claim_sql`).

use sqlx::Postgres;

use super::statements::claim_sql;
use super::PgStore;
use crate::flow::{RateLimit, StoredBucket};
use crate::store::claims::spend_tokens;
use crate::store::sql::statements::postgres::CLAIM_LIMITED_ENDPOINTS;
use crate::store::{DbTime, Execution, StoreResult};

/// An endpoint with max_concurrency, a rate limit or a circuit not closed, as a claim locks it: its name, rate
/// limit (per second, burst) and bucket (tokens as of a time).
type Limited = (String, Option<f64>, Option<i32>, Option<f64>, Option<chrono::DateTime<chrono::Utc>>);

/// A lease length as whole milliseconds, for `now() + $n * INTERVAL '1 millisecond'`.
fn lease_ms(lease: std::time::Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2)
}

/// The tokens in each rate-limited endpoint's bucket at `now`.
fn buckets(limited: &[Limited], now: chrono::DateTime<chrono::Utc>) -> Vec<(String, f64)> {
    limited
        .iter()
        .filter_map(|(name, per_second, burst, tokens, at)| {
            let bucket = StoredBucket { per_second: *per_second, burst: *burst, tokens: *tokens, at: *at };
            Some((name.clone(), bucket.tokens_now(now)?))
        })
        .collect()
}

impl PgStore {
    /// One claim (`Claims::execution_claim`).
    pub(super) async fn claim_once(&self, claim: &crate::store::ClaimParams) -> StoreResult<Vec<Execution>> {
        let sql = claim_sql();
        let (names, held): (Vec<&str>, Vec<i32>) = claim.shares.held.iter().map(|(e, h)| (e.as_str(), *h)).unzip();
        // Claims for endpoints with max_concurrency, a rate limit or a circuit that is not
        // closed take turns: each locks those endpoints' rows first, so the claim after it (a
        // new snapshot under READ COMMITTED) counts what the one before took and finds the
        // tokens it left, and the limits (and a half-open circuit's single probe) hold across
        // worker processes. Attempt results update a circuit under the same row lock
        // (`circuit_record`). With no such endpoint this locks nothing, and claims run side by
        // side as before.
        let mut tx = self.begin_claim().await?;
        let limited: Vec<Limited> = sqlx::query_as(CLAIM_LIMITED_ENDPOINTS).fetch_all(&mut *tx).await?;
        let buckets = buckets(&limited, claim.now);
        let (cap_names, caps): (Vec<&str>, Vec<i32>) =
            buckets.iter().map(|(name, tokens)| (name.as_str(), RateLimit::allowance(*tokens))).unzip();
        let claimed = sqlx::query_as::<Postgres, Execution>(&sql)
            .bind(&claim.worker_id)
            .bind(DbTime(claim.now))
            .bind(claim.limit)
            .bind(lease_ms(claim.lease))
            .bind(claim.shares.ceiling)
            .bind(&names)
            .bind(&held)
            .bind(&cap_names)
            .bind(&caps)
            .bind(DbTime(claim.due_by))
            .fetch_all(&mut *tx)
            .await?;
        spend_tokens(&mut tx, &buckets, &claimed, claim.now).await?;
        tx.commit().await?;
        Ok(claimed)
    }
}
