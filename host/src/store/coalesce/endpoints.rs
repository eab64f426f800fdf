//! The endpoint reads of single creates that arrive together, made in one query
//! (`Store::endpoint_get_many`); each request gets the endpoint as it was read after it arrived,
//! as with a read of its own.
//!
//! Why: every `POST /jobs` reads its endpoint before it is checked and written. With the
//! writes of creates already shared (`JobWriter`), that read was the one statement each create
//! still made alone. `perf record -a` during 32 clients creating against an API-only process on
//! PostgreSQL put 53% of all CPU in PostgreSQL, spread thin over per-statement work (parse,
//! bind, TLS, wake-ups), not in any one row's. Reading together took creates from 1,402 to
//! 1,899 a second (medians of three interleaved runs; docs/benchmarks.md). An endpoint is not
//! cached instead: a create must see an endpoint updated or deleted a moment before through
//! another API process.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Mutex};

use crate::store::{Endpoint, Store, StoreError, StoreResult};

/// The most reads one query answers.
const MAX_PER_READ: usize = 256;
/// Queries under way at once: while one is out, the next gathers what arrives meanwhile.
const READERS: usize = 2;

/// An endpoint name waiting to be read, and where to hand back what the read found.
type Request = (String, oneshot::Sender<StoreResult<Option<Endpoint>>>);

/// The queue of endpoint reads, and the tasks that make them.
#[derive(Clone)]
pub struct EndpointReader {
    queue: mpsc::UnboundedSender<Request>,
}

impl EndpointReader {
    /// Start the reading tasks on `store`; they end when every handle is dropped.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        for _ in 0..READERS {
            tokio::spawn(read_all(store.clone(), waiting.clone()));
        }
        Self { queue }
    }

    /// The endpoint named `name` as it is now, as `Store::endpoint_get` reads it.
    pub async fn get(&self, name: &str) -> StoreResult<Option<Endpoint>> {
        let (answer, answered) = oneshot::channel();
        self.queue.send((name.to_owned(), answer)).map_err(|_| StoreError::Closed)?;
        answered.await.map_err(|_| StoreError::Closed)?
    }
}

/// One reader: takes what is waiting (the queue held only while taking), reads it, repeats.
async fn read_all(store: Arc<dyn Store>, waiting: Arc<Mutex<mpsc::UnboundedReceiver<Request>>>) {
    let mut batch = Vec::with_capacity(MAX_PER_READ);
    while waiting.lock().await.recv_many(&mut batch, MAX_PER_READ).await > 0 {
        let mut names: Vec<&str> = batch.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        match store.endpoint_get_many(&names).await {
            Ok(read) => {
                let by_name: HashMap<&str, &Endpoint> = read.iter().map(|e| (e.name.as_str(), e)).collect();
                for (name, answer) in batch.drain(..) {
                    let _ = answer.send(Ok(by_name.get(name.as_str()).map(|e| (*e).clone())));
                }
            }
            // Each request reads alone, as it would have without this, and is answered with its
            // own outcome; side by side, so that while the database is unreachable no request
            // waits out the others' timeouts.
            Err(_) => {
                for (name, answer) in batch.drain(..) {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let _ = answer.send(store.endpoint_get(&name).await);
                    });
                }
            }
        }
    }
}
