//! A small time-to-live cache for what the pipeline reads on every attempt (endpoints, configs,
//! decrypted secrets), so a busy worker does not ask the database for them each time.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TtlCache<K, V> {
    ttl: Duration,
    // A std Mutex: held only to read or insert, never across the loader's await.
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// The cached value, or `load()`'s (cached when it is `Some`). Two callers missing at once
    /// may both load; the value is the same, and the second insert wins harmlessly.
    pub async fn get_or_load<E, F, Fut>(&self, key: &K, load: F) -> Result<Option<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<V>, E>>,
    {
        if let Some((value, at)) = self.entries.lock().expect("cache lock").get(key) {
            if at.elapsed() < self.ttl {
                return Ok(Some(value.clone()));
            }
        }
        let loaded = load().await?;
        if let Some(value) = &loaded {
            self.entries.lock().expect("cache lock").insert(key.clone(), (value.clone(), Instant::now()));
        }
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_from_cache_until_the_ttl_expires() {
        let cache = TtlCache::new(Duration::from_millis(50));
        let mut loads = 0;
        for _ in 0..3 {
            let v: Option<u32> = cache
                .get_or_load(&"k", || {
                    loads += 1;
                    async { Ok::<_, ()>(Some(7)) }
                })
                .await
                .unwrap();
            assert_eq!(v, Some(7));
        }
        assert_eq!(loads, 1);
        tokio::time::sleep(Duration::from_millis(60)).await;
        cache.get_or_load(&"k", || async { Ok::<_, ()>(Some(8)) }).await.unwrap();
        assert_eq!(cache.get_or_load(&"k", || async { Ok::<_, ()>(None) }).await.unwrap(), Some(8));
        // Misses are not cached.
        assert_eq!(cache.get_or_load(&"other", || async { Ok::<_, ()>(None) }).await.unwrap(), None::<u32>);
    }
}
