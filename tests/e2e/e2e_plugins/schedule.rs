//! Schedule plugins: a cron job fires on a plugin's calendar; a classifier and a schedule run
//! offline with `taskexec plugin run`.

use super::*;

both_backends!(a_schedule_plugin_fires_a_cron_job_on_its_own_calendar);

async fn a_schedule_plugin_fires_a_cron_job_on_its_own_calendar(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let (ok, out) = cli(&server, &db, &["install", component("business-days").to_str().unwrap(), "--name", "workdays"]);
    assert!(ok && out.contains("schedule-plugin"), "{out}");
    install_allowing(&server, &db, "webhook-signed", "webhook", "http://127.0.0.1:*");
    api.create(
        "/endpoints",
        &json!({"name": "desk", "type": "HTTP", "spec": {"url": format!("{}/ok/desk", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let cron = |schedule: Value, zone: &str, starts_at: &str| json!({"endpoint": "desk", "trigger": "CRON", "schedule": schedule, "timezone": zone, "starts_at": starts_at});

    // Refusals name the field.
    let every_day = json!({"plugin": "workdays", "spec": {"times": ["02:30"], "weekdays": [1, 2, 3, 4, 5, 6, 7]}});
    let mut both = cron(every_day.clone(), "UTC", "2026-12-01T00:00:00Z");
    both["cron"] = json!("* * * * *");
    let message = api.post("/jobs", &both).await.error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`schedule`"), "{message}");
    let bad = json!({"plugin": "workdays", "spec": {"times": ["25:00"]}});
    let message = api.post("/jobs", &cron(bad, "UTC", "2026-12-01T00:00:00Z")).await.error(422, "INVALID_CRON");
    assert!(message.starts_with("`schedule.spec`") && message.contains("times"), "{message}");
    let message = api
        .post("/jobs", &cron(json!({"plugin": "webhook"}), "UTC", "2026-12-01T00:00:00Z"))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    assert!(message.contains("not a schedule-plugin"), "{message}");

    // The host places the plugin's local times by cron's rules: 02:30 on 2027-03-14 does not
    // exist in New York (skipped), and 01:30 on 2027-11-07 happens twice (the first).
    let job = api.create("/jobs", &cron(every_day, "America/New_York", "2027-03-14T06:00:00Z")).await;
    assert_eq!(job["next_run_at"], "2027-03-15T02:30:00-04:00", "{job}");
    assert_eq!(job["schedule"]["plugin"], "workdays");
    let fall_back = json!({"plugin": "workdays", "spec": {"times": ["01:30"], "weekdays": [7]}});
    let job = api.create("/jobs", &cron(fall_back, "America/New_York", "2027-11-07T04:00:00Z")).await;
    assert_eq!(job["next_run_at"], "2027-11-07T01:30:00-04:00", "{job}");
    // The same kind of job from the command line.
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let spec = r#"{"times": ["01:30"], "weekdays": [7]}"#;
    let args = [
        "jobs",
        "create",
        "--endpoint",
        "desk",
        "--schedule",
        "workdays",
        "--spec",
        spec,
        "--tz",
        "America/New_York",
        "--json",
    ];
    let out = command(&args, &env, db.dir.path()).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["schedule"], json!({"plugin": "workdays", "spec": {"times": ["01:30"], "weekdays": [7]}}), "{job}");
    assert_eq!(job["timezone"], "America/New_York");

    // Fired at the plugin's times: two seconds a few seconds from now, every day of the week.
    let first = chrono::Utc::now() + chrono::Duration::seconds(3);
    let second = first + chrono::Duration::seconds(2);
    let times: Vec<String> = [first, second].iter().map(|t| t.format("%H:%M:%S").to_string()).collect();
    if first.date_naive() != second.date_naive() {
        return; // Across midnight UTC the two times are not on one day; nothing to check then.
    }
    let soon = json!({"plugin": "workdays@1", "spec": {"times": times, "weekdays": [1, 2, 3, 4, 5, 6, 7]}});
    let job =
        api.create("/jobs", &json!({"endpoint": "desk", "trigger": "CRON", "schedule": soon, "timezone": "UTC"})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("both ticks are delivered", Duration::from_secs(20), || async { receiver.count_of("/ok/desk") >= 2 })
        .await;
    let executions = api.get(&format!("/jobs/{job_id}/executions")).await.body;
    let mut fired: Vec<String> = executions["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["scheduled_at"].as_str().unwrap_or("").to_owned())
        .collect();
    fired.sort();
    let expected: Vec<String> = [first, second].iter().map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string()).collect();
    assert_eq!(fired.iter().map(|t| t[..19].to_owned()).collect::<Vec<_>>(), expected, "{executions}");
    let tomorrow = (first + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%S").to_string();
    let job = api.get(&format!("/jobs/{job_id}")).await.body;
    assert!(job["next_run_at"].as_str().unwrap().starts_with(&tomorrow), "the next is tomorrow's first: {job}");

    // An active job keeps its plugin installed; a new version may move it to cron.
    let (ok, out) = cli(&server, &db, &["remove", "workdays"]);
    assert!(!ok && out.contains("409") && out.contains(&job_id), "{out}");
    let updated = api.put(&format!("/jobs/{job_id}"), &json!({"cron": "0 9 * * *"})).await.body;
    assert_eq!((updated["cron"].as_str(), updated.get("schedule")), (Some("0 9 * * *"), None), "{updated}");
}

/// `plugin run` on the deciding worlds, with no server: a classifier's verdict on an answer,
/// a schedule's next local times; a config or spec the plugin refuses is an error naming it.
#[test]
fn a_classifier_and_a_schedule_run_offline() {
    let dir = tempfile::tempdir().unwrap();
    let classifier = component("json-status");
    let answer = r#"{"status": 200, "headers": {"X-Retry-In": "3"}, "body": "{\"ok\": \"invalid\", \"error\": \"no such account\"}"}"#;
    let (ok, out, err) = offline(
        &["run", classifier.to_str().unwrap(), "--config", r#"{"permanent": ["invalid"]}"#, "--answer", answer],
        dir.path(),
    );
    assert!(ok, "{err}");
    let verdict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict, json!({"verdict": "permanent", "message": "/ok is \"invalid\": no such account"}));
    let (ok, _, err) =
        offline(&["run", classifier.to_str().unwrap(), "--config", r#"{"feild": 1}"#, "--answer", answer], dir.path());
    assert!(!ok && err.contains("check refused the config") && err.contains("feild"), "{err}");

    let schedule = component("business-days");
    let spec = r#"{"times": ["09:30", "16:00"], "holidays": ["2026-12-25"]}"#;
    let (ok, out, err) = offline(
        &["run", schedule.to_str().unwrap(), "--spec", spec, "--after", "2026-12-24T10:00:00", "--ticks", "3"],
        dir.path(),
    );
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["2026-12-24T16:00:00 Thu", "2026-12-28T09:30:00 Mon", "2026-12-28T16:00:00 Mon"],
        "Christmas and the weekend are skipped"
    );
    let (ok, _, err) = offline(&["run", schedule.to_str().unwrap(), "--spec", r#"{"times": ["25:00"]}"#], dir.path());
    assert!(!ok && err.contains("check refused the spec") && err.contains("times"), "{err}");
}
