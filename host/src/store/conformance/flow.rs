//! Flow control as the claim applies it: an open circuit passed by, a half-open one letting
//! one probe through, a disabled endpoint passed by and announced once.

use super::*;

/// Claims until one returns something (a circuit's cool-down of a millisecond passing),
/// for at most five seconds.
async fn claim_when_due(store: &dyn Store) -> Vec<Execution> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
        if !got.is_empty() || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub async fn an_open_circuit_is_passed_by_and_a_half_open_one_lets_one_probe_through(store: Arc<dyn Store>) {
    use crate::flow::{circuit::Phase, CircuitPolicy};
    let policy = |cooldown_ms| CircuitPolicy {
        failure_threshold: 2,
        cooldown_ms,
        max_cooldown_ms: cooldown_ms,
        auto_disable_after_sec: None,
    };
    // Two failures open `shut` for ten minutes: its executions wait, whatever is due.
    endpoint_with(&*store, "shut", Some(policy(600_000))).await;
    queued(&*store, "shut", 4).await;
    let first = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
    assert_eq!(first.len(), 2);
    let finishes: Vec<_> = first.iter().map(|e| delivered(e, false)).collect();
    let finished = store.execution_finish_many(&finishes).await.unwrap();
    assert_eq!(finished.written, vec![true, true]);
    // The transition comes back with the write, for the worker's metric and log line.
    assert_eq!(changes(&finished), [("shut".to_owned(), "open", 2)]);
    let shut = store.endpoint_get("shut").await.unwrap().unwrap();
    assert_eq!(shut.circuit().phase(now()), Phase::Open, "{shut:?}");
    assert_eq!(shut.circuit_failures, 2);
    assert_eq!(shut.circuit_last_error.as_deref(), Some("503 from the receiver"));
    assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
    assert_eq!(store.endpoint_circuits_not_closed().await.unwrap().len(), 1);

    // `probe` cools down in a millisecond: then one execution at a time goes out.
    endpoint_with(&*store, "probe", Some(policy(1))).await;
    queued(&*store, "probe", 3).await;
    let opening = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
    assert_eq!(opening.len(), 2);
    let finishes: Vec<_> = opening.iter().map(|e| delivered(e, false)).collect();
    store.execution_finish_many(&finishes).await.unwrap();
    let probe = claim_when_due(&*store).await;
    assert_eq!(probe.len(), 1, "half-open: one probe, however much is due");
    assert_eq!(probe[0].endpoint, "probe", "`shut` is still open");
    assert!(
        store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty(),
        "no second probe while the first runs"
    );
    // A failed probe opens it again; a good one closes it, and the rest flows.
    store.execution_finish_many(&[delivered(&probe[0], false)]).await.unwrap();
    assert_eq!(store.endpoint_get("probe").await.unwrap().unwrap().circuit_failures, 3);
    let probe = claim_when_due(&*store).await;
    assert_eq!(probe.len(), 1);
    let finished = store.execution_finish_many(&[delivered(&probe[0], true)]).await.unwrap();
    assert_eq!(changes(&finished), [("probe".to_owned(), "closed", 0)]);
    let closed = store.endpoint_get("probe").await.unwrap().unwrap();
    assert_eq!((closed.circuit().phase(now()), closed.circuit_failures), (Phase::Closed, 0), "{closed:?}");
    let rest = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
    assert_eq!(rest.len(), 2, "the other two, at once");
    assert!(rest.iter().all(|e| e.endpoint == "probe"));
}

pub async fn a_disabled_endpoint_is_passed_by_announced_once_and_enabled(store: Arc<dyn Store>) {
    use crate::flow::CircuitPolicy;
    // Failing for "0 s" disables it at the first failure.
    let policy = CircuitPolicy { auto_disable_after_sec: Some(0), ..CircuitPolicy::default() };
    endpoint_with(&*store, "doomed", Some(policy)).await;
    queued(&*store, "doomed", 2).await;
    let got = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    store.execution_finish_many(&[delivered(&got[0], false)]).await.unwrap();
    let doomed = store.endpoint_get("doomed").await.unwrap().unwrap();
    let disabled_at = doomed.disabled_at.expect("disabled");
    assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
    let unannounced = store.endpoints_disabled_unannounced(10).await.unwrap();
    assert_eq!(unannounced.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["doomed"]);
    store.endpoint_disabled_announced("doomed", disabled_at).await.unwrap();
    assert!(store.endpoints_disabled_unannounced(10).await.unwrap().is_empty(), "announced once");
    let enabled = store.endpoint_enable("doomed").await.unwrap().unwrap();
    assert_eq!((enabled.disabled_at, enabled.circuit_failures), (None, 0));
    assert_eq!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().len(), 2);
    assert!(store.endpoint_enable("nope").await.unwrap().is_none());
}

/// A finish's circuit transitions: (endpoint, label, failures after).
fn changes(finished: &FinishedAttempts) -> Vec<(String, &'static str, i32)> {
    finished.circuit_changes.iter().map(|c| (c.endpoint.clone(), c.transition.to_label(), c.failures)).collect()
}
