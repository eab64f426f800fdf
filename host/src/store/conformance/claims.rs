//! Claims: exclusive under concurrency, only due work, ahead of time when promoted ahead, and
//! slots shared fairly between endpoints.

use super::*;

pub async fn claims_are_exclusive_under_concurrency(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    endpoint(&*store, "b").await;
    let mut all: HashSet<ExecutionId> = queued(&*store, "a", 120).await.into_iter().collect();
    all.extend(queued(&*store, "b", 80).await);
    let claimers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let got =
                        store.execution_claim(&claim(&format!("w{w}"), 16, Duration::from_secs(60))).await.unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got);
                }
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for c in claimers {
        claimed.extend(c.await.unwrap());
    }
    let ids: HashSet<ExecutionId> = claimed.iter().map(|e| e.execution_id.clone()).collect();
    assert_eq!(ids.len(), claimed.len(), "an execution was claimed twice");
    assert_eq!(ids, all, "every execution was claimed");
    for e in &claimed {
        assert_eq!((e.status, e.attempt_count), (ExecutionStatus::Running, 1), "{e:?}");
        assert!(e.worker_id.is_some() && e.lease_expires_at.is_some(), "{e:?}");
    }
}

pub async fn claims_take_only_due_work_and_lease_it(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    let due = queued(&*store, "a", 3).await;
    let later = now() + chrono::Duration::seconds(3600);
    let j = job("a", Trigger::Delayed, None, now());
    store.job_insert(&j, Some(&execution(&j, ExecutionStatus::Pending, later))).await.unwrap();
    let before = now();
    let got = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
    let got_ids: HashSet<_> = got.iter().map(|e| e.execution_id.clone()).collect();
    assert_eq!(got_ids, due.into_iter().collect(), "only the QUEUED, due executions");
    for e in &got {
        let lease = e.lease_expires_at.unwrap();
        assert!(lease > before + chrono::Duration::seconds(50), "leased for the claim's 60 s: {lease}");
        assert_eq!(e.worker_id.as_deref(), Some("w"));
        assert_eq!(e.trace_parent.as_deref(), Some(TRACE_PARENT), "the job's trace context reaches the worker");
    }
    assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
    // A limit is a limit.
    queued(&*store, "a", 5).await;
    assert_eq!(store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap().len(), 2);
}

/// The promoter releases an execution with no overlap policy a little before its time; a
/// claim takes it only when its `due_by` reaches that time, and records it as starting
/// then (the worker starts it at it). A tick with an overlap policy waits for its time,
/// when the policy is judged.
pub async fn executions_promoted_ahead_are_claimed_ahead_to_start_at_their_time(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    let at = now();
    let soon = at + chrono::Duration::milliseconds(200);
    let j = job("a", Trigger::Delayed, None, at);
    let plain = execution(&j, ExecutionStatus::Pending, soon);
    store.job_insert(&j, Some(&plain)).await.unwrap();
    let k = job("a", Trigger::Cron, None, at);
    let mut held = execution(&k, ExecutionStatus::Pending, soon);
    held.overlap_policy = Some(crate::domain::OverlapPolicy::Skip);
    store.job_insert(&k, Some(&held)).await.unwrap();

    let promoted = store.execution_promote_due(at, chrono::Duration::milliseconds(250)).await.unwrap();
    assert_eq!(promoted, [soon], "the plain one only, and its time");
    let queued = store.execution_get(&plain.execution_id).await.unwrap().unwrap();
    assert_eq!((queued.status, queued.run_at), (ExecutionStatus::Queued, soon));
    assert_eq!(store.execution_get(&held.execution_id).await.unwrap().unwrap().status, ExecutionStatus::Pending);
    let early = at + chrono::Duration::milliseconds(199);
    let not_yet = ClaimParams { now: early, due_by: early, ..claim("w", 10, Duration::from_secs(30)) };
    assert!(store.execution_claim(&not_yet).await.unwrap().is_empty(), "a claim takes nothing due after due_by");
    // A worker claims it ahead, to start it at its time: so the claim records its start.
    let ahead = ClaimParams { now: early, due_by: early + READY_AHEAD, ..claim("w", 10, Duration::from_secs(30)) };
    let claimed = store.execution_claim(&ahead).await.unwrap();
    assert_eq!(claimed.iter().map(|e| &e.execution_id).collect::<Vec<_>>(), [&plain.execution_id]);
    assert_eq!((claimed[0].started_at, claimed[0].claimed_at), (Some(soon), Some(soon)), "it starts at its time");
    // At its time the overlap policy is judged, and the tick released.
    assert_eq!(store.execution_promote_due(soon, chrono::Duration::zero()).await.unwrap(), [soon]);
}

/// A worker whose slots all hold one endpoint's backlog gives its next free slot to
/// another endpoint's due work, however much older the backlog is.
pub async fn a_free_slot_goes_to_the_endpoint_the_worker_holds_fewest_of(store: Arc<dyn Store>) {
    endpoint(&*store, "backlog").await;
    endpoint(&*store, "tick").await;
    queued(&*store, "backlog", 10).await;
    let tick = queued(&*store, "tick", 1).await;
    let shares = EndpointShares { held: vec![("backlog".to_owned(), 50)], ceiling: 100 };
    let one = ClaimParams { shares, ..claim("w", 1, Duration::from_secs(30)) };
    let claimed = store.execution_claim(&one).await.unwrap();
    assert_eq!(claimed.iter().map(|e| &e.execution_id).collect::<Vec<_>>(), [&tick[0]]);
    // Holding neither, a claim of two takes one of each (round-robin).
    queued(&*store, "tick", 1).await;
    let two = store.execution_claim(&claim("w", 2, Duration::from_secs(30))).await.unwrap();
    let mut endpoints: Vec<&str> = two.iter().map(|e| e.endpoint.as_str()).collect();
    endpoints.sort();
    assert_eq!(endpoints, ["backlog", "tick"]);
}
