//! Results and leases: finishes fenced by attempt and reclaim, leases that only grow, and
//! batches of results written with their attempts and log lines.

use super::*;

pub async fn finishes_are_fenced_by_attempt_and_reclaim(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    queued(&*store, "a", 1).await;
    // A lease of 1 ms: expired by the time the reclaimer looks.
    let first = store.execution_claim(&claim("lost", 1, Duration::from_millis(1))).await.unwrap().remove(0);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.execution_reclaim_expired(now()).await.unwrap(), 1);
    let reclaimed = store.execution_get(&first.execution_id).await.unwrap().unwrap();
    assert_eq!(reclaimed.status, ExecutionStatus::Retrying);
    let attempts = store
        .attempt_list(&first.execution_id, &PageRequest { after: None, limit: 10, ..Default::default() })
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].error.as_ref().unwrap()["type"], "WORKER_LOST");
    // The lost worker's late result is fenced out.
    assert_eq!(
        store.execution_finish_many(&[finish(&first, ExecutionStatus::Success)]).await.unwrap().written,
        [false]
    );
    // The next claim is attempt 2; its result is written once, and never again.
    let second = store.execution_claim(&claim("w2", 1, Duration::from_secs(60))).await.unwrap().remove(0);
    assert_eq!(second.attempt_count, 2);
    assert_eq!(
        store.execution_finish_many(&[finish(&second, ExecutionStatus::Success)]).await.unwrap().written,
        [true]
    );
    assert_eq!(
        store.execution_finish_many(&[finish(&second, ExecutionStatus::Failed)]).await.unwrap().written,
        [false]
    );
    let done = store.execution_get(&first.execution_id).await.unwrap().unwrap();
    assert_eq!((done.status, done.attempt_count), (ExecutionStatus::Success, 2));
    assert_eq!(store.execution_reclaim_expired(now()).await.unwrap(), 0, "a finished execution is not reclaimed");
}

/// An abort asked of a RUNNING execution (`cancel?running=abort`) is found by the worker that
/// holds it, and by no other; its outcome is a CANCELLED attempt; and one whose worker is lost
/// is cancelled by the reclaimer, not retried.
pub async fn aborts_are_found_by_their_worker_and_a_lost_worker_s_cancelled(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    queued(&*store, "a", 2).await;
    let held = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
    assert!(store.executions_aborting("w").await.unwrap().is_empty());
    assert!(store.execution_abort_request(&held[0].execution_id).await.unwrap());
    assert!(store.execution_abort_request(&held[0].execution_id).await.unwrap(), "asked again: still RUNNING");
    assert_eq!(store.executions_aborting("w").await.unwrap(), [held[0].execution_id.clone()]);
    assert!(store.executions_aborting("other").await.unwrap().is_empty());
    let asked = store.execution_get(&held[0].execution_id).await.unwrap().unwrap().abort_requested_at;
    assert!(asked.is_some());
    let written = store.execution_finish_many(&[finish(&held[0], ExecutionStatus::Cancelled)]).await.unwrap().written;
    assert_eq!(written, [true]);
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    let attempts = store.attempt_list(&held[0].execution_id, &page).await.unwrap();
    assert_eq!(attempts.iter().map(|a| a.status).collect::<Vec<_>>(), [AttemptStatus::Cancelled]);
    assert!(store.executions_aborting("w").await.unwrap().is_empty(), "no longer RUNNING");
    assert!(!store.execution_abort_request(&held[0].execution_id).await.unwrap(), "finished: nothing to abort");

    // The worker holding the other is lost: its lease runs out, and the reclaimer cancels it.
    queued(&*store, "a", 1).await;
    let lost = store.execution_claim(&claim("lost", 1, Duration::from_millis(1))).await.unwrap().remove(0);
    assert!(store.execution_abort_request(&lost.execution_id).await.unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.execution_get(&lost.execution_id).await.unwrap().unwrap().status == ExecutionStatus::Running {
        assert!(std::time::Instant::now() < deadline, "the lease of 1 ms never expired");
        store.execution_reclaim_expired(now()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reclaimed = store.execution_get(&lost.execution_id).await.unwrap().unwrap();
    assert_eq!(reclaimed.status, ExecutionStatus::Cancelled, "an abort asked for is not retried");
    assert!(reclaimed.completed_at.is_some());
}

pub async fn leases_extend_and_never_shorten(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    queued(&*store, "a", 1).await;
    let held = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap().remove(0);
    let lease = held.lease_expires_at.unwrap();
    let shorter = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 1, for_ms: 1_000 };
    store.execution_lease_extend(&[shorter]).await.unwrap();
    let after = store.execution_get(&held.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
    assert!(after >= lease, "a lease was shortened: {lease} -> {after}");
    let longer = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 1, for_ms: 600_000 };
    assert_eq!(store.execution_lease_extend(&[longer]).await.unwrap(), 1);
    let after = store.execution_get(&held.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
    assert!(after > lease + chrono::Duration::seconds(300), "{lease} -> {after}");
    let stale = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 2, for_ms: 600_000 };
    assert_eq!(store.execution_lease_extend(&[stale]).await.unwrap(), 0, "another attempt's lease is not extended");
}

/// The worker's `Leases::ensure`, asked by many attempts at once, writes them together and
/// still answers each for itself: one held under a stale attempt number is refused while
/// the others are extended.
pub async fn leases_asked_for_together_are_extended_each_as_its_own(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    queued(&*store, "a", 6).await;
    let claimed = store.execution_claim(&claim("w", 6, Duration::from_secs(30))).await.unwrap();
    assert_eq!(claimed.len(), 6);
    let leases = crate::worker::Leases::new(store.clone(), Duration::from_secs(30));
    let asks: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, execution)| {
            let leases = leases.clone();
            let id = execution.execution_id.to_string();
            // The last one is asked for under an attempt this worker does not hold.
            let attempt = if i == 5 { 2 } else { 1 };
            tokio::spawn(async move { leases.ensure(&id, attempt, Duration::from_secs(600)).await.unwrap() })
        })
        .collect();
    let mut answers = Vec::new();
    for ask in asks {
        answers.push(ask.await.unwrap());
    }
    assert_eq!(answers, [true, true, true, true, true, false]);
    for (i, execution) in claimed.iter().enumerate() {
        let lease = store.execution_get(&execution.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
        let extended = lease > now() + chrono::Duration::seconds(300);
        assert_eq!(extended, i < 5, "execution {i}: lease until {lease}");
    }
}

/// A worker renews everything it holds while extensions and result batches for some of the
/// same executions are written, each listing them in its own order. Every statement must
/// succeed: a deadlock aborts one, and an aborted extension failed its attempt.
pub async fn overlapping_lease_and_result_writes_never_deadlock(store: Arc<dyn Store>) {
    use rand::seq::SliceRandom;
    endpoint(&*store, "a").await;
    queued(&*store, "a", 60).await;
    let claimed = store.execution_claim(&claim("w", 60, Duration::from_secs(30))).await.unwrap();
    assert_eq!(claimed.len(), 60);
    let leases: Vec<LeaseExtend> = claimed
        .iter()
        .map(|e| LeaseExtend { execution_id: e.execution_id.clone(), attempt: e.attempt_count, for_ms: 30_000 })
        .collect();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (store, mut leases, mut claimed) = (store.clone(), leases.clone(), claimed.clone());
            tokio::spawn(async move {
                for round in 0..15 {
                    leases.shuffle(&mut rand::thread_rng());
                    store.execution_lease_extend(&leases).await.unwrap_or_else(|e| panic!("extension: {e:?}"));
                    // One writer finishes half the executions midway, in its own order.
                    if writer == 0 && round == 7 {
                        claimed.shuffle(&mut rand::thread_rng());
                        let finishes: Vec<_> =
                            claimed[..30].iter().map(|e| finish(e, ExecutionStatus::Success)).collect();
                        let written = store
                            .execution_finish_many(&finishes)
                            .await
                            .unwrap_or_else(|e| panic!("results: {e:?}"))
                            .written;
                        assert_eq!(written, vec![true; 30]);
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let running = store.execution_lease_extend(&leases).await.unwrap();
    assert_eq!(running, 30, "the executions not finished are still held");
}

pub async fn batch_results_write_winners_with_their_attempts_and_logs(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    queued(&*store, "a", 3).await;
    let held = store.execution_claim(&claim("w", 3, Duration::from_secs(60))).await.unwrap();
    assert_eq!(held.len(), 3);
    // The middle one is already finished (as by a worker whose lease was taken over):
    // the batch's write of it is fenced out, and its batch-mates are written.
    assert_eq!(
        store.execution_finish_many(&[finish(&held[1], ExecutionStatus::Failed)]).await.unwrap().written,
        [true]
    );
    let mut retrying = finish(&held[2], ExecutionStatus::Retrying);
    retrying.retry_at = Some(now() + chrono::Duration::seconds(30));
    let written = store
        .execution_finish_many(&[
            finish(&held[0], ExecutionStatus::Success),
            finish(&held[1], ExecutionStatus::Success),
            retrying,
        ])
        .await
        .unwrap()
        .written;
    assert_eq!(written, [true, false, true]);
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    for (e, status, attempts) in [
        (&held[0], ExecutionStatus::Success, 1),
        (&held[1], ExecutionStatus::Failed, 1),
        (&held[2], ExecutionStatus::Retrying, 1),
    ] {
        let now_is = store.execution_get(&e.execution_id).await.unwrap().unwrap();
        assert_eq!(now_is.status, status, "{}", e.execution_id);
        assert_eq!(store.attempt_list(&e.execution_id, &page).await.unwrap().len(), attempts);
        assert_eq!(store.log_list(&e.execution_id, &page).await.unwrap().len(), 1, "one log line per written attempt");
    }
    let retried = store.execution_get(&held[2].execution_id).await.unwrap().unwrap();
    assert!(retried.run_at > now() + chrono::Duration::seconds(20), "the retry waits for its time");
    assert!(store.execution_claim(&claim("w", 3, Duration::from_secs(60))).await.unwrap().is_empty());
}
