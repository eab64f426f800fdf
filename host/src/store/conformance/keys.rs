//! Concurrency keys' admissions (`store::Keys`): a key's executions in flight stay within its
//! bound whoever admits, in the order they fire; a retrying one holds its place, and a place
//! freed without an admission (a cancel) is found by the sweep.

use super::*;
use crate::store::KeyRef;

/// A keyed execution of a new IMMEDIATE job on `endpoint`, due `ago` seconds ago, with `input`.
async fn keyed(store: &dyn Store, endpoint: &str, key: &str, limit: i32, ago: i64) -> ExecutionId {
    let at = now() - chrono::Duration::seconds(ago);
    let j = JobWrite { input: json!({"k": key}), ..job(endpoint, Trigger::Immediate, None, at) };
    let e = ExecutionWrite {
        concurrency_key: Some(key.to_owned()),
        concurrency_limit: Some(limit),
        ..execution(&j, ExecutionStatus::Pending, at)
    };
    let id = e.execution_id.clone();
    store.job_insert(&j, Some(&e)).await.unwrap();
    id
}

async fn status_of(store: &dyn Store, id: &ExecutionId) -> ExecutionStatus {
    store.execution_get(id).await.unwrap().unwrap().status
}

pub async fn a_key_admits_up_to_its_bound_in_the_order_its_executions_fire(store: Arc<dyn Store>) {
    endpoint_with(&*store, "k", None).await;
    // `a` takes two at a time: the first two written are admitted as they are written, the
    // next two wait; `b` is a key of its own.
    let a3 = keyed(&*store, "k", "a", 2, 10).await;
    let a1 = keyed(&*store, "k", "a", 2, 30).await;
    let a2b = keyed(&*store, "k", "a", 2, 15).await;
    let a2 = keyed(&*store, "k", "a", 2, 20).await;
    let b1 = keyed(&*store, "k", "b", 2, 5).await;
    assert_eq!(status_of(&*store, &a3).await, ExecutionStatus::Queued);
    assert_eq!(status_of(&*store, &a1).await, ExecutionStatus::Queued);
    assert_eq!(status_of(&*store, &a2b).await, ExecutionStatus::Pending, "`a` has two in flight");
    assert_eq!(status_of(&*store, &a2).await, ExecutionStatus::Pending);
    assert_eq!(status_of(&*store, &b1).await, ExecutionStatus::Queued);
    assert!(store.keys_unjudged(now(), 10).await.unwrap().is_empty(), "every due one was judged");
    assert!(store.keys_starved(10).await.unwrap().is_empty());

    // An admission asked again admits nothing more.
    let a = KeyRef { endpoint: "k".into(), key: "a".into() };
    assert_eq!(store.keys_admit(std::slice::from_ref(&a), now()).await.unwrap(), 0);

    // A claim takes what was admitted; a success frees its place for the oldest waiting
    // (`run_at` order, not the writes').
    let claimed = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
    let mut ids: Vec<&ExecutionId> = claimed.iter().map(|e| &e.execution_id).collect();
    ids.sort();
    let mut admitted = vec![&a1, &a3, &b1];
    admitted.sort();
    assert_eq!(ids, admitted);
    let first = claimed.iter().find(|e| e.execution_id == a1).unwrap();
    assert_eq!(first.concurrency_key.as_deref(), Some("a"), "the claim carries the key");
    store.execution_finish_many(&[finish(first, ExecutionStatus::Success)]).await.unwrap();
    assert_eq!(status_of(&*store, &a2).await, ExecutionStatus::Queued, "the result's write admitted the oldest");
    assert_eq!(status_of(&*store, &a2b).await, ExecutionStatus::Pending);

    // A RETRYING execution keeps its place (`fifo`).
    let a3_run = claimed.iter().find(|e| e.execution_id == a3).unwrap();
    let retry = AttemptFinish {
        retry_at: Some(now() + chrono::Duration::seconds(60)),
        ..finish(a3_run, ExecutionStatus::Retrying)
    };
    store.execution_finish_many(&[retry]).await.unwrap();
    assert_eq!(status_of(&*store, &a2b).await, ExecutionStatus::Pending, "a3 holds its place while it waits");
    let a4 = keyed(&*store, "k", "a", 2, 1).await;
    assert_eq!(status_of(&*store, &a4).await, ExecutionStatus::Pending);
    // A cancel frees a place and admits nothing itself: the sweep finds the key.
    assert!(store.execution_cancel(&a2).await.unwrap());
    assert_eq!(store.keys_starved(10).await.unwrap(), std::slice::from_ref(&a));
    assert_eq!(store.keys_admit(std::slice::from_ref(&a), now()).await.unwrap(), 1);
    assert_eq!(status_of(&*store, &a2b).await, ExecutionStatus::Queued, "the oldest waiting");
    assert_eq!(status_of(&*store, &a4).await, ExecutionStatus::Pending);

    // Unordered: a retry goes back to PENDING at its time, and leaves its place.
    let claimed = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
    let a2b_run = claimed.iter().find(|e| e.execution_id == a2b).expect("a2b claimed");
    let later = now() + chrono::Duration::seconds(60);
    let back = AttemptFinish { retry_at: Some(later), ..finish(a2b_run, ExecutionStatus::Pending) };
    store.execution_finish_many(&[back]).await.unwrap();
    assert_eq!(status_of(&*store, &a4).await, ExecutionStatus::Queued, "a2b's place went to a4");
    let waits = store.execution_get(&a2b).await.unwrap().unwrap();
    assert_eq!((waits.status, waits.completed_at), (ExecutionStatus::Pending, None));
    // It is judged again at its time, not before.
    assert!(store.keys_unjudged(now(), 10).await.unwrap().is_empty());
    assert_eq!(store.keys_unjudged(later, 10).await.unwrap(), [a]);
}

pub async fn concurrent_admissions_of_one_key_never_pass_its_bound(store: Arc<dyn Store>) {
    endpoint_with(&*store, "race", None).await;
    // Forty executions of one key with room for three, written waiting (as a promoter that
    // has not looked yet would find them), then admitted by eight admissions at once.
    let at = now() - chrono::Duration::seconds(1);
    for _ in 0..40 {
        let j = JobWrite { input: json!({"k": "x"}), ..job("race", Trigger::Immediate, None, at) };
        let e = ExecutionWrite {
            concurrency_key: Some("x".into()),
            concurrency_limit: Some(3),
            run_at: at + chrono::Duration::hours(1),
            ..execution(&j, ExecutionStatus::Pending, at)
        };
        store.job_insert(&j, Some(&e)).await.unwrap();
    }
    let key = KeyRef { endpoint: "race".into(), key: "x".into() };
    let until = now() + chrono::Duration::hours(2);
    let admissions = (0..8).map(|_| {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move { store.keys_admit(&[key], until).await.unwrap() })
    });
    let admitted: u64 = futures_util::future::join_all(admissions).await.into_iter().map(Result::unwrap).sum();
    assert_eq!(admitted, 3, "three places, whoever asked");
    let claimed = store
        .execution_claim(&ClaimParams { due_by: until, ..claim("w", 100, Duration::from_secs(60)) })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
}
