//! PostgreSQL's history partitions: made ahead, dropped whole past the retention, made while
//! rows are written without refusing any, and history written before a layout change read the
//! same after it.

use super::*;

/// Attempts and log lines written before 0063 (which dropped their foreign keys and re-keyed
/// log lines by execution and time) read back the same after it, in order, and still go with
/// their execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_written_before_the_attempt_keys_changed_reads_the_same_after() {
    for (store, guard) in new_stores(Some((63, 63))).await {
        let backend = store.backend();
        later_columns(guard.as_ref(), true).await;
        endpoint(&*store, "a").await;
        queued(&*store, "a", 2).await;
        let held = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
        let mut first = finish(&held[0], ExecutionStatus::Success);
        let at = now();
        // The last two at one instant (as lines written before the worker spaced them a
        // microsecond apart could be): between those, the order is by id, before and after.
        first.logs = ["one", "two", "three"]
            .iter()
            .enumerate()
            .map(|(i, message)| LogWrite {
                level: "INFO",
                message: (*message).to_owned(),
                logged_at: at + chrono::Duration::milliseconds(i.min(1) as i64),
            })
            .collect();
        let written =
            store.execution_finish_many(&[first, finish(&held[1], ExecutionStatus::Failed)]).await.unwrap().written;
        assert_eq!(written, [true, true], "{backend:?}");
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        let before = store.log_list(&held[0].execution_id, &page).await.unwrap();
        later_columns(guard.as_ref(), false).await;
        store.migrate().await.unwrap();
        let after = store.log_list(&held[0].execution_id, &page).await.unwrap();
        let lines = |logs: &[ExecutionLog]| {
            logs.iter().map(|l| (l.log_id.to_string(), l.message.clone(), l.logged_at)).collect::<Vec<_>>()
        };
        assert_eq!(lines(&after), lines(&before), "{backend:?}");
        assert_eq!(after.len(), 3, "{backend:?}");
        assert_eq!(after[0].message, "one", "{backend:?}: the earliest first");
        // Paged one line at a time, the same three in the same order.
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = PageRequest { after: cursor.clone(), limit: 1, ..Default::default() };
            let got = store.log_list(&held[0].execution_id, &page).await.unwrap();
            let Some(last) = got.last() else { break };
            cursor = Some(PageKey { created_at: last.logged_at, key: last.log_id.to_string() });
            paged.extend(got);
        }
        assert_eq!(lines(&paged), lines(&after), "{backend:?}");
        for e in &held {
            let attempts = store.attempt_list(&e.execution_id, &page).await.unwrap();
            assert_eq!(attempts.len(), 1, "{backend:?}");
        }
        // Deleting the job takes its attempts and lines along: no key enforces it any more.
        assert!(matches!(store.job_delete(&held[0].job_id).await.unwrap(), Deleted::Deleted), "{backend:?}");
        assert!(store.attempt_list(&held[0].execution_id, &page).await.unwrap().is_empty(), "{backend:?}");
        assert!(store.log_list(&held[0].execution_id, &page).await.unwrap().is_empty(), "{backend:?}");
    }
}

/// PostgreSQL keeps the queue apart from its history, and history in time partitions that
/// retention drops whole (`store::partitions`); PostgreSQL only, since SQLite (and
/// CockroachDB) keep one table and purge by row, which the other retention checks cover.
/// Finished executions, their attempts and log lines in a span wholly older than the cutoff
/// go with their partitions; what has not run yet stays, whatever its age; what a converted
/// database held before, and what falls outside the partitions, the purge deletes by row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_partitions_are_made_ahead_and_dropped_whole_past_the_retention() {
    let (store, _guard) = stores().await.into_iter().find(|(s, _)| s.backend() == Backend::Postgres).unwrap();
    let window = Duration::from_secs(60);
    // Partitions over an hour ago, as a scheduler then would have made them.
    let then = {
        use chrono::DurationRound;
        (now() - chrono::Duration::hours(1)).duration_trunc(chrono::Duration::minutes(1)).unwrap()
            + chrono::Duration::seconds(20)
    };
    let made = store.history_upkeep(then, window, None, LONG_BUDGET).await.unwrap();
    assert_eq!(made.made.len(), 3 * 3, "three spans for each of the three tables: {:?}", made.made);
    assert!(store.history_upkeep(then, window, None, LONG_BUDGET).await.unwrap().made.is_empty(), "made once");
    let span = crate::store::partitions::Partition::parse("executions_done", &made.made[0]).unwrap();
    let inside = span.from.unwrap() + chrono::Duration::seconds(1);

    endpoint(&*store, "a").await;
    // Two executions made inside the first span: one finished, one still waiting.
    let (mut ids, mut jobs) = (Vec::new(), Vec::new());
    for status in [ExecutionStatus::Queued, ExecutionStatus::Pending] {
        let j = job("a", Trigger::Immediate, None, inside);
        jobs.push(j.job_id.clone());
        let e = execution(
            &j,
            status,
            if status == ExecutionStatus::Queued { inside } else { now() + chrono::Duration::days(1) },
        );
        ids.push(e.execution_id.clone());
        store.job_insert(&j, Some(&e)).await.unwrap();
    }
    let held = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    assert_eq!(held[0].execution_id, ids[0]);
    let mut done = finish(&held[0], ExecutionStatus::Success);
    (done.started_at, done.completed_at) = (inside, inside);
    done.logs[0].logged_at = inside;
    assert_eq!(store.execution_finish_many(&[done]).await.unwrap().written, [true]);
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    assert_eq!(store.attempt_list(&ids[0], &page).await.unwrap().len(), 1);
    assert_eq!(store.log_list(&ids[0], &page).await.unwrap().len(), 1);
    // One that failed inside the span and was retried since: its job stays with the retry.
    let retried_job = job("a", Trigger::Immediate, None, inside);
    let mut failed = execution(&retried_job, ExecutionStatus::Failed, inside);
    failed.idempotency_key = None;
    store.job_insert(&retried_job, Some(&failed)).await.unwrap();
    let retry = ExecutionWrite {
        execution_id: ExecutionId::new(),
        idempotency_key: Some(format!("{RETRY_KEY_PREFIX}{}", failed.execution_id)),
        retry_of: Some(failed.execution_id.clone()),
        created_at: now(),
        ..execution(&retried_job, ExecutionStatus::Pending, now() + chrono::Duration::days(1))
    };
    assert!(matches!(store.execution_insert_many(&[retry]).await.unwrap()[0], Some(Inserted::Created(_))));
    // One finished now, outside every partition: the DEFAULT partition's, purged by row.
    queued(&*store, "a", 1).await;
    let late = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    assert_eq!(
        store.execution_finish_many(&[finish(&late[0], ExecutionStatus::Failed)]).await.unwrap().written,
        [true]
    );

    // The retention's cutoff past the first span: it goes, with the finished execution's
    // attempt and log line; the waiting one stays, and so does the one in the DEFAULT partition.
    // A round out of time for the jobs of a span drops nothing of it (its jobs are deleted
    // first); the next goes on from there.
    let short = store.history_upkeep(now(), window, Some(span.to), Duration::ZERO).await.unwrap();
    assert_eq!((short.jobs_purged, short.dropped.len(), short.behind), (1, 0, true), "{short:?}");
    assert!(store.execution_get(&ids[0]).await.unwrap().is_some());
    let upkept = store.history_upkeep(now(), window, Some(span.to), LONG_BUDGET).await.unwrap();
    assert_eq!((upkept.dropped.len(), upkept.behind), (3, false), "{upkept:?}");
    assert_eq!(upkept.jobs_purged, 0, "the finished execution's one-shot job went before it");
    assert!(store.job_get(&jobs[0]).await.unwrap().is_none());
    assert!(store.job_get(&retried_job.job_id).await.unwrap().is_some(), "a retried job stays");
    assert!(upkept.dropped.contains(&span.name), "{upkept:?}");
    // The purge's search for empty jobs stops at the oldest span still kept.
    let kept_from = store.history_kept_from().await.unwrap().expect("spans are kept");
    assert!(kept_from >= span.to, "{kept_from} after the dropped span's end {}", span.to);
    assert!(store.execution_get(&ids[0]).await.unwrap().is_none());
    assert!(store.attempt_list(&ids[0], &page).await.unwrap().is_empty());
    assert!(store.log_list(&ids[0], &page).await.unwrap().is_empty());
    assert_eq!(store.execution_get(&ids[1]).await.unwrap().unwrap().status, ExecutionStatus::Pending);
    assert!(store.execution_get(&late[0].execution_id).await.unwrap().is_some());
    // New spans keep being made ahead of now, before anything is dropped.
    assert!(!short.made.is_empty());
    // The vacuumer sees the queue's partition, each span, and the tables not partitioned.
    let churn: Vec<String> = store.table_churn().await.unwrap().tables.into_iter().map(|(t, _, _)| t).collect();
    for table in ["executions_live", "executions_done_default", "attempts_default", "jobs"] {
        assert!(churn.iter().any(|t| t == table), "{table} in {churn:?}");
    }
    assert!(!churn.iter().any(|t| t == &span.name), "dropped: {churn:?}");

    // The purge's row-by-row part reads only what no drop takes: the DEFAULT partition.
    let cutoff = now() + chrono::Duration::seconds(1);
    let by_row = store.execution_ids_finished(&FinishedScope::CreatedBefore(cutoff), 10).await.unwrap();
    assert_eq!(by_row, [late[0].execution_id.clone()]);
    assert_eq!(store.execution_delete_finished(&by_row).await.unwrap(), 1);
    assert!(store.execution_get(&late[0].execution_id).await.unwrap().is_none());
    // The job left with no execution goes too; the waiting one's stays.
    assert_eq!(store.job_purge_finished(cutoff, 10).await.unwrap(), 1, "the late one's");
    assert!(store.job_get(&jobs[1]).await.unwrap().is_some(), "the waiting one's stays");
}

/// A partition attached over the time rows are being written for, while they are written
/// (as the scheduler's first round after a start does), refuses none of them: every write
/// lands, in the DEFAULT partition or the new one. PostgreSQL only (`store::partitions`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_made_while_rows_are_written_refuse_none() {
    let (store, _guard) = stores().await.into_iter().find(|(s, _)| s.backend() == Backend::Postgres).unwrap();
    endpoint(&*store, "a").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut written = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    queued(&*store, "a", 5).await;
                    let worker = format!("w{w}");
                    let held = store.execution_claim(&claim(&worker, 5, Duration::from_secs(60))).await.unwrap();
                    let finishes: Vec<_> = held.iter().map(|e| finish(e, ExecutionStatus::Success)).collect();
                    let landed = store
                        .execution_finish_many(&finishes)
                        .await
                        .unwrap_or_else(|e| panic!("results: {e:?}"))
                        .written;
                    assert!(landed.iter().all(|l| *l));
                    written += landed.len();
                }
                written
            })
        })
        .collect();
    let window = Duration::from_secs(10);
    for _ in 0..15 {
        // Every span gone, and the DEFAULT partitions emptied, so the next round attaches a
        // span over now while the writers write.
        store.history_upkeep(now(), window, Some(now() + chrono::Duration::hours(1)), LONG_BUDGET).await.unwrap();
        let ids = store
            .execution_ids_finished(&FinishedScope::CreatedBefore(now() + chrono::Duration::hours(1)), 100_000)
            .await
            .unwrap();
        store.execution_delete_finished(&ids).await.unwrap();
        store.history_upkeep(now(), window, None, LONG_BUDGET).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    for writer in writers {
        written += writer.await.unwrap();
    }
    assert!(written > 0);
}
