use super::*;

#[test]
fn every_template_parses() {
    let env = templates();
    for (name, _) in TEMPLATES {
        assert!(env.get_template(name).is_ok(), "{name}");
    }
}

#[test]
fn queries_leave_out_empty_filters_and_encode_the_rest() {
    assert_eq!(
        with_query("/jobs", &[("endpoint", Some("a b&c")), ("status", Some("")), ("x", None)]),
        "/jobs?endpoint=a+b%26c"
    );
    assert_eq!(with_query("/jobs", &[("status", None)]), "/jobs");
    assert_eq!(segment("../executions"), "..%2Fexecutions");
}

#[test]
fn attempts_share_one_time_axis() {
    let attempts = json!([
        {"started_at": "2026-11-24T10:00:00Z", "completed_at": "2026-11-24T10:00:01Z", "status": "FAILED"},
        {"started_at": "2026-11-24T10:00:09Z", "completed_at": "2026-11-24T10:00:10Z", "status": "SUCCESS"},
    ]);
    let bars = timeline(&attempts);
    assert_eq!(bars[0]["x"], json!(0.0));
    assert_eq!(bars[1]["x"], json!(266.4));
    assert_eq!(bars[1]["width"], json!(29.6));
    assert!(timeline(&json!([])).is_empty());
}
