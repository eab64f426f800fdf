//! Quotas: what one tenant may hold and ask for, so that no tenant takes the service from the
//! others. Each limit is the tenant's own when the operator set one (`PATCH /tenants/{tenant}`),
//! else the server-wide default (`TE_QUOTA_…`), else none. The limits themselves are
//! `domain::quotas`; this is how the API holds and checks them.
//!
//! The API holds every tenant's quotas in memory ([`QuotaBook`]), reloaded with the API keys
//! (every 250 ms) and replaced at once on the process that changed them. Checks that count
//! what a tenant holds (endpoints, active cron jobs) ask the database at the moment of the
//! create; the unfinished executions, which a create would otherwise count on every request,
//! are counted at most once a second per tenant ([`UNFINISHED_RECOUNT`]), so a burst may pass
//! the limit by what one second of creates adds. The create rate is a token bucket per tenant
//! in each API process: with N API processes a tenant may create up to N times its rate.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

pub use crate::domain::quotas::{within, OverQuota, Quota, Quotas};
use crate::store::{Store, StoreError};

/// How long a tenant's count of unfinished executions is used before it is counted again.
pub const UNFINISHED_RECOUNT: Duration = Duration::from_secs(1);

/// Every tenant's quotas, as the API checks them.
pub struct QuotaBook {
    defaults: Quotas,
    /// Each tenant's own, as stored: replaced whole at each reload.
    set: RwLock<Arc<HashMap<String, Quotas>>>,
    /// A token bucket per tenant with a create rate, and the rate it was made for.
    buckets: Mutex<HashMap<String, (u32, governor::DefaultDirectRateLimiter)>>,
    /// Each tenant's unfinished executions as last counted, and when.
    unfinished: Mutex<HashMap<String, (Instant, u64)>>,
}

impl QuotaBook {
    pub fn new(defaults: Quotas) -> Self {
        Self { defaults, set: RwLock::default(), buckets: Mutex::default(), unfinished: Mutex::default() }
    }

    /// The limits that hold for `tenant`.
    pub fn of(&self, tenant: &str) -> Quotas {
        let set = self.set.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        set.get(tenant).map_or_else(|| self.defaults.clone(), |own| own.or(&self.defaults))
    }

    /// Hold exactly these tenants' own quotas (a reload).
    pub fn replace(&self, all: HashMap<String, Quotas>) {
        *self.set.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(all);
    }

    /// `tenant`'s own quotas, just changed here.
    pub fn set(&self, tenant: &str, quotas: Quotas) {
        let mut set = self.set.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut all = HashMap::clone(&set);
        all.insert(tenant.to_owned(), quotas);
        *set = Arc::new(all);
    }

    /// Take `jobs` creates from `tenant`'s bucket, or say how long until they fit.
    pub fn take_creates(&self, tenant: &str, jobs: u32) -> Result<(), OverQuota> {
        let Some(rate) = self.of(tenant).creates_per_second else { return Ok(()) };
        let over = |retry_after: Option<Duration>| OverQuota {
            quota: Quota::CreatesPerSecond,
            tenant: tenant.to_owned(),
            limit: u64::from(rate),
            wanted: u64::from(jobs),
            retry_after,
        };
        let (Some(per_second), Some(jobs)) = (NonZeroU32::new(rate), NonZeroU32::new(jobs)) else { return Ok(()) };
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A bucket made for another rate (the quota changed) is made again.
        if buckets.get(tenant).is_none_or(|(made_for, _)| *made_for != rate) {
            let fresh = governor::RateLimiter::direct(governor::Quota::per_second(per_second));
            buckets.insert(tenant.to_owned(), (rate, fresh));
        }
        match buckets[tenant].1.check_n(jobs) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                use governor::clock::{Clock, DefaultClock};
                Err(over(Some(not_until.wait_time_from(DefaultClock::default().now()))))
            }
            // More at once than the bucket ever holds: a smaller batch, not waiting, helps.
            Err(_) => Err(over(None)),
        }
    }

    /// `tenant`'s unfinished executions as last counted within [`UNFINISHED_RECOUNT`], if any.
    pub fn unfinished_known(&self, tenant: &str) -> Option<u64> {
        let counted = self.unfinished.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        counted.get(tenant).filter(|(at, _)| at.elapsed() < UNFINISHED_RECOUNT).map(|(_, n)| *n)
    }

    /// `tenant`'s unfinished executions, counted now.
    pub fn unfinished_counted(&self, tenant: &str, count: u64) {
        let mut counted = self.unfinished.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        counted.insert(tenant.to_owned(), (Instant::now(), count));
    }

    /// Creates by this process add to the count until it is counted again.
    pub fn unfinished_added(&self, tenant: &str, added: u64) {
        let mut counted = self.unfinished.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, n)) = counted.get_mut(tenant) {
            *n += added;
        }
    }
}

/// Why a request was refused by a quota check: past a quota, or the count failed.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0}")]
    Over(OverQuota),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<OverQuota> for Refused {
    fn from(over: OverQuota) -> Self {
        Self::Over(over)
    }
}

/// The checks that count what a tenant holds.
impl QuotaBook {
    /// May `tenant` have the endpoint stored as `name`: one it has (an idempotent repeat of its
    /// create), or one more?
    pub async fn endpoint_added(&self, store: &dyn Store, tenant: &str, name: &str) -> Result<(), Refused> {
        let Some(limit) = self.of(tenant).endpoints else { return Ok(()) };
        if store.endpoint_get(name).await?.is_some() {
            return Ok(());
        }
        let held = u64::try_from(store.endpoint_count(tenant).await?).unwrap_or(0);
        Ok(within(Quota::Endpoints, tenant, Some(u64::from(limit)), held + 1)?)
    }

    /// May `tenant` have `added` more active CRON jobs?
    pub async fn cron_jobs_added(&self, store: &dyn Store, tenant: &str, added: u64) -> Result<(), Refused> {
        let Some(limit) = self.of(tenant).active_cron_jobs else { return Ok(()) };
        let held = u64::try_from(store.cron_active_count(tenant).await?).unwrap_or(0);
        Ok(within(Quota::ActiveCronJobs, tenant, Some(u64::from(limit)), held + added)?)
    }

    /// May `tenant` have `added` more unfinished executions? Counted at most once every
    /// [`UNFINISHED_RECOUNT`]; in between, this process's own creates are added to the count.
    pub async fn executions_added(&self, store: &dyn Store, tenant: &str, added: u64) -> Result<(), Refused> {
        let Some(limit) = self.of(tenant).unfinished_executions else { return Ok(()) };
        let held = match self.unfinished_known(tenant) {
            Some(held) => held,
            None => {
                let counts = store.execution_counts(Some(tenant)).await?;
                let held = u64::try_from(counts.iter().map(|(_, n)| n).sum::<i64>()).unwrap_or(0);
                self.unfinished_counted(tenant, held);
                held
            }
        };
        within(Quota::UnfinishedExecutions, tenant, Some(limit), held + added)?;
        self.unfinished_added(tenant, added);
        Ok(())
    }

    /// Is one job's `input` within `tenant`'s `max_input_bytes`?
    pub fn input_fits(&self, tenant: &str, input: &serde_json::Value) -> Result<(), OverQuota> {
        let Some(limit) = self.of(tenant).max_input_bytes else { return Ok(()) };
        let bytes = serde_json::to_vec(input).map_or(0, |bytes| bytes.len());
        within(Quota::MaxInputBytes, tenant, Some(u64::from(limit)), u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

impl QuotaBook {
    /// Reload every tenant's own quotas every `every` until `stop` (with the API keys: a
    /// change made through one process holds on every other within that time). A failed
    /// reload keeps the last one.
    pub async fn keep_loaded(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match store.tenants_with_quotas().await {
                Ok(tenants) => {
                    failing = false;
                    self.replace(tenants.into_iter().filter_map(|t| Some((t.name, t.quotas?))).collect());
                }
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(error = %crate::error_chain::describe(&error), "Could not reload the tenants' quotas; keeping the last ones read.");
                }
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_s_own_limit_wins_over_the_default() {
        let book = QuotaBook::new(Quotas { endpoints: Some(10), max_input_bytes: Some(1000), ..Quotas::default() });
        book.set("acme", Quotas { endpoints: Some(2), ..Quotas::default() });
        assert_eq!(book.of("acme").endpoints, Some(2));
        assert_eq!(book.of("acme").max_input_bytes, Some(1000), "the default where it sets none");
        assert_eq!(book.of("beta").endpoints, Some(10));
        book.replace(HashMap::new());
        assert_eq!(book.of("acme").endpoints, Some(10), "a reload without it");
    }

    #[test]
    fn creates_past_the_rate_wait_and_a_batch_past_the_burst_is_refused() {
        let book = QuotaBook::new(Quotas::default());
        assert!(book.take_creates("acme", 1_000_000).is_ok(), "no rate, no limit");
        book.set("acme", Quotas { creates_per_second: Some(10), ..Quotas::default() });
        assert!(book.take_creates("acme", 10).is_ok(), "the burst");
        let over = book.take_creates("acme", 1).unwrap_err();
        assert_eq!((over.quota, over.limit), (Quota::CreatesPerSecond, 10));
        assert!(over.retry_after.is_some_and(|wait| wait <= Duration::from_millis(100)), "{over:?}");
        let too_big = book.take_creates("beta-has-none", 11);
        assert!(too_big.is_ok());
        let refused = book.take_creates("acme", 11).unwrap_err();
        assert_eq!(refused.retry_after, None, "more than the bucket holds: waiting does not help");
        assert!(refused.to_string().contains("creates_per_second"), "{refused}");
    }
}
