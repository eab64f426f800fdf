//! The worker's part of the store: claims, leases and fenced results. Where the two databases
//! differ most (PostgreSQL claims in one statement and writes a batch as arrays; SQLite, one
//! writer in process, in a few statements each), so each backend implements [`Claims`] in its
//! own module (`postgres/claim.rs`, `postgres.rs`, `sqlite.rs`), over the helpers here that
//! both share: what a claim spends of a rate-limited endpoint's bucket, and what a batch of
//! results tells the endpoints' circuit breakers.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::endpoints::COLUMNS as ENDPOINT_COLUMNS;
use super::sql::statements::claims as sql;
use super::sql::{dialect, query, InTx, SqlBackend};
use super::StoreResult;
use super::{
    now, AttemptFinish, CircuitChange, ClaimParams, DbTime, Endpoint, Execution, FinishedAttempts, LeaseExtend,
};

/// The worker's part of the store.
#[async_trait]
pub trait Claims: Send + Sync {
    /// Claim due executions: each becomes RUNNING with its attempt count raised and a lease
    /// of `claim.lease` from the database's clock, and no other worker can claim it meanwhile.
    /// Executions are taken endpoint by endpoint within `claim.shares`: each endpoint with due
    /// work gets an equal part of the claim (up to its allowance), earliest due first within
    /// an endpoint; when the claim has fewer slots than that makes, they go first to the
    /// endpoints this worker holds fewest of (a backlog's endpoint, holding every slot, does
    /// not keep another's due work waiting).
    async fn execution_claim(&self, claim: &ClaimParams) -> StoreResult<Vec<Execution>>;
    /// Extend the leases of executions a worker still holds (never shortening one); how many
    /// were extended (an execution reclaimed or cancelled meanwhile is not).
    async fn execution_lease_extend(&self, leases: &[LeaseExtend]) -> StoreResult<u64>;
    /// The routine renewal of everything a worker holds: [`Claims::execution_lease_extend`],
    /// passing over an execution whose row another statement holds this instant (its result
    /// being written), which a lease no longer needs.
    async fn execution_lease_renew(&self, leases: &[LeaseExtend]) -> StoreResult<u64> {
        self.execution_lease_extend(leases).await
    }
    /// Write attempts' outcomes in one transaction, each fenced: an execution is written only
    /// if it is still RUNNING under the attempt number that finished, and only then are the
    /// attempt and its logs recorded. Per finish, whether it was written (false: the fence
    /// held, because the execution was reclaimed or cancelled meanwhile), and the circuit
    /// breakers' transitions the written outcomes made, for the caller to record.
    async fn execution_finish_many(&self, finishes: &[AttemptFinish]) -> StoreResult<FinishedAttempts>;
}

/// [`Claims::execution_finish_many`] on either backend: the fence and the attempts' inserts
/// are the backend's (`SqlBackend::results_fence`, `results_record`), the order and what comes
/// between them are the same for both.
pub(super) async fn finish_many(store: &impl SqlBackend, finishes: &[AttemptFinish]) -> StoreResult<FinishedAttempts> {
    let mut tx = store.bookkeeping().await?;
    let written = store.results_fence(&mut tx, finishes).await?;
    let winners: Vec<&AttemptFinish> = finishes.iter().zip(&written).filter(|(_, w)| **w).map(|(f, _)| f).collect();
    // In the same transaction: a claim never sees an attempt finished without its endpoint's
    // circuit breaker having heard of it.
    let circuit_changes = circuit_record(&mut tx, &winners).await?;
    store.results_record(&mut tx, &winners).await?;
    tx.commit().await?;
    // The places these outcomes freed go to their keys' next executions, after the commit
    // (a key's admission counts what is committed); were this process to stop in between,
    // the promoter's sweep admits them.
    let freed = super::KeyRef::each_once(winners.iter().filter_map(|f| f.key_freed()));
    if !freed.is_empty() {
        // The results are written whatever this does: a failure is left to the sweep.
        if let Err(error) = super::Keys::keys_admit(store, &freed, super::now() + super::READY_AHEAD).await {
            tracing::warn!(%error, "Admitting the next executions of freed concurrency keys failed; the promoter's sweep will.");
        }
    }
    Ok(FinishedAttempts { written, circuit_changes })
}

/// Take from each rate-limited endpoint's bucket (`tokens` as of `now`) what this claim took
/// of it.
pub(super) async fn spend_tokens(
    tx: &mut impl InTx,
    buckets: &[(String, f64)],
    claimed: &[Execution],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    for (name, tokens) in buckets {
        let taken = claimed.iter().filter(|e| e.endpoint == *name).count();
        if taken > 0 {
            query(sql::ENDPOINT_TOKENS_SPEND)
                .bind(name)
                .bind(tokens - taken as f64)
                .bind(DbTime(now))
                .execute(tx.on())
                .await?;
        }
    }
    Ok(())
}

/// Tell the circuit breakers of the winners' endpoints what their outcomes say about the
/// receivers (`flow::circuit`), in the finishing transaction: a claim never sees an attempt
/// finished without its endpoint's breaker having heard of it. Rows are read (and on
/// PostgreSQL locked, in name order like the claims) only for an endpoint with a failure in
/// the batch or a breaker that is not closed, so a batch of healthy deliveries costs one
/// indexed read. The breakers' transitions are returned, for the caller to record once the
/// transaction has committed.
async fn circuit_record(tx: &mut impl InTx, winners: &[&AttemptFinish]) -> StoreResult<Vec<CircuitChange>> {
    let mut changes = Vec::new();
    let mut names: Vec<&str> = winners.iter().filter(|f| f.health.is_some()).map(|f| f.endpoint.as_str()).collect();
    if names.is_empty() {
        return Ok(changes);
    }
    names.sort_unstable();
    names.dedup();
    let failing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            winners.iter().any(|f| f.endpoint == *n && f.health.as_ref().is_some_and(crate::flow::Health::is_failure))
        })
        .collect();
    let places =
        |from: usize, count: usize| (from..from + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
    let failing_names = if failing.is_empty() { "NULL".to_owned() } else { places(names.len() + 1, failing.len()) };
    let text = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints
         WHERE name IN ({})
           AND (circuit_failures > 0 OR circuit_open_until IS NOT NULL OR name IN ({failing_names}))
         ORDER BY name{}",
        places(1, names.len()),
        dialect(tx.on().backend(), "lock_exclusive"),
    );
    let read = names.iter().chain(&failing).fold(query(&text), |read, name| read.bind(*name));
    let endpoints: Vec<Endpoint> = read.fetch_all(tx.on()).await?;
    let at = now();
    for endpoint in endpoints {
        let policy = endpoint.circuit_policy();
        let mut state = endpoint.circuit();
        let before = state.clone();
        for health in winners.iter().filter(|f| f.endpoint == endpoint.name).filter_map(|f| f.health.as_ref()) {
            for transition in state.record(&policy, health, at) {
                changes.push(CircuitChange { endpoint: endpoint.name.clone(), transition, failures: state.failures });
            }
        }
        if state == before {
            continue;
        }
        query(sql::ENDPOINT_CIRCUIT_WRITE)
            .bind(&endpoint.name)
            .bind(state.failures)
            .bind(state.failing_since.map(DbTime))
            .bind(state.open_until.map(DbTime))
            .bind(state.cooldown_ms)
            .bind(&state.last_error)
            .bind(state.disabled_at.map(DbTime))
            .execute(tx.on())
            .await?;
    }
    Ok(changes)
}
