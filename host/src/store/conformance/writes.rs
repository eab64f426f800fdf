//! Writes and reads: idempotent inserts, cron ticks recorded once, writes that find their
//! endpoint or job gone, pages in creation order, and reads of many endpoints at once.

use super::*;

pub async fn writes_for_a_deleted_endpoint_or_job_find_it_gone(store: Arc<dyn Store>) {
    let at = now() - chrono::Duration::seconds(1);
    endpoint(&*store, "kept").await;
    endpoint(&*store, "gone").await;
    assert!(matches!(store.endpoint_delete("gone").await.unwrap(), Deleted::Deleted));
    // A create whose endpoint went while the request was checked: gone, not a failed write.
    let orphan = job("gone", Trigger::Immediate, None, at);
    let outcome = store.job_insert(&orphan, Some(&execution(&orphan, ExecutionStatus::Queued, at))).await;
    assert!(matches!(outcome, Err(StoreError::ForeignKeyViolation)), "{:?}", outcome.map(|_| "written"));
    // In a batch, that job alone (keyed or not); the rest are written.
    let jobs = [
        job("kept", Trigger::Immediate, None, at),
        job("gone", Trigger::Immediate, None, at),
        job("gone", Trigger::Immediate, Some("k"), at),
        job("kept", Trigger::Immediate, Some("k"), at),
    ];
    let executions: Vec<ExecutionWrite> = jobs.iter().map(|j| execution(j, ExecutionStatus::Queued, at)).collect();
    let writes: Vec<_> = jobs.iter().zip(&executions).map(|(j, e)| (j, Some(e))).collect();
    let written = store.job_insert_many(&writes).await.unwrap();
    let outcomes: Vec<&str> = written
        .iter()
        .map(|w| match w {
            Ok(Inserted::Created(_)) => "created",
            Ok(Inserted::Existing(_)) => "existing",
            Err(StoreError::ForeignKeyViolation) => "gone",
            Err(_) => "failed",
        })
        .collect();
    assert_eq!(outcomes, ["created", "gone", "gone", "created"]);
    for (job, expected) in jobs.iter().zip([true, false, false, true]) {
        assert_eq!(store.job_get(&job.job_id).await.unwrap().is_some(), expected, "{}", job.endpoint);
    }
    // A new version for an endpoint that is gone: refused the same way, the old one kept.
    let mut cron = job("kept", Trigger::Cron, None, at);
    cron.cron_expression = Some("0 * * * *".to_owned());
    store.job_insert(&cron, None).await.unwrap();
    let next =
        JobWrite { version: 2, previous_version_id: Some(cron.job_id.clone()), ..job("gone", Trigger::Cron, None, at) };
    assert!(matches!(store.job_replace(&cron.job_id, &next).await, Err(StoreError::ForeignKeyViolation)));
    let old = store.job_get(&cron.job_id).await.unwrap().unwrap();
    assert_eq!(old.status, crate::domain::JobStatus::Active, "the refused replace retired nothing");
    // A retry of an execution whose job was deleted meanwhile is passed over.
    let failed = job("kept", Trigger::Immediate, None, at);
    let mut done = execution(&failed, ExecutionStatus::Failed, at);
    done.idempotency_key = None;
    store.job_insert(&failed, Some(&done)).await.unwrap();
    let retry = |of: &ExecutionWrite, job: &JobWrite| ExecutionWrite {
        execution_id: ExecutionId::new(),
        idempotency_key: Some(format!("{RETRY_KEY_PREFIX}{}", of.execution_id)),
        status: ExecutionStatus::Queued,
        retry_of: Some(of.execution_id.clone()),
        ..execution(job, ExecutionStatus::Queued, at)
    };
    let other = job("kept", Trigger::Immediate, None, at);
    let mut other_done = execution(&other, ExecutionStatus::Failed, at);
    other_done.idempotency_key = None;
    store.job_insert(&other, Some(&other_done)).await.unwrap();
    assert!(matches!(store.job_delete(&failed.job_id).await.unwrap(), Deleted::Deleted));
    let retried = store.execution_insert_many(&[retry(&done, &failed), retry(&other_done, &other)]).await.unwrap();
    assert!(retried[0].is_none(), "no retry for a deleted job");
    assert!(matches!(retried[1], Some(Inserted::Created(_))), "the other job's retry is written");
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    assert!(store.execution_list(&failed.job_id, None, &page).await.unwrap().is_empty());
}

pub async fn cron_ticks_are_recorded_once(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    let tick = chrono::DateTime::parse_from_rfc3339("2026-01-01T09:00:00Z").unwrap().with_timezone(&Utc);
    let mut j = job("a", Trigger::Cron, None, tick - chrono::Duration::hours(1));
    j.cron_expression = Some("0 0 9 * * *".to_owned());
    j.cron_timezone = Some("UTC".to_owned());
    j.cron_starts_at = Some(j.created_at);
    j.cron_next_run_at = Some(tick);
    store.job_insert(&j, None).await.unwrap();
    let advance = |_: usize| {
        let mut e = execution(&j, ExecutionStatus::Pending, tick);
        e.idempotency_key = Some(format!("tick:{}", tick.timestamp()));
        CronAdvance {
            job_id: j.job_id.clone(),
            tick,
            last: tick,
            next: Some(tick + chrono::Duration::days(1)),
            execution: Some(e),
        }
    };
    // Two schedulers record the same tick at once: one wins.
    let racers: Vec<_> = (0..2)
        .map(|i| {
            let store = store.clone();
            let a = advance(i);
            tokio::spawn(async move { store.cron_advance_many(&[a]).await.unwrap() })
        })
        .collect();
    let mut won = 0;
    for r in racers {
        won += r.await.unwrap().iter().filter(|w| **w).count();
    }
    assert_eq!(won, 1, "the tick was recorded {won} times");
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    assert_eq!(store.execution_list(&j.job_id, None, &page).await.unwrap().len(), 1);
    let job = store.job_get(&j.job_id).await.unwrap().unwrap();
    assert_eq!(job.cron_next_run_at, Some(tick + chrono::Duration::days(1)));
    assert_eq!(job.cron_last_tick_at, Some(tick));
    // A stale advance (its tick is no longer the job's next) changes nothing.
    assert_eq!(store.cron_advance_many(&[advance(3)]).await.unwrap(), [false]);
}

pub async fn inserts_are_idempotent(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    let at = now();
    let first = job("a", Trigger::Immediate, Some("once"), at);
    let created = store.job_insert(&first, Some(&execution(&first, ExecutionStatus::Queued, at))).await.unwrap();
    let Inserted::Created(created) = created else { panic!("the first insert creates") };
    let again = job("a", Trigger::Immediate, Some("once"), at);
    match store.job_insert(&again, Some(&execution(&again, ExecutionStatus::Queued, at))).await.unwrap() {
        Inserted::Existing(existing) => assert_eq!(existing.job_id, created.job_id),
        Inserted::Created(_) => panic!("a repeat with the same idempotency key created a second job"),
    }
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    assert_eq!(store.execution_list(&created.job_id, None, &page).await.unwrap().len(), 1);
    assert!(matches!(store.config_insert("c", &json!({"a": 1})).await.unwrap(), Inserted::Created(_)));
    match store.config_insert("c", &json!({"a": 2})).await.unwrap() {
        Inserted::Existing(c) => assert_eq!(c.values, json!({"a": 1}), "the existing row is returned unchanged"),
        Inserted::Created(_) => panic!("a second config under one name"),
    }
}

pub async fn endpoints_are_read_many_at_once(store: Arc<dyn Store>) {
    endpoint(&*store, "a").await;
    endpoint(&*store, "b").await;
    endpoint(&*store, "c").await;
    let read = store.endpoint_get_many(&["b", "missing", "a", "b"]).await.unwrap();
    let mut names: Vec<&str> = read.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b"], "each existing endpoint asked for, once; none that was not asked for");
    let one = store.endpoint_get("a").await.unwrap().unwrap();
    let many = read.iter().find(|e| e.name == "a").unwrap();
    assert_eq!((many.version, &many.spec, &many.retry_policy), (one.version, &one.spec, &one.retry_policy));
    assert!(store.endpoint_get_many(&[]).await.unwrap().is_empty());
    assert!(store.endpoint_get_many(&["missing"]).await.unwrap().is_empty());
}

pub async fn pages_follow_creation_order(store: Arc<dyn Store>) {
    for i in 0..25 {
        store.config_insert(&format!("cfg-{i:02}"), &json!({})).await.unwrap();
    }
    let mut seen: Vec<(DateTime<Utc>, String)> = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .config_list(DEFAULT_TENANT, &PageRequest { after: after.clone(), limit: 10, ..Default::default() })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        let last = page.last().unwrap();
        after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
        seen.extend(page.into_iter().map(|c| (c.created_at, c.name)));
    }
    assert_eq!(seen.len(), 25, "every row once");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "pages in (created_at, key) order: {seen:?}");

    // Newest first: the same rows, the walk reversed.
    let mut backwards: Vec<(DateTime<Utc>, String)> = Vec::new();
    let mut after = None;
    loop {
        let page = PageRequest { after: after.clone(), limit: 10, newest_first: true };
        let page = store.config_list(DEFAULT_TENANT, &page).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
        backwards.extend(page.into_iter().map(|c| (c.created_at, c.name)));
    }
    seen.reverse();
    assert_eq!(backwards, seen, "newest first walks the same rows backwards");
}

/// Every read of a job's executions, or of all of them, finds the RUNNING ones in their
/// place, although PostgreSQL's list indexes leave them out (`settled_or_running`).
pub async fn running_executions_are_read_with_the_rest(store: Arc<dyn Store>) {
    endpoint(&*store, "e").await;
    let at = now() - chrono::Duration::seconds(10);
    let j = job("e", Trigger::Immediate, None, at);
    // Created in this order: `done` (due first), `waiting` (due in an hour), `running`.
    let done = execution(&j, ExecutionStatus::Queued, at);
    store.job_insert(&j, Some(&done)).await.unwrap();
    // Written as retries are (keyed in the job), the way a job gets a second execution.
    let waiting = ExecutionWrite {
        idempotency_key: Some("retry:waiting".to_owned()),
        created_at: at + chrono::Duration::seconds(1),
        run_at: now() + chrono::Duration::hours(1),
        ..execution(&j, ExecutionStatus::Queued, at)
    };
    let running = ExecutionWrite {
        idempotency_key: Some("retry:running".to_owned()),
        created_at: at + chrono::Duration::seconds(2),
        run_at: at + chrono::Duration::seconds(1),
        ..execution(&j, ExecutionStatus::Queued, at)
    };
    store.execution_insert_many(&[waiting.clone(), running.clone()]).await.unwrap();
    let first = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    assert_eq!(first[0].execution_id, done.execution_id);
    assert_eq!(
        store.execution_finish_many(&[finish(&first[0], ExecutionStatus::Success)]).await.unwrap().written,
        [true]
    );
    let second = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].execution_id, running.execution_id);

    let ids = |page: Vec<Execution>| page.into_iter().map(|e| e.execution_id).collect::<Vec<_>>();
    let created_order = vec![done.execution_id.clone(), waiting.execution_id.clone(), running.execution_id.clone()];
    let all = PageRequest { limit: 10, ..Default::default() };
    assert_eq!(ids(store.execution_list(&j.job_id, None, &all).await.unwrap()), created_order, "a job's executions");
    let by_endpoint = ExecutionFilter { endpoint: Some("e".to_owned()), ..Default::default() };
    assert_eq!(ids(store.execution_search(&by_endpoint, &all).await.unwrap()), created_order, "all executions");
    let newest = PageRequest { newest_first: true, ..all.clone() };
    let mut reversed = created_order.clone();
    reversed.reverse();
    assert_eq!(ids(store.execution_list(&j.job_id, None, &newest).await.unwrap()), reversed, "newest first");
    // One at a time, each page after the last.
    let mut walked = Vec::new();
    let mut after = None;
    while let Some(last) = store
        .execution_list(&j.job_id, None, &PageRequest { after: after.clone(), limit: 1, newest_first: false })
        .await
        .unwrap()
        .pop()
    {
        after = Some(PageKey { created_at: last.created_at, key: last.execution_id.to_string() });
        walked.push(last.execution_id);
    }
    assert_eq!(walked, created_order, "pages of one");
    let only_running = ids(store.execution_list(&j.job_id, Some(ExecutionStatus::Running), &all).await.unwrap());
    assert_eq!(only_running, std::slice::from_ref(&running.execution_id));
    assert_eq!(store.execution_last(&j.job_id).await.unwrap().unwrap().execution_id, running.execution_id);
    assert_eq!(store.execution_first(&j.job_id).await.unwrap().unwrap().execution_id, done.execution_id);
    let activity = store.execution_activity(at - chrono::Duration::seconds(1), 10, None).await.unwrap();
    let statuses: Vec<ExecutionStatus> = activity.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [ExecutionStatus::Running, ExecutionStatus::Queued, ExecutionStatus::Success], "newest first");
    let mut counts = store.execution_counts(None).await.unwrap();
    counts.sort_by_key(|(status, _)| status.as_str());
    assert_eq!(
        counts,
        [(ExecutionStatus::Queued, 1), (ExecutionStatus::Running, 1)],
        "the overview counts the unfinished, and nothing finished"
    );
    let stats = store.job_stats(&j.job_id, at).await.unwrap();
    assert_eq!((stats.running, stats.queued, stats.succeeded), (1, 1, 1));
    match store.job_delete(&j.job_id).await.unwrap() {
        Deleted::InUse(unfinished) => {
            let unfinished: HashSet<String> = unfinished.into_iter().collect();
            let expected: HashSet<String> =
                [waiting.execution_id.to_string(), running.execution_id.to_string()].into_iter().collect();
            assert_eq!(unfinished, expected, "the unfinished executions hold the job");
        }
        other => panic!("a job with a RUNNING execution was deleted: {other:?}"),
    }
}
