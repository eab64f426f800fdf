//! The locks that stand in for PostgreSQL's dropped foreign keys (migration 0066).

use super::*;

/// PostgreSQL keeps no foreign keys from jobs to endpoints or from executions to jobs (0066):
/// the locks that stand in for them order a create and an endpoint delete that overlap, either
/// way round, so that no job outlives its endpoint and no create fails as anything but "gone".
/// Each side's other half is a transaction held open here, as a request in flight holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_and_an_endpoint_delete_that_overlap_leave_no_job_without_its_endpoint() {
    let (store, guard) = new_stores(None).await.swap_remove(0);
    store.migrate().await.unwrap();
    let guard = guard.downcast::<DropDatabase>().expect("the first store is PostgreSQL's");
    let url = format!("{}/{}", guard.admin.rsplit_once('/').unwrap().0, guard.name);
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let jobs_of = |name: &'static str| {
        let pool = pool.clone();
        async move {
            let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM jobs WHERE endpoint = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap();
            n
        }
    };
    // Until another backend is seen waiting on a lock (the write under test has reached it).
    let until_waiting = || async {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (waiting,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "the write never waited on the held row");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let at = now() - chrono::Duration::seconds(1);

    // A delete that went first: the creates wait on it, then find the endpoint gone.
    endpoint(&*store, "a").await;
    let mut delete = pool.begin().await.unwrap();
    sqlx::query("SELECT name FROM endpoints WHERE name = 'a' FOR UPDATE").execute(&mut *delete).await.unwrap();
    let (one, two) = (job("a", Trigger::Immediate, None, at), job("a", Trigger::Immediate, Some("k"), at));
    let creates = tokio::spawn({
        let store = store.clone();
        let (e1, e2) = (execution(&one, ExecutionStatus::Queued, at), execution(&two, ExecutionStatus::Queued, at));
        async move { store.job_insert_many(&[(&one, Some(&e1)), (&two, Some(&e2))]).await.unwrap() }
    });
    until_waiting().await;
    sqlx::query("DELETE FROM endpoints WHERE name = 'a'").execute(&mut *delete).await.unwrap();
    delete.commit().await.unwrap();
    let answered = creates.await.unwrap();
    assert!(
        answered.iter().all(|a| matches!(a, Err(StoreError::ForeignKeyViolation))),
        "each create found its endpoint gone: {:?}",
        answered.iter().map(|a| a.as_ref().map(|_| "written")).collect::<Vec<_>>()
    );
    assert_eq!(jobs_of("a").await, 0, "no job was written for the deleted endpoint");

    // A create that went first: the delete waits on it, then sees its job and refuses.
    endpoint(&*store, "b").await;
    let mut create = pool.begin().await.unwrap();
    sqlx::query("SELECT name FROM endpoints WHERE name = 'b' FOR KEY SHARE").execute(&mut *create).await.unwrap();
    let j = job("b", Trigger::Immediate, None, at);
    sqlx::query(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at) VALUES ($1, 'b', 'HTTP', 'IMMEDIATE', now())",
    )
    .bind(j.job_id.as_str())
    .execute(&mut *create)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status) VALUES ($1, $2, 'b', 'HTTP', 'QUEUED')",
    )
    .bind(ExecutionId::new().as_str())
    .bind(j.job_id.as_str())
    .execute(&mut *create)
    .await
    .unwrap();
    let deleted = tokio::spawn({
        let store = store.clone();
        async move { store.endpoint_delete("b").await.unwrap() }
    });
    until_waiting().await;
    create.commit().await.unwrap();
    match deleted.await.unwrap() {
        Deleted::InUse(jobs) => assert_eq!(jobs, [j.job_id.to_string()], "the refusal names the job written meanwhile"),
        other => panic!("the endpoint was deleted under a job created meanwhile: {other:?}"),
    }
    assert_eq!(jobs_of("b").await, 1);
    assert!(store.endpoint_get("b").await.unwrap().is_some());
}
