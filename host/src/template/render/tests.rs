use super::*;
use serde_json::json;

fn context() -> RenderContext {
    RenderContext {
        input: json!({"user": {"name": "Ada", "id": 7}, "amount": 12.5, "tags": ["a", "b"], "flag": true, "none": null,
                      "evil": "{{secret.api_key}}"}),
        config: json!({"api_base_url": "https://api.example.com", "max_len": 1000}),
        secrets: BTreeMap::from([("api_key".to_owned(), SecretValue::new("sk-live-SECRET".to_owned()))]),
    }
}

fn render(template: Value) -> Result<Value, RenderError> {
    CompiledTemplate::compile(&template).unwrap().render(&context())
}

#[test]
fn input_in_a_url_cannot_change_its_host_scheme_or_port() {
    let mut ctx = context();
    ctx.input = json!({"id": "x@evil.example:99/../admin?y=1#z", "n": 7});
    let spec = json!({"spec": {
        "url": "{{config.api_base_url}}/users/{{input.id}}?n={{input.n}}",
        "body": "{{input.id}}"
    }});
    let out = CompiledTemplate::compile(&spec["spec"]).unwrap().render(&ctx).unwrap();
    let url = out["url"].as_str().unwrap();
    assert_eq!(url, "https://api.example.com/users/x%40evil.example%3A99%2F..%2Fadmin%3Fy%3D1%23z?n=7");
    let parsed = url::Url::parse(url).unwrap();
    assert_eq!((parsed.host_str(), parsed.port()), (Some("api.example.com"), None));
    // Outside URL fields, input is used as it is.
    assert_eq!(out["body"], "x@evil.example:99/../admin?y=1#z");
}

#[test]
fn a_render_bomb_runs_out_of_its_budget_naming_the_field() {
    let mut ctx = context();
    ctx.input = json!({"items": (0..1000).collect::<Vec<_>>()});
    let bomb = json!({"body": {"x": "{% for a in input.items %}{% for b in input.items %}.{% endfor %}{% endfor %}"}});
    let err = CompiledTemplate::compile(&bomb).unwrap().render(&ctx).unwrap_err();
    assert!(err.message.contains("spec.body.x") && err.message.contains("steps"), "{}", err.message);
    // A loop over the same input once is well within it.
    let fine = json!({"x": "{% for a in input.items %}{{ a }},{% endfor %}"});
    assert!(CompiledTemplate::compile(&fine).unwrap().render(&ctx).is_ok());
}

#[test]
fn a_spec_rendering_past_its_size_budget_fails() {
    let big = json!({"a": "{{ 'x' * 600000 }}", "b": "{{ 'y' * 600000 }}"});
    let err = render(big).unwrap_err();
    assert!(err.message.contains("larger than"), "{}", err.message);
}

#[test]
fn namespaces_and_nested_paths() {
    let out = render(json!({
        "url": "{{config.api_base_url}}/users/{{input.user.id}}",
        "auth": "Bearer {{secret.api_key}}",
        "name": "{{ input.user.name }}",
    }))
    .unwrap();
    assert_eq!(out, json!({"url": "https://api.example.com/users/7", "auth": "Bearer sk-live-SECRET", "name": "Ada"}));
}

#[test]
fn a_whole_expression_keeps_its_json_type() {
    let out = render(json!({
        "amount": "{{input.amount}}", "id": "{{input.user.id}}", "flag": "{{input.flag}}", "none": "{{input.none}}",
        "tags": "{{input.tags}}", "user": "{{input.user}}", "max_len": "{{config.max_len}}",
        "text": "amount: {{input.amount}}", "spaced": " {{input.amount}}", "filtered": "{{ input.user.name | upper }}",
    }))
    .unwrap();
    assert_eq!(out["amount"], json!(12.5));
    assert_eq!(out["id"], json!(7));
    assert_eq!(out["flag"], json!(true));
    assert_eq!(out["none"], json!(null));
    assert_eq!(out["tags"], json!(["a", "b"]));
    assert_eq!(out["user"], json!({"name": "Ada", "id": 7}));
    assert_eq!(out["max_len"], json!(1000));
    assert_eq!(out["text"], json!("amount: 12.5"));
    assert_eq!(out["spaced"], json!(" 12.5"));
    assert_eq!(out["filtered"], json!("ADA"));
}

#[test]
fn strict_undefined_names_the_variable() {
    for (template, variable) in [
        ("{{input.missing}}", "input.missing"),
        ("hello {{input.user.surname}}", "input.user.surname"),
        ("{{config.nope}}", "config.nope"),
        ("{{secret.other}}", "secret.other"),
    ] {
        let err = render(json!({"x": template})).unwrap_err();
        assert_eq!(err.variable.as_deref(), Some(variable), "{template}: {}", err.message);
        assert!(err.message.contains(variable));
    }
}

#[test]
fn substituted_values_are_not_rendered_again() {
    let out = render(json!({"v": "{{input.evil}}", "w": "x{{input.evil}}"})).unwrap();
    assert_eq!(out, json!({"v": "{{secret.api_key}}", "w": "x{{secret.api_key}}"}));
}

#[test]
fn a_secret_never_appears_in_an_error() {
    let err = render(json!({"x": "{{secret.api_key}}{{ input.missing }}"})).unwrap_err();
    assert!(!err.message.contains("sk-live-SECRET"), "{}", err.message);
    let ctx = context();
    assert_eq!(ctx.redact("got sk-live-SECRET back"), "got [redacted] back");
}

#[test]
fn a_secret_can_only_be_substituted_as_it_is() {
    for template in [
        "{{ secret.api_key | upper }}",
        "{{ secret.api_key|list|join(' ') }}",
        "{{ secret.api_key | reverse }}",
        "{{ secret.api_key[::-1] }}",
        "{{ secret.api_key ~ 'x' }}",
        "{{ secret.api_key | int + 1 }}",
        "{% for c in secret.api_key %}{{ c }} {% endfor %}",
        "{% if secret.api_key %}yes{% endif %}",
        "Bearer {{ secret.api_key }}{% if input.flag %}!{% endif %}",
    ] {
        let err = CompiledTemplate::compile(&json!({"headers": {"X": template}})).err().expect(template);
        assert_eq!(err.field, "spec.headers.X", "{template}");
        assert_eq!(err.message, SECRET_AS_IS, "{template}");
    }
    for template in ["{{secret.api_key}}", "Bearer {{ secret.api_key }}", "{{ secret.api_key }}:{{input.user.id}}"] {
        CompiledTemplate::compile(&json!({"x": template})).unwrap_or_else(|e| panic!("{template}: {}", e.message));
    }
    assert_eq!(render(json!({"x": "Bearer {{ secret.api_key }}"})).unwrap(), json!({"x": "Bearer sk-live-SECRET"}));
}

#[test]
fn compiled_once_per_endpoint_version() {
    let renderer = MinijinjaRenderer::new();
    let key = TemplateKey { endpoint: "e".into(), version: 1 };
    let template = json!({"a": "{{input.amount}}"});
    let first = renderer.compiled(&key, &template).unwrap();
    let second = renderer.compiled(&key, &template).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    let v2 = renderer.compiled(&TemplateKey { endpoint: "e".into(), version: 2 }, &template).unwrap();
    assert!(!Arc::ptr_eq(&first, &v2));
    assert_eq!(renderer.cached_count(), 2);
}

#[test]
fn strings_that_only_read_variables_render_as_minijinja_renders_them() {
    let mut ctx = context();
    ctx.input = json!({
        "user": {"name": "Ada Lovelace", "id": 7}, "amount": 12.5, "whole": 2.0, "big": u64::MAX, "neg": -5,
        "tags": ["a", "b/c"], "flag": true, "none": null, "empty": "",
        "weird": "a/b?c=d&e#f ü \" \\ {{secret.api_key}} %41", "nested": {"a": [1, {"b": "c/d"}]}
    });
    let templates = [
        "{{input.user.name}}",
        "{{ input.amount }}",
        "{{input.whole}}",
        "{{input.big}}",
        "{{input.neg}}",
        "{{input.user}}",
        "{{input}}",
        "{{input.tags}}",
        "{{input.none}}",
        "{{input.flag}}",
        "{{input.empty}}",
        "{{input.weird}}",
        "{{input.nested}}",
        "x{{input.none}}",
        "x{{input.flag}}",
        "x{{input.amount}}",
        "x{{input.whole}}",
        "n={{input.user.id}}&b={{input.big}}&m={{input.neg}}",
        "t={{input.tags}}",
        "{{input.missing}}",
        "x {{input.user.missing}} y",
        "{{input.user.name.first}}",
        "{{input.tags.a}}",
        "{{config.api_base_url}}/users/{{input.user.name}}?w={{input.weird}}",
        "{{config.max_len}}",
        "{{config.nope}}",
        "Bearer {{secret.api_key}}",
        "{{secret.api_key}}",
        "{{secret.other}}",
        "a }} b {{input.user.name}}",
        "{{ input.user.name | upper }}",
        "{{input.user.name}}\n",
    ];
    for template in templates {
        let spec = json!({"url": template, "body": {"v": template}});
        let direct = CompiledTemplate::compile(&spec).unwrap();
        let minijinja = CompiledTemplate { minijinja_only: true, ..CompiledTemplate::compile(&spec).unwrap() };
        let outcome = |t: &CompiledTemplate| t.render(&ctx).map_err(|e| (e.message, e.variable));
        assert_eq!(outcome(&direct), outcome(&minijinja), "{template}");
    }
}

#[test]
fn literals_pass_through_untouched() {
    let t = json!({"n": 1, "s": "plain {text}", "a": [true, null, "x"]});
    assert_eq!(render(t.clone()).unwrap(), t);
}
