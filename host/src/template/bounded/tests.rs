use super::*;
use serde_json::json;

/// Render `source` as written and as rewritten, in environments alike but for the checks.
fn both(source: &str, context: &serde_json::Value) -> (Result<String, String>, Result<String, String>) {
    let mut plain = crate::template::environment();
    plain.add_template_owned("t", source.to_owned()).unwrap();
    let before = plain.get_template("t").unwrap().render(context).map_err(|e| e.kind().to_string());
    let mut checked = crate::template::environment();
    install(&mut checked, DEFAULT_BUILD_BYTES);
    let rewritten = rewrite(source, DEFAULT_BUILD_BYTES).unwrap().source;
    checked.add_template_owned("t", rewritten).unwrap();
    let after = checked.get_template("t").unwrap().render(context).map_err(|e| e.kind().to_string());
    (before, after)
}

#[test]
fn templates_render_as_they_did() {
    let context = json!({"input": {"a": "x", "b": "yz", "n": 3, "f": 1.5, "list": [1, 2, 3], "s": "Hello World",
                                   "map": {"k": "v"}, "flag": true}});
    for source in [
        "{{ input.a ~ input.b }}",
        "{{ input.a ~ input.b * 2 }}",
        "{{ (input.a ~ input.b) * 2 }}",
        "{{ input.n * 2 + 1 }}",
        "{{ input.f * input.n }}",
        "{{ -input.n * 2 }}",
        "{{ input.list + [4] }}",
        "{{ (input.list + [4]) | join(',') }}",
        "{{ input.s|upper }}",
        "{{ input.s|replace('o', '0')|lower }}",
        "{{ input.s | replace('o', 'oo') | truncate(5) }}",
        "{{ input.list|map('string')|join('-') }}",
        "{{ input.s|indent(2, first=true) }}",
        "{{ '%s-%s'|format(input.a, input.b ~ '!') }}",
        "{{ input.a if input.flag else input.b ~ 'c' }}",
        "{{ input.s[1:4] ~ input.s[::-1] }}",
        "{{ {'k': input.a ~ input.b, 'n': input.n * 2}|tojson }}",
        "{{ [input.a ~ '1', input.b * 2]|tojson }}",
        "{{ input.map.k ~ input.map['k'] }}",
        "{% for i in input.list if i * 2 > 2 %}{{ i * 10 }}{{ loop.index ~ ',' }}{% endfor %}",
        "{% if input.n * 2 == 6 %}six{% else %}no{% endif %}",
        "{% set x = input.a ~ input.b %}{{ x * 2 }}",
        "{% with y = input.n + 1 %}{{ y }}{% endwith %}",
        "{{ range(3)|list|join(input.a ~ '') }}",
        "{{ input.missing ~ input.a }}",
        "{{ input.a ~ 1.5 ~ none ~ true }}",
        "{{ input.list|sum * 2 }}",
        "{{ input.s is startingwith('He' ~ 'l') }}",
        "{{ input.list | batch(2) | list | length }}",
        "{{ namespace(a=input.a ~ 'b').a }}",
    ] {
        let (before, after) = both(source, &context);
        assert_eq!(before, after, "{source}");
    }
}

#[test]
fn a_render_that_builds_past_its_budget_fails() {
    let context = json!({"input": {"s": "x"}});
    let cases = [
        "{% set s = input.s * 100000 %}{% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}\
         {% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}{{ s|length }}",
        "{{ (input.s * 10000000)|length }}",
        "{% set s = input.s * 1000000 %}{{ [s, s, s, s, s, s, s, s, s]|join(s)|length }}",
        "{{ range(100000)|join(input.s * 1000)|length }}",
        "{{ (input.s * 100000)|replace('x', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy')|length }}",
        "{{ input.s|center(100000000)|length }}",
        "{{ (input.s * 1000000)|list|length }}",
        "{% for i in range(100) %}{% set t = (input.s * 100000)|upper %}{% endfor %}",
    ];
    for source in cases {
        let mut env = crate::template::environment();
        install(&mut env, DEFAULT_BUILD_BYTES);
        env.add_template_owned("t", rewrite(source, DEFAULT_BUILD_BYTES).unwrap().source).unwrap();
        let error = env.get_template("t").unwrap().render(&context).unwrap_err();
        assert!(error.to_string().contains(TOO_LARGE), "{source}: {error}");
    }
}

#[test]
fn what_can_be_seen_to_be_too_large_or_unbounded_is_refused_when_compiled() {
    for (source, says) in [
        ("{{ 'x' * 100000000 }}", TOO_LARGE),
        ("{% set s %}{{ input.a }}{% endset %}", "endset"),
        ("{% filter upper %}x{% endfilter %}", "filter"),
        ("{% macro m() %}x{% endmacro %}{{ m() }}", "macro"),
        ("{% for x in input.l recursive %}{{ loop(x) }}{% endfor %}", "recursive"),
        ("{% include 'other' %}", "loads another"),
        ("{{ debug() }}", "secrets"),
    ] {
        let error = rewrite(source, DEFAULT_BUILD_BYTES).err().unwrap_or_else(|| panic!("{source} was accepted"));
        assert!(error.contains(says), "{source}: {error}");
    }
}
