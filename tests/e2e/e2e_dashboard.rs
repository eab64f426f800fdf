//! The dashboard (`/ui`): over HTTP on both backends (sign-in, cookie, CSRF, every page, no
//! secret shown), and in a real browser — Debian's headless Chromium driven through
//! chromedriver — on PostgreSQL: sign in, watch a job appear without a reload, open its
//! execution, retry a failure, pause a cron job and an endpoint, replay dead letters, and every
//! page at a phone's width with no console error. Screenshots of each page are written to
//! `target/dashboard-screenshots/` for a person to look at.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{immediate, wait_for_status};
use crate::support::server::API_KEY;
use crate::support::{Backend, Client, Receiver, Server, TestDb};

both_backends!(pages_answer_a_signed_in_key_and_refuse_everyone_else);

/// The first page load's budget: the HTML, the stylesheet and the script together.
const FIRST_LOAD_BYTES: u64 = 200 * 1024;

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Sign in with `key`; the session cookie (`te_ui=…`) when the key is accepted.
async fn sign_in(base: &str, key: &str) -> (u16, Option<String>) {
    let response = no_redirects()
        .post(format!("{base}/ui/login"))
        .form(&[("key", key), ("next", "/ui/jobs")])
        .send()
        .await
        .unwrap();
    let cookie = response.headers().get(SET_COOKIE).map(|v| v.to_str().unwrap().to_owned());
    (response.status().as_u16(), cookie)
}

async fn pages_answer_a_signed_in_key_and_refuse_everyone_else(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let base = &server.base_url;
    api.create("/secrets", &json!({"name": "token", "value": "dashboard-secret-value-9f2c"})).await;

    // Signed out: every page sends the browser to the login form, and comes back after.
    let page = no_redirects().get(format!("{base}/ui/jobs?status=ACTIVE")).send().await.unwrap();
    assert_eq!(page.status(), 303);
    assert_eq!(page.headers()[LOCATION], "/ui/login?next=%2Fui%2Fjobs%3Fstatus%3DACTIVE");
    assert_eq!(no_redirects().get(format!("{base}/ui/live")).send().await.unwrap().status(), 401);
    let (status, cookie) = sign_in(base, "not-a-key-of-this-service").await;
    assert_eq!((status, cookie), (401, None));

    let (status, cookie) = sign_in(base, API_KEY).await;
    assert_eq!(status, 303);
    let cookie = cookie.unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_owned();
    let get = |path: &str| no_redirects().get(format!("{base}{path}")).header(COOKIE, &session).send();
    for path in ["/ui", "/ui/jobs", "/ui/dead-letters", "/ui/endpoints", "/ui/plugins", "/ui/secrets"] {
        let page = get(path).await.unwrap();
        assert_eq!(page.status(), 200, "{path}");
        let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        let html = page.text().await.unwrap();
        assert!(!html.contains("dashboard-secret-value-9f2c"), "{path} shows a secret's value");
        assert!(html.contains("<main id=\"main\">"), "{path}: {html}");
    }
    assert!(get("/ui/secrets").await.unwrap().text().await.unwrap().contains("token"));
    // An endpoint's concurrency key, and the key an execution was given.
    api.create(
        "/endpoints",
        &json!({"name": "keyed", "type": "HTTP", "concurrency": {"key": "{{input.customer}}", "ordering": "fifo"},
                "spec": {"url": "http://127.0.0.1:9/x", "method": "POST"}}),
    )
    .await;
    let html = get("/ui/endpoints").await.unwrap().text().await.unwrap();
    assert!(html.contains("1 per key <code>{{input.customer}}</code>, in order"), "{html}");
    let keyed = api
        .create("/jobs", &json!({"endpoint": "keyed", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"customer": "c-42"}}))
        .await;
    let execution_id = keyed["execution"]["execution_id"].as_str().unwrap();
    let html = get(&format!("/ui/executions/{execution_id}")).await.unwrap().text().await.unwrap();
    assert!(html.contains("<code id=\"concurrency-key\">c-42</code>"), "{html}");
    assert_eq!(get("/ui/jobs/job_nope").await.unwrap().status(), 404);

    // A form without the session's token, or posted from another site, changes nothing.
    api.create(
        "/endpoints",
        &json!({"name": "e", "type": "HTTP", "spec": {"url": "http://127.0.0.1:9/x", "method": "POST"}}),
    )
    .await;
    let job = api
        .create(
            "/jobs",
            &json!({"endpoint": "e", "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC", "input": {}}),
        )
        .await;
    let job_id = job["job_id"].as_str().unwrap();
    let pause = |token: &str, origin: &str| {
        no_redirects()
            .post(format!("{base}/ui/jobs/{job_id}/pause"))
            .header(COOKIE, &session)
            .header("origin", origin)
            .form(&[("_csrf", token)])
            .send()
    };
    assert_eq!(pause("forged", base).await.unwrap().status(), 403);
    let html = get(&format!("/ui/jobs/{job_id}")).await.unwrap().text().await.unwrap();
    assert!(html.contains("At 09:00 AM"), "the schedule in words: {html}");
    let token = html.split("name=\"_csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    assert_eq!(pause(&token, "https://evil.example").await.unwrap().status(), 403);
    assert!(api.get(&format!("/jobs/{job_id}")).await.body["paused_at"].is_null());
    let paused = pause(&token, base).await.unwrap();
    assert_eq!(paused.status(), 303);
    assert!(!api.get(&format!("/jobs/{job_id}")).await.body["paused_at"].is_null());

    // Tenants: an operator's session picks the tenant its pages show; a tenant's key sees its own.
    api.create("/tenants", &json!({"name": "acme"})).await;
    let acme_endpoint =
        json!({"name": "acme-only", "type": "HTTP", "spec": {"url": "http://127.0.0.1:9/x", "method": "POST"}});
    let made =
        api.send_with(reqwest::Method::POST, "/endpoints", Some(&acme_endpoint), &[("taskexec-tenant", "acme")]).await;
    assert_eq!(made.status.as_u16(), 201, "{}", made.text);
    let html = get("/ui/endpoints").await.unwrap().text().await.unwrap();
    assert!(html.contains("id=\"tenant-picker\"") && html.contains("<option value=\"acme\""), "{html}");
    assert!(!html.contains("acme-only") && html.contains("keyed"), "the default tenant's until one is picked");
    let pick = |tenant: &str| {
        no_redirects()
            .post(format!("{base}/ui/tenant"))
            .header(COOKIE, &session)
            .form(&[("_csrf", token.as_str()), ("tenant", tenant)])
            .send()
    };
    let picked = pick("acme").await.unwrap();
    assert_eq!(picked.status(), 303);
    let picked_cookie = picked.headers()[SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_owned();
    assert_eq!(picked_cookie, "te_ui_tenant=acme");
    let within = format!("{session}; {picked_cookie}");
    let page = |path: &str| no_redirects().get(format!("{base}{path}")).header(COOKIE, &within).send();
    let html = page("/ui/endpoints").await.unwrap().text().await.unwrap();
    assert!(html.contains("acme-only") && !html.contains("keyed"), "acme's pages: {html}");
    assert!(html.contains("<option value=\"acme\" selected>"), "{html}");
    assert_eq!(page("/ui").await.unwrap().status(), 200);
    let unlisted = pick("beta").await.unwrap();
    assert!(unlisted.headers()[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"), "an unknown tenant picks none");

    let acme_key =
        api.create("/tenants/acme/api-keys", &json!({"role": "read"})).await["key"].as_str().unwrap().to_owned();
    let (_, acme_cookie) = sign_in(base, &acme_key).await;
    let acme_session = acme_cookie.unwrap().split(';').next().unwrap().to_owned();
    let html = no_redirects().get(format!("{base}/ui/endpoints")).header(COOKIE, &acme_session).send().await.unwrap();
    let html = html.text().await.unwrap();
    assert!(html.contains("acme-only") && !html.contains("keyed") && !html.contains("tenant-picker"), "{html}");
}

/// chromedriver on a free loopback port, and a headless Chromium session through it.
struct Chrome {
    driver: Child,
    browser: Option<Browser>,
}

impl Chrome {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (scripts/test installs Debian's chromium and chromium-driver)");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium",
                   "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}),
        );
        capabilities.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let browser = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(browser) => break browser,
                Err(e) if std::time::Instant::now() > deadline => panic!("no chromedriver session: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        Self { driver, browser: Some(browser) }
    }

    fn browser(&self) -> &Browser {
        self.browser.as_ref().unwrap()
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// chromedriver's browser log (`POST /session/{id}/se/log`), for console errors.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (reqwest::Method, Option<String>) {
        (reqwest::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

/// Console messages at SEVERE since the last call.
async fn console_errors(browser: &Browser) -> Vec<String> {
    let log = browser.issue_cmd(BrowserLog).await.unwrap();
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["level"] == "SEVERE")
        .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await.unwrap();
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

/// Wait (20 s at most) until `script` returns true in the page.
async fn until(browser: &Browser, what: &str, script: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if browser.execute(script, vec![]).await.unwrap() == Value::Bool(true) {
            return;
        }
        if std::time::Instant::now() > deadline {
            let page = browser.execute("return document.documentElement.outerHTML", vec![]).await.unwrap();
            let console = browser.issue_cmd(BrowserLog).await.unwrap();
            panic!("{what} did not happen within 20 s; console: {console}; page: {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Click the element `css` finds. A live update may swap the page's content between finding
/// and clicking; the click is then made again on the fresh element.
async fn click(browser: &Browser, css: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let clicked = match browser.wait().at_most(Duration::from_secs(20)).for_element(Locator::Css(css)).await {
            Ok(element) => element.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) if std::time::Instant::now() > deadline => panic!("clicking {css}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Wait until the page's notice says `text`.
async fn notice(browser: &Browser, text: &str) {
    let script = format!("return (document.querySelector('.notice') || {{}}).textContent?.includes({text:?}) === true");
    until(browser, &format!("the notice {text:?}"), &script).await;
}

async fn open(browser: &Browser, base: &str, path: &str) {
    browser.goto(&format!("{base}{path}")).await.unwrap();
}

async fn text(browser: &Browser) -> String {
    browser.find(Locator::Css("main")).await.unwrap().text().await.unwrap()
}

/// One browser session through the whole dashboard. PostgreSQL only: what the browser sees is
/// the same pages the HTTP test checks on both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start(&db).await;
    let api: Client = server.client();
    let receiver = Receiver::start().await;
    let base = server.base_url.clone();
    api.create(
        "/endpoints",
        &json!({"name": "hooks", "type": "HTTP", "retry_policy": {"max_attempts": 1},
                "spec": {"url": format!("{}/switch/dashboard", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let chrome = Chrome::start().await;
    let browser = chrome.browser();

    // Sign in: the login form, then the page asked for.
    open(browser, &base, "/ui/jobs").await;
    browser.wait().for_element(Locator::Css("input[name=key]")).await.unwrap();
    screenshot(browser, "01-login").await;
    browser.find(Locator::Css("input[name=key]")).await.unwrap().send_keys(API_KEY).await.unwrap();
    click(browser, "button[type=submit]").await;
    browser.wait().for_element(Locator::Css("table#jobs")).await.unwrap();
    until(browser, "the live connection", "return document.documentElement.dataset.live === 'connected'").await;

    // A job created through the API appears without a reload, and its execution fails.
    browser.execute("window.sameDocument = true; return true", vec![]).await.unwrap();
    let job = api.create("/jobs", &immediate("hooks", "first", json!({"n": 1}))).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &execution_id, "FAILED").await;
    let row = format!("tr[data-job='{job_id}']");
    until(browser, "the new job's row", &format!("return document.querySelector(\"{row}\") !== null")).await;
    until(
        browser,
        "its execution shown as failed",
        &format!("return (document.querySelector(\"{row}\") || {{}}).textContent.includes('FAILED')"),
    )
    .await;
    let same = browser.execute("return window.sameDocument === true", vec![]).await.unwrap();
    assert_eq!(same, Value::Bool(true), "the page was reloaded rather than updated");
    screenshot(browser, "02-jobs").await;

    // The job, then its failed execution: attempts, error and logs.
    click(browser, &format!("{row} a")).await;
    browser.wait().for_element(Locator::Css("table#executions")).await.unwrap();
    assert!(browser.find(Locator::Css("button#cancel")).await.is_err(), "a finished one-shot job offers Cancel");
    screenshot(browser, "03-job").await;
    click(browser, &format!("tr[data-execution='{execution_id}'] a")).await;
    browser.wait().for_element(Locator::Css("#execution-status")).await.unwrap();
    let page = text(browser).await;
    assert!(page.contains("FAILED") && page.contains("Attempt 1") && page.contains("503"), "{page}");
    screenshot(browser, "04-execution-failed").await;

    // Retry it once the receiver is well: the retry is queued and succeeds, shown live.
    receiver.heal("dashboard");
    click(browser, "button#retry").await;
    notice(browser, "this is its retry").await;
    let retried_url = browser.current_url().await.unwrap();
    assert!(!retried_url.path().ends_with(&execution_id), "the retry's own page: {retried_url}");
    until(
        browser,
        "the retry shown as succeeded",
        "return document.querySelector('#execution-status').textContent === 'SUCCESS'",
    )
    .await;
    screenshot(browser, "05-execution-retried").await;

    // An execution in flight is aborted from its page: its delivery stopped, not retried.
    api.create(
        "/endpoints",
        &json!({"name": "hangs", "type": "HTTP", "retry_policy": {"max_attempts": 3},
                "spec": {"url": format!("{}/hang/dashboard", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let hung = api.create("/jobs", &immediate("hangs", "hung", json!({"n": 2}))).await;
    let hung_id = hung["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &hung_id, "RUNNING").await;
    open(browser, &base, &format!("/ui/executions/{hung_id}")).await;
    click(browser, "button#abort").await;
    notice(browser, "Aborted").await;
    until(
        browser,
        "the execution shown as cancelled",
        "return document.querySelector('#execution-status').textContent === 'CANCELLED'",
    )
    .await;
    assert!(text(browser).await.contains("ABORTED"), "the attempt's error shown");

    // A cron job: its schedule in words and next ticks, then paused from its page.
    let cron = api
        .create(
            "/jobs",
            &json!({"endpoint": "hooks", "trigger": "CRON", "cron": "30 9 * * 1-5", "timezone": "Europe/Paris", "input": {}}),
        )
        .await;
    let cron_id = cron["job_id"].as_str().unwrap();
    open(browser, &base, &format!("/ui/jobs/{cron_id}")).await;
    let page = text(browser).await;
    assert!(page.contains("At 09:30 AM, Monday through Friday"), "{page}");
    assert_eq!(page.matches(" CET").count() + page.matches(" CEST").count(), 5, "five ticks in Paris time: {page}");
    browser.find(Locator::Css("button#cancel")).await.expect("an active cron job can be cancelled");
    click(browser, "button#trigger").await;
    notice(browser, "Fired now").await;
    let fired = api.get(&format!("/jobs/{cron_id}/executions")).await.body;
    assert_eq!(fired["items"][0]["trigger_reason"], "manual", "{fired}");
    until(
        browser,
        "the manual fire listed with its reason",
        "return [...document.querySelectorAll('td.reason')].some(td => td.textContent === 'manual')",
    )
    .await;
    click(browser, "button#pause").await;
    browser.wait().for_element(Locator::Css("#job-paused")).await.unwrap();
    assert!(!api.get(&format!("/jobs/{cron_id}")).await.body["paused_at"].is_null());
    browser.wait().for_element(Locator::Css("button#resume")).await.unwrap();
    screenshot(browser, "06-cron-job-paused").await;

    // Dead letters: a second failure, replayed in bulk by filter.
    api.create(
        "/endpoints",
        &json!({"name": "broken", "type": "HTTP", "retry_policy": {"max_attempts": 1},
                "spec": {"url": format!("{}/fail/x", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let failing = api.create("/jobs", &immediate("broken", "second", json!({}))).await;
    wait_for_status(&api, failing["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    open(browser, &base, "/ui/dead-letters?endpoint=broken").await;
    browser.wait().for_element(Locator::Css("table#failures")).await.unwrap();
    assert_eq!(browser.find_all(Locator::Css("table#failures tr[data-execution]")).await.unwrap().len(), 1);
    click(browser, "button#replay").await;
    notice(browser, "Queued 1 retry").await;
    screenshot(browser, "07-dead-letters").await;

    // A plugin with two versions, one endpoint pinned to the first and one on the newest.
    let bytes = std::fs::read(crate::e2e_plugins::component("webhook-signed")).unwrap();
    // The second version reuses instances.
    for (grant, reuse) in
        [("http%3A%2F%2F127.0.0.1%3A%2A", ""), ("http%3A%2F%2F127.0.0.2%3A%2A", "&calls_per_instance=16")]
    {
        let path = format!("/plugins?name=signer&allow_host={grant}{reuse}");
        let installed = api.send_raw(reqwest::Method::POST, &path, Some("application/wasm"), bytes.clone()).await;
        assert_eq!(installed.status, 201, "{}", installed.text);
    }
    for (name, plugin, host) in [("signed-pinned", "signer@1", "127.0.0.1"), ("signed-newest", "signer", "127.0.0.2")] {
        api.create(
            "/endpoints",
            &json!({"name": name, "type": "PLUGIN", "plugin": plugin,
                    "spec": {"url": format!("http://{host}:1/x"), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}),
        )
        .await;
    }

    api.create(
        "/jobs",
        &json!({"endpoint": "hooks", "trigger": "CRON", "cron": "0 0 1 1 *", "timezone": "UTC", "input": {}}),
    )
    .await;
    open(browser, &base, "/ui").await;
    let page = text(browser).await;
    assert!(page.contains("hooks") && page.contains("broken") && page.contains("-01-01 00:00:00 UTC"), "{page}");
    screenshot(browser, "08-overview").await;
    // An endpoint paused and resumed from the endpoints page.
    open(browser, &base, "/ui/endpoints").await;
    click(browser, "button#pause-broken").await;
    notice(browser, "Paused broken").await;
    assert!(api.get("/endpoints/broken").await.body["paused_at"].is_string());
    click(browser, "button#resume-broken").await;
    notice(browser, "Resumed broken").await;
    assert!(api.get("/endpoints/broken").await.body.get("paused_at").is_none());
    for (n, path) in [(9, "endpoints"), (10, "plugins"), (11, "secrets")] {
        open(browser, &base, &format!("/ui/{path}")).await;
        screenshot(browser, &format!("{n:02}-{path}")).await;
    }
    open(browser, &base, "/ui/plugins").await;
    let page = text(browser).await;
    for shown in [
        "signed-pinned (version 1)",
        "signed-newest (newest)",
        "http://127.0.0.2:*",
        "transport-plugin",
        "fresh per delivery",
        "reused, up to 16 deliveries per endpoint",
    ] {
        assert!(page.contains(shown), "{shown} not on the plugins page: {page}");
    }

    // The first load of a page: HTML, stylesheet and script within the budget.
    open(browser, &base, "/ui").await;
    let bytes = browser
        .execute(
            "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                 .reduce((sum, e) => sum + (e.transferSize || e.encodedBodySize || 0), 0)",
            vec![],
        )
        .await
        .unwrap();
    let bytes = bytes.as_u64().unwrap();
    assert!(bytes > 0 && bytes < FIRST_LOAD_BYTES, "the first load is {bytes} bytes");

    // A phone's width: no page is wider than the screen.
    browser.set_window_size(390, 844).await.unwrap();
    let pages = [
        ("overview", "/ui".to_owned()),
        ("jobs", "/ui/jobs".to_owned()),
        ("job", format!("/ui/jobs/{cron_id}")),
        ("execution", format!("/ui/executions/{execution_id}")),
        ("dead-letters", "/ui/dead-letters".to_owned()),
        ("endpoints", "/ui/endpoints".to_owned()),
    ];
    for (i, (page, path)) in pages.iter().enumerate() {
        open(browser, &base, path).await;
        let fits = browser
            .execute("return document.documentElement.scrollWidth <= window.innerWidth + 1", vec![])
            .await
            .unwrap();
        assert_eq!(fits, Value::Bool(true), "{path} is wider than a phone");
        screenshot(browser, &format!("{:02}-phone-{page}", 12 + i)).await;
    }
    let errors = console_errors(browser).await;
    assert!(errors.is_empty(), "console errors: {errors:?}");

    // Signing out ends the session.
    click(browser, "form.logout button").await;
    browser.wait().for_element(Locator::Css("input[name=key]")).await.unwrap();
    open(browser, &base, "/ui/jobs").await;
    browser.wait().for_element(Locator::Css("input[name=key]")).await.unwrap();
    let errors = console_errors(browser).await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let mut chrome = chrome;
    if let Some(browser) = chrome.browser.take() {
        browser.close().await.unwrap();
    }
}
