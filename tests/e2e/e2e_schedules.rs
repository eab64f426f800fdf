//! A CRON job's schedule policies: pause and resume (with and without catching up), and what
//! a tick does while the previous execution still runs (`overlap_policy`); fires outside the
//! schedule (trigger, backfill) and jitter; every job's lateness and SLA.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, wait_for_status};
use crate::support::{eventually, wait_for, Backend, Client, Receiver, Server, TestDb};

both_backends!(
    paused_jobs_make_no_ticks_and_resume_as_their_catchup_policy_says,
    overlapping_ticks_are_skipped_or_buffered,
    lateness_and_the_sla_are_recorded_per_execution_and_per_job,
    upcoming_ticks_are_listed_as_the_scheduler_will_make_them,
    a_cron_job_is_fired_now_and_its_past_ticks_backfilled,
    jittered_ticks_fire_when_upcoming_says,
);

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap_or_else(|| panic!("a time: {value}")))
        .unwrap()
        .with_timezone(&Utc)
}

async fn executions(api: &Client, job_id: &str) -> Vec<Value> {
    api.list_all(&format!("/jobs/{job_id}/executions"), 200).await.0
}

fn every_second(endpoint: &str, extra: Value) -> Value {
    let mut job = json!({"endpoint": endpoint, "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC",
                         "input": {"user_id": "u", "amount": 1}});
    job.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    job
}

/// Executions of the job whose tick falls in (from, to], but for those cancelled.
fn ticks_between(executions: &[Value], from: DateTime<Utc>, to: DateTime<Utc>) -> usize {
    let tick = |e: &Value| time(&e["run_at"]);
    executions.iter().filter(|e| e["status"] != "CANCELLED" && tick(e) > from && tick(e) <= to).count()
}

async fn paused_jobs_make_no_ticks_and_resume_as_their_catchup_policy_says(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let all = api.create("/jobs", &every_second("tick", json!({"catchup_policy": "all"}))).await;
    let latest =
        api.create("/jobs", &every_second("tick", json!({"catchup_policy": "latest", "catchup_window": "1h"}))).await;
    assert_eq!((all["catchup_policy"].as_str(), all["overlap_policy"].as_str()), (Some("all"), Some("allow")));
    assert_eq!(latest["catchup_window"], "1h");
    let (all, latest) = (all["job_id"].as_str().unwrap().to_owned(), latest["job_id"].as_str().unwrap().to_owned());
    for id in [&all, &latest] {
        eventually("a first tick", Duration::from_secs(20), || async { !executions(&api, id).await.is_empty() }).await;
    }

    // Paused: no ticks, and the next one is cleared.
    let mut paused_at = Vec::new();
    for id in [&all, &latest] {
        let paused = api.post(&format!("/jobs/{id}/pause"), &json!({})).await;
        assert_eq!(paused.status, 200, "{}", paused.text);
        assert_eq!(paused.body["next_run_at"], Value::Null);
        paused_at.push(time(&paused.body["paused_at"]));
        // Pausing again changes nothing.
        assert_eq!(
            api.post(&format!("/jobs/{id}/pause"), &json!({})).await.body["paused_at"],
            paused.body["paused_at"]
        );
    }
    // Four ticks' time passes; nothing fires meanwhile (a tick made ahead was withdrawn), but
    // for a tick a worker already held: one due within READY_AHEAD of the pause.
    let quiet_until = Utc::now() + chrono::Duration::milliseconds(4200);
    wait_for("four ticks' time", Duration::from_secs(6), || Utc::now() > quiet_until).await;
    for (id, paused) in [&all, &latest].into_iter().zip(&paused_at) {
        let made = executions(&api, id).await;
        let held_until = *paused + taskexec::store::READY_AHEAD;
        assert_eq!(ticks_between(&made, held_until, Utc::now()), 0, "a paused job ticked: {made:?}");
    }

    // Resumed with catch_up: `all` makes up every missed tick, `latest` only the newest.
    let (mut resumed_at, mut resume_sent) = (Vec::new(), Vec::new());
    for id in [&all, &latest] {
        // The server resumes somewhere between the request leaving and its answer arriving.
        resume_sent.push(Utc::now());
        let resumed = api.post(&format!("/jobs/{id}/resume"), &json!({"catch_up": true})).await;
        assert_eq!(resumed.status, 200, "{}", resumed.text);
        assert_eq!(resumed.body["paused_at"], Value::Null);
        resumed_at.push(Utc::now());
    }
    eventually("the missed ticks made up", Duration::from_secs(20), || async {
        ticks_between(&executions(&api, &all).await, paused_at[0], resumed_at[0]) >= 3
    })
    .await;
    eventually("a tick after the resume", Duration::from_secs(20), || async {
        executions(&api, &latest)
            .await
            .iter()
            .any(|e| time(&e["run_at"]) > resumed_at[1] + chrono::Duration::seconds(1))
    })
    .await;
    // `latest` made the newest tick due when it caught up (within a second of the resume),
    // none of the older ones of the paused time.
    let made = executions(&api, &latest).await;
    let second = chrono::Duration::seconds(1);
    let held_until = paused_at[1] + taskexec::store::READY_AHEAD;
    assert_eq!(ticks_between(&made, held_until, resume_sent[1] - second), 0, "older missed ticks made: {made:?}");
    assert!(ticks_between(&made, resume_sent[1] - second, resumed_at[1] + second) >= 1, "no tick caught up: {made:?}");

    // Resumed without catch_up: the schedule goes on from now, nothing made up.
    api.post(&format!("/jobs/{all}/pause"), &json!({})).await;
    let paused = time(&api.get(&format!("/jobs/{all}")).await.body["paused_at"]);
    let quiet_until = Utc::now() + chrono::Duration::milliseconds(2200);
    wait_for("two ticks' time", Duration::from_secs(5), || Utc::now() > quiet_until).await;
    let resumed = api.post(&format!("/jobs/{all}/resume"), &json!({})).await;
    let resumed_at = Utc::now();
    assert!(time(&resumed.body["next_run_at"]) > paused, "{}", resumed.text);
    eventually("a tick after the resume", Duration::from_secs(20), || async {
        executions(&api, &all).await.iter().any(|e| time(&e["run_at"]) > resumed_at)
    })
    .await;
    let made = executions(&api, &all).await;
    let before_resume = resumed_at - chrono::Duration::milliseconds(1000);
    let held_until = paused + taskexec::store::READY_AHEAD;
    assert_eq!(ticks_between(&made, held_until, before_resume), 0, "nothing made up: {made:?}");

    // Only an active CRON job pauses; policies belong to CRON jobs.
    let once = api.create("/jobs", &json!({"endpoint": "tick", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"user_id": "u", "amount": 1}})).await;
    api.post(&format!("/jobs/{}/pause", once["job_id"].as_str().unwrap()), &json!({}))
        .await
        .error(409, "JOB_NOT_UPDATABLE");
    api.post("/jobs/job_missing/resume", &json!({})).await.error(404, "JOB_NOT_FOUND");
    let refused = api
        .post(
            "/jobs",
            &json!({"endpoint": "tick", "trigger": "IMMEDIATE", "idempotency_key": "k2", "overlap_policy": "skip"}),
        )
        .await;
    assert!(refused.error(400, "INVALID_REQUEST").contains("`overlap_policy`"));
    let refused = api.post("/jobs", &every_second("tick", json!({"catchup_window": "5 weeks"}))).await;
    assert!(refused.error(400, "INVALID_REQUEST").contains("`catchup_window`"));
    let refused = api.post("/jobs", &every_second("tick", json!({"overlap_policy": "queue"}))).await;
    assert!(refused.error(400, "INVALID_REQUEST").contains("overlap_policy"), "{}", refused.text);
}

/// Each job's deliveries (SUCCESS executions) in start order never overlap: each starts after
/// the one before it finished.
fn assert_one_at_a_time(made: &[Value]) {
    let mut done: Vec<&Value> = made.iter().filter(|e| e["status"] == "SUCCESS").collect();
    done.sort_by_key(|e| time(&e["started_at"]));
    for pair in done.windows(2) {
        assert!(time(&pair[1]["started_at"]) >= time(&pair[0]["completed_at"]), "overlap: {pair:?}");
    }
}

async fn overlapping_ticks_are_skipped_or_buffered(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    // A delivery takes 1.5 s; the jobs tick every second.
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "slow-skip", "/slow/1500", json!(null)).await;
    http_endpoint(&api, &receiver, "slow-buffer", "/slow/1500", json!(null)).await;
    let skip = api.create("/jobs", &every_second("slow-skip", json!({"overlap_policy": "skip"}))).await;
    let buffer = api.create("/jobs", &every_second("slow-buffer", json!({"overlap_policy": "buffer_one"}))).await;
    let (skip, buffer) = (skip["job_id"].as_str().unwrap().to_owned(), buffer["job_id"].as_str().unwrap().to_owned());
    let succeeded = |made: &[Value]| made.iter().filter(|e| e["status"] == "SUCCESS").count();
    for id in [&skip, &buffer] {
        eventually("three deliveries", Duration::from_secs(30), || async {
            succeeded(&executions(&api, id).await) >= 3
        })
        .await;
    }
    for id in [&skip, &buffer] {
        api.post(&format!("/jobs/{id}/cancel"), &json!({})).await;
    }
    for id in [&skip, &buffer] {
        let made = executions(&api, id).await;
        assert_one_at_a_time(&made);
        let skipped: Vec<&Value> = made.iter().filter(|e| e["output"]["skipped"].is_string()).collect();
        assert!(!skipped.is_empty(), "ticks during a delivery are skipped: {made:?}");
        assert!(skipped.iter().all(|e| e["status"] == "CANCELLED"));
    }
    // buffer_one held a tick that came during a delivery and fired it after: a delivery
    // started well after its tick, once the one before it finished.
    let made = executions(&api, &buffer).await;
    let held = made
        .iter()
        .filter(|e| e["status"] == "SUCCESS")
        .any(|e| time(&e["started_at"]) - time(&e["run_at"]) > chrono::Duration::milliseconds(300));
    assert!(held, "a tick was held until the previous delivery ended: {made:?}");
}

async fn lateness_and_the_sla_are_recorded_per_execution_and_per_job(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hook", "/ok/hook", json!(null)).await;
    let input = json!({"user_id": "u", "amount": 1});

    // On time: within a generous SLA.
    let prompt = api
        .create("/jobs", &json!({"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "p", "sla_ms": 60_000, "input": input}))
        .await;
    assert_eq!(prompt["sla_ms"], 60_000);
    let execution = wait_for_status(&api, prompt["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(execution["sla_met"], true, "{execution}");
    let lateness = execution["lateness_ms"].as_i64().unwrap();
    assert!((0..60_000).contains(&lateness), "{execution}");
    assert!(time(&execution["claimed_at"]) >= time(&execution["scheduled_at"]), "{execution}");

    // Ten seconds late (its time had passed when it was created): the SLA is missed.
    let ten_seconds_ago = (Utc::now() - chrono::Duration::seconds(10)).to_rfc3339();
    let late = api
        .create(
            "/jobs",
            &json!({"endpoint": "hook", "trigger": "DELAYED", "idempotency_key": "l", "run_at": ten_seconds_ago,
                                 "sla_ms": 1000, "input": input}),
        )
        .await;
    let execution = wait_for_status(&api, late["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(execution["sla_met"], false, "{execution}");
    assert!(execution["lateness_ms"].as_i64().unwrap() >= 10_000, "{execution}");
    let status = api.get(&format!("/jobs/{}/status", late["job_id"].as_str().unwrap())).await.body;
    let sla = &status["stats"]["last_24h"]["sla"];
    assert_eq!(
        (sla["sla_ms"].as_i64(), sla["started"].as_u64(), sla["met"].as_u64()),
        (Some(1000), Some(1), Some(0)),
        "{status}"
    );
    assert_eq!(sla["ratio"], 0.0);
    // A job without an SLA says nothing of one.
    let plain = api
        .create("/jobs", &json!({"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "n", "input": input}))
        .await;
    let execution = wait_for_status(&api, plain["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(execution["sla_met"], Value::Null);
    assert!(execution["lateness_ms"].is_i64());

    let refused = api
        .post("/jobs", &json!({"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "z", "sla_ms": 0}))
        .await;
    assert!(refused.error(400, "INVALID_REQUEST").contains("`sla_ms`"));
}

async fn upcoming_ticks_are_listed_as_the_scheduler_will_make_them(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "nightly", "/ok/nightly", json!({})).await;
    // 02:30 in Paris, from the day before spring-forward (2027-03-28, when 02:00 becomes 03:00):
    // that night's 02:30 does not exist and is skipped, as the scheduler skips it.
    let job = api
        .create(
            "/jobs",
            &json!({"endpoint": "nightly", "trigger": "CRON", "cron": "30 2 * * *", "timezone": "Europe/Paris",
                    "starts_at": "2027-03-27T00:00:00Z", "ends_at": "2027-04-01T00:00:00Z", "input": {"user_id": "u1"}}),
        )
        .await;
    let id = job["job_id"].as_str().unwrap();
    let listed = api.get(&format!("/jobs/{id}/upcoming?limit=3")).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(
        (listed.body["timezone"].as_str(), listed.body["paused"].as_bool()),
        (Some("Europe/Paris"), Some(false))
    );
    let ticks: Vec<(&str, &str)> = listed.body["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["at"].as_str().unwrap(), t["local"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ticks,
        [
            ("2027-03-27T01:30:00Z", "2027-03-27T02:30:00+01:00"),
            ("2027-03-29T00:30:00Z", "2027-03-29T02:30:00+02:00"),
            ("2027-03-30T00:30:00Z", "2027-03-30T02:30:00+02:00"),
        ]
    );
    assert_eq!(listed.body["truncated"], false);
    // `ends_at` bounds the list, however many are asked for.
    let all = api.get(&format!("/jobs/{id}/upcoming?limit=100")).await;
    assert_eq!(all.body["ticks"].as_array().unwrap().len(), 4, "27, 29, 30, 31 March: {}", all.text);
    assert_eq!(api.get(&format!("/jobs/{id}/upcoming")).await.body["ticks"].as_array().unwrap().len(), 4);
    // A paused job makes no ticks.
    assert_eq!(api.post(&format!("/jobs/{id}/pause"), &json!({})).await.status, 200);
    let paused = api.get(&format!("/jobs/{id}/upcoming")).await;
    assert_eq!((paused.body["paused"].as_bool(), paused.body["ticks"].as_array().map(Vec::len)), (Some(true), Some(0)));
    // Bad input and other jobs are refused, naming why.
    for limit in ["0", "101", "x"] {
        api.get(&format!("/jobs/{id}/upcoming?limit={limit}")).await.error(400, "INVALID_REQUEST");
    }
    let once = api
        .create(
            "/jobs",
            &json!({"endpoint": "nightly", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"user_id": "u1"}}),
        )
        .await;
    let message =
        api.get(&format!("/jobs/{}/upcoming", once["job_id"].as_str().unwrap())).await.error(409, "JOB_NOT_UPDATABLE");
    assert!(message.contains("only CRON jobs"), "{message}");
    api.get("/jobs/job_missing/upcoming").await.error(404, "JOB_NOT_FOUND");
}

async fn a_cron_job_is_fired_now_and_its_past_ticks_backfilled(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "report", "/ok/report", json!(null)).await;
    http_endpoint(&api, &receiver, "slow", "/slow/1500", json!(null)).await;
    // Daily at 09:00 UTC: nothing fires by itself during the test.
    let input = json!({"user_id": "u", "amount": 1});
    let daily =
        json!({"endpoint": "report", "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC", "input": input});
    let job = api.create("/jobs", &daily).await;
    let id = job["job_id"].as_str().unwrap().to_owned();

    // Fired now: one execution, manual, delivered.
    let fired = api.post(&format!("/jobs/{id}/trigger"), &json!({})).await;
    assert_eq!(fired.status, 201, "{}", fired.text);
    assert_eq!((fired.body["trigger_reason"].as_str(), fired.body["job_id"].as_str()), (Some("manual"), Some(&*id)));
    let done = wait_for_status(&api, fired.body["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(done["trigger_reason"], "manual");
    wait_for("the manual fire's delivery", Duration::from_secs(10), || receiver.count_of("/ok/report") == 1).await;
    // With an Idempotency-Key, once however often it is sent; an empty body is `{}`.
    let path = format!("/jobs/{id}/trigger");
    let keyed = api.send_with(Method::POST, &path, None, &[("Idempotency-Key", "release-42")]).await;
    assert_eq!(keyed.status, 201, "{}", keyed.text);
    let repeat = api.send_with(Method::POST, &path, None, &[("Idempotency-Key", "release-42")]).await;
    assert_eq!(repeat.status, 200, "{}", repeat.text);
    assert_eq!(repeat.body["execution_id"], keyed.body["execution_id"]);
    wait_for_status(&api, keyed.body["execution_id"].as_str().unwrap(), "SUCCESS").await;

    // The last three days' 09:00 ticks, made now; asked again, none is made twice.
    let (from, to) = (Utc::now() - chrono::Duration::days(3), Utc::now());
    let range = json!({"from": from.to_rfc3339(), "to": to.to_rfc3339()});
    let filled = api.post(&format!("/jobs/{id}/backfill"), &range).await;
    assert_eq!(filled.status, 200, "{}", filled.text);
    assert_eq!(filled.body["created"], 3, "{}", filled.text);
    let ticks = filled.body["ticks"].as_array().unwrap();
    assert!(ticks.iter().all(|t| t["created"] == true && t["at"].as_str().unwrap().ends_with("T09:00:00Z")));
    assert!(ticks.windows(2).all(|w| time(&w[0]["at"]) < time(&w[1]["at"])), "oldest first");
    for tick in ticks {
        let execution = wait_for_status(&api, tick["execution_id"].as_str().unwrap(), "SUCCESS").await;
        assert_eq!(execution["trigger_reason"], "backfill", "{execution}");
        let key = format!("{id}_{}", time(&tick["at"]).timestamp_millis());
        assert_eq!(execution["idempotency_key"], key.as_str(), "keyed as the scheduler keys the tick");
    }
    assert_eq!(receiver.count_of("/ok/report"), 5);
    let again = api.post(&format!("/jobs/{id}/backfill"), &range).await;
    assert_eq!(again.body["created"], 0, "{}", again.text);
    let same = |t: &Value| (t["at"].clone(), t["execution_id"].clone());
    assert_eq!(
        again.body["ticks"].as_array().unwrap().iter().map(same).collect::<Vec<_>>(),
        ticks.iter().map(same).collect::<Vec<_>>()
    );
    assert!(again.body["ticks"].as_array().unwrap().iter().all(|t| t["created"] == false && t["status"] == "SUCCESS"));
    let reasons: Vec<String> =
        executions(&api, &id).await.iter().map(|e| e["trigger_reason"].as_str().unwrap().to_owned()).collect();
    assert_eq!(reasons, ["manual", "manual", "backfill", "backfill", "backfill"]);

    // Under the overlap policy: with `skip`, a fire while one runs is skipped.
    let skipping = api
        .create(
            "/jobs",
            &json!({"endpoint": "slow", "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC",
                                  "overlap_policy": "skip", "input": input}),
        )
        .await;
    let skipping = skipping["job_id"].as_str().unwrap();
    let first = api.post(&format!("/jobs/{skipping}/trigger"), &json!({})).await;
    wait_for_status(&api, first.body["execution_id"].as_str().unwrap(), "RUNNING").await;
    let second = api.post(&format!("/jobs/{skipping}/trigger"), &json!({})).await;
    let skipped = wait_for_status(&api, second.body["execution_id"].as_str().unwrap(), "CANCELLED").await;
    assert!(skipped["output"]["skipped"].is_string(), "{skipped}");
    // ... unless the request says otherwise.
    let allowed = api.post(&format!("/jobs/{skipping}/trigger"), &json!({"overlap_policy": "allow"})).await;
    wait_for_status(&api, allowed.body["execution_id"].as_str().unwrap(), "SUCCESS").await;

    // Bad ranges, other jobs and bodies are refused, naming why.
    let past = |from: &str, to: &str| json!({"from": from, "to": to});
    let ahead = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    for (body, field) in [
        (past("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"), "`from`"),
        (past("2026-01-01T00:00:00Z", &ahead), "`to`"),
        (past("2000-01-01T00:00:00Z", "2026-01-01T00:00:00Z"), "`to`"),
        (json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "ticks": 1}), "ticks"),
        (json!({"from": "yesterday", "to": "2026-01-02T00:00:00Z"}), "from"),
    ] {
        let message = api.post(&format!("/jobs/{id}/backfill"), &body).await.error(400, "INVALID_REQUEST");
        assert!(message.contains(field), "{body}: {message}");
    }
    let too_many =
        api.post(&format!("/jobs/{id}/backfill"), &past("2000-01-01T00:00:00Z", "2026-01-01T00:00:00Z")).await;
    assert!(
        too_many.text.contains("more than 1000 ticks") && too_many.text.contains("2002-09-27T09:00:00Z"),
        "{}",
        too_many.text
    );
    api.post(&format!("/jobs/{id}/trigger"), &json!({"overlap_policy": "sometimes"}))
        .await
        .error(400, "INVALID_REQUEST");
    let once = api
        .create("/jobs", &json!({"endpoint": "report", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": input}))
        .await;
    let once = once["job_id"].as_str().unwrap();
    let message = api.post(&format!("/jobs/{once}/trigger"), &json!({})).await.error(409, "JOB_NOT_UPDATABLE");
    assert!(message.contains("only CRON jobs can be triggered"), "{message}");
    api.post(&format!("/jobs/{once}/backfill"), &range).await.error(409, "JOB_NOT_UPDATABLE");
    api.post("/jobs/job_missing/trigger", &json!({})).await.error(404, "JOB_NOT_FOUND");
    assert_eq!(api.post(&format!("/jobs/{id}/cancel"), &json!({})).await.status, 200);
    let message = api.post(&format!("/jobs/{id}/trigger"), &json!({})).await.error(409, "JOB_NOT_UPDATABLE");
    assert!(message.contains("retired"), "{message}");
}

async fn jittered_ticks_fire_when_upcoming_says(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let job = api.create("/jobs", &every_second("tick", json!({"jitter_ms": 800}))).await;
    assert_eq!(job["jitter_ms"], 800);
    let id = job["job_id"].as_str().unwrap().to_owned();
    let listed = api.get(&format!("/jobs/{id}/upcoming?limit=100")).await.body;
    let fires: std::collections::HashMap<i64, DateTime<Utc>> = listed["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (time(&t["at"]).timestamp_millis(), time(&t["fires_at"])))
        .collect();
    let offsets: Vec<i64> = fires.iter().map(|(at, fires)| fires.timestamp_millis() - at).collect();
    assert!(offsets.iter().all(|ms| (0..=800).contains(ms)), "{offsets:?}");
    assert!(offsets.iter().any(|ms| *ms > 0), "ticks are spread: {offsets:?}");
    // Five ticks fired, each at the moment `upcoming` gave for it.
    eventually("five ticks delivered", Duration::from_secs(30), || async {
        executions(&api, &id).await.iter().filter(|e| e["status"] == "SUCCESS").count() >= 5
    })
    .await;
    api.post(&format!("/jobs/{id}/cancel"), &json!({})).await;
    let mut checked = 0;
    for execution in executions(&api, &id).await.iter().filter(|e| e["status"] == "SUCCESS") {
        let key = execution["idempotency_key"].as_str().unwrap();
        let tick: i64 = key.rsplit('_').next().unwrap().parse().unwrap();
        if let Some(fires_at) = fires.get(&tick) {
            assert_eq!(time(&execution["scheduled_at"]), *fires_at, "{execution}");
            assert!(time(&execution["started_at"]) >= *fires_at, "not before its moment: {execution}");
            checked += 1;
        }
    }
    assert!(checked >= 3, "ticks listed ahead were delivered: {checked}");
    // A new version keeps it unless told; 0 removes it; bad values are refused.
    let updated = api.put(&format!("/jobs/{id}"), &json!({"jitter_ms": 0})).await;
    assert_eq!(updated.status, 409, "a retired job cannot be updated: {}", updated.text);
    for bad in [json!(-1), json!(3_600_001), json!("1s")] {
        let refused = api.post("/jobs", &every_second("tick", json!({"jitter_ms": bad}))).await;
        assert!(refused.error(400, "INVALID_REQUEST").contains("jitter_ms"), "{bad}");
    }
    let once = json!({"endpoint": "tick", "trigger": "IMMEDIATE", "idempotency_key": "k", "jitter_ms": 10});
    assert!(api.post("/jobs", &once).await.error(400, "INVALID_REQUEST").contains("`jitter_ms`"));
    let spread = api.create("/jobs", &every_second("tick", json!({"jitter_ms": 500, "cron": "0 9 * * *"}))).await;
    let kept = api.put(&format!("/jobs/{}", spread["job_id"].as_str().unwrap()), &json!({"cron": "0 10 * * *"})).await;
    assert_eq!(kept.body["jitter_ms"], 500, "{}", kept.text);
    let removed = api.put(&format!("/jobs/{}", kept.body["job_id"].as_str().unwrap()), &json!({"jitter_ms": 0})).await;
    assert_eq!(removed.body["jitter_ms"], 0, "{}", removed.text);
}
