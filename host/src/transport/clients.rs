//! Connected clients shared between deliveries (Kafka producers, Redis connection managers),
//! kept in a bounded cache.
//!
//! A cache holds at most [`ClientCache::MAX_CLIENTS`] clients; one unused for
//! [`ClientCache::IDLE`] is dropped, and none is kept past [`ClientCache::MAX_AGE`], so the
//! egress check made when a client connects is made again at least that often. Connecting
//! holds no lock over the cache: deliveries to other targets go on while one target is slow
//! to answer, and concurrent first deliveries to one target share a single connect (moka's
//! `try_get_with` coalesces them; if the caller doing the connect gives up, a waiting one
//! takes over).

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::contract::Failure;

pub struct ClientCache<K, V> {
    clients: moka::future::Cache<K, V>,
}

impl<K, V> ClientCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Clients kept at once; the least recently used goes first past it.
    pub const MAX_CLIENTS: u64 = 256;
    /// A client unused this long is dropped (its connections close).
    pub const IDLE: Duration = Duration::from_secs(300);
    /// A client is connected (and its addresses checked) again after this long.
    pub const MAX_AGE: Duration = Duration::from_secs(3600);

    pub fn new() -> Self {
        Self::with_limits(Self::MAX_CLIENTS, Self::IDLE, Self::MAX_AGE)
    }

    pub fn with_limits(max_clients: u64, idle: Duration, max_age: Duration) -> Self {
        let clients =
            moka::future::Cache::builder().max_capacity(max_clients).time_to_idle(idle).time_to_live(max_age).build();
        Self { clients }
    }

    /// The client held for `key`, if there is one: the hot path, which builds no owned key and
    /// no connect future.
    pub async fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.clients.get(key).await
    }

    /// The client for `key`, connected by `connect` if there is none.
    pub async fn get_or_connect<F>(&self, key: K, connect: F) -> Result<V, Failure>
    where
        F: std::future::Future<Output = Result<V, Failure>>,
    {
        self.clients.try_get_with(key, connect).await.map_err(|failure: Arc<Failure>| (*failure).clone())
    }

    /// Clients held now (after pending evictions are applied).
    pub async fn client_count(&self) -> u64 {
        self.clients.run_pending_tasks().await;
        self.clients.entry_count()
    }
}

impl<K, V> Default for ClientCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_slow_connect_blocks_no_other_target_and_is_shared_by_its_own() {
        let cache: Arc<ClientCache<&'static str, usize>> = Arc::new(ClientCache::new());
        let connects = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let slow = {
            let (cache, connects) = (cache.clone(), connects.clone());
            tokio::spawn(async move {
                cache
                    .get_or_connect("slow", async move {
                        connects.fetch_add(1, Ordering::SeqCst);
                        let _ = released.await;
                        Ok(1)
                    })
                    .await
            })
        };
        // Wait until the slow connect is under way.
        while connects.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let second_caller = {
            let (cache, connects) = (cache.clone(), connects.clone());
            tokio::spawn(async move {
                cache
                    .get_or_connect("slow", async move {
                        connects.fetch_add(1, Ordering::SeqCst);
                        Ok(2)
                    })
                    .await
            })
        };
        // Another target connects while the slow one still hangs.
        let other = tokio::time::timeout(Duration::from_secs(5), cache.get_or_connect("fast", async { Ok(3) }))
            .await
            .expect("another target is not held up by a slow connect");
        assert_eq!(other.unwrap(), 3);
        release.send(()).unwrap();
        assert_eq!(slow.await.unwrap().unwrap(), 1);
        assert_eq!(second_caller.await.unwrap().unwrap(), 1, "the second caller shares the first connect");
        assert_eq!(connects.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_connect_is_not_cached_and_the_cache_is_bounded() {
        let cache: ClientCache<u32, u32> =
            ClientCache::with_limits(8, Duration::from_secs(60), Duration::from_secs(60));
        let failed = cache.get_or_connect(1, async { Err(Failure::connection("refused")) }).await.unwrap_err();
        assert_eq!(failed.message, "refused");
        assert_eq!(cache.get_or_connect(1, async { Ok(10) }).await.unwrap(), 10, "the next delivery connects again");
        for key in 0..100 {
            cache.get_or_connect(key, async move { Ok(key) }).await.unwrap();
        }
        assert!(cache.client_count().await <= 8, "at most 8 clients are kept");
    }

    #[tokio::test]
    async fn an_idle_client_is_dropped() {
        let cache: ClientCache<u32, u32> =
            ClientCache::with_limits(8, Duration::from_millis(50), Duration::from_secs(60));
        cache.get_or_connect(1, async { Ok(1) }).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while cache.client_count().await > 0 {
            assert!(std::time::Instant::now() < deadline, "the idle client was never dropped");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let connects = AtomicUsize::new(0);
        cache
            .get_or_connect(1, async {
                connects.fetch_add(1, Ordering::SeqCst);
                Ok(1)
            })
            .await
            .unwrap();
        assert_eq!(connects.load(Ordering::SeqCst), 1, "an evicted client is connected again");
    }
}
