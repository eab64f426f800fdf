//! What a payload spec may cost to validate against, checked when it is created.
//!
//! JSON Schema validation can be made exponential by a small schema: a `$ref` cycle recurses
//! without end, references that each point twice at the next (`a1 = anyOf[a0, a0]`,
//! `a2 = anyOf[a1, a1]`, …) expand to 2^n subschemas from n lines, and nested combinators
//! (`anyOf` in `anyOf` …) make the validator evaluate each level again to explain its failure.
//! So a spec is refused (`422 INVALID_SCHEMA`, naming the path) when:
//! - a `$ref` leads back to a schema it is inside of (a cycle), or points outside the document;
//! - the schema, with every `$ref` expanded in place, has more than `max_subschemas` subschemas;
//! - combinators (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`) nest deeper than
//!   `max_combinator_depth`, counted through `$ref`s.
//!
//! With these bounds, validating an input costs at most about (subschemas × combinator depth)
//! steps per input value; `validators` runs it off the async runtime under a time budget.

use std::collections::HashMap;

use serde_json::Value;

/// The bounds a payload spec is held to (`TE_SCHEMA_MAX_SUBSCHEMAS`,
/// `TE_SCHEMA_MAX_COMBINATOR_DEPTH`).
#[derive(Debug, Clone, Copy)]
pub struct SchemaLimits {
    pub max_subschemas: usize,
    pub max_combinator_depth: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        Self { max_subschemas: 10_000, max_combinator_depth: 16 }
    }
}

/// Why a schema is refused, and where (a JSON pointer into the schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaCostError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for SchemaCostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "/" } else { &self.path };
        write!(f, "at `{path}`: {}", self.message)
    }
}

/// Keywords whose value is one subschema applied to the instance (or a part of it).
const ONE: [&str; 12] = [
    "not",
    "if",
    "then",
    "else",
    "items",
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const MANY: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is an object of subschemas.
const MAP: [&str; 4] = ["properties", "patternProperties", "dependentSchemas", "dependencies"];
/// Keywords that make the validator try subschemas against the same value.
const COMBINATORS: [&str; 6] = ["allOf", "anyOf", "oneOf", "not", "if", "then"];
/// References to another place in the document.
const REFS: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];

/// Check `schema` against `limits`.
pub fn check(schema: &Value, limits: SchemaLimits) -> Result<(), SchemaCostError> {
    let mut walk = Walk { root: schema, limits, done: HashMap::new(), open: Vec::new(), anchors: HashMap::new() };
    collect_anchors(schema, String::new(), &mut walk.anchors);
    walk.cost(schema, String::new()).map(|_| ())
}

/// A subschema's cost: subschemas once every `$ref` is expanded, and combinator nesting.
#[derive(Debug, Clone, Copy)]
struct Cost {
    subschemas: usize,
    depth: usize,
}

struct Walk<'a> {
    root: &'a Value,
    limits: SchemaLimits,
    /// Costs of the subschemas already walked, by pointer: a DAG of references is walked once.
    done: HashMap<String, Cost>,
    /// The pointers being walked (the current path through references): one met again is a cycle.
    open: Vec<String>,
    /// `$anchor` names (and draft-7 `"$id": "#name"`) and the pointers they name.
    anchors: HashMap<String, String>,
}

impl<'a> Walk<'a> {
    fn cost(&mut self, node: &'a Value, pointer: String) -> Result<Cost, SchemaCostError> {
        if let Some(cost) = self.done.get(&pointer) {
            return Ok(*cost);
        }
        let Value::Object(map) = node else {
            return Ok(Cost { subschemas: 1, depth: 0 });
        };
        self.open.push(pointer.clone());
        let mut total = Cost { subschemas: 1, depth: 0 };
        let add = |total: &mut Cost, child: Cost, combinator: bool| {
            total.subschemas = total.subschemas.saturating_add(child.subschemas);
            total.depth = total.depth.max(child.depth + usize::from(combinator));
        };
        for (keyword, value) in map {
            let here = format!("{pointer}/{}", escape(keyword));
            let combinator = COMBINATORS.contains(&keyword.as_str()) || keyword == "else";
            if REFS.contains(&keyword.as_str()) {
                let Some(reference) = value.as_str() else { continue };
                let target = self.resolve(reference, &here)?;
                if self.open.contains(&target) {
                    return Err(SchemaCostError {
                        path: here,
                        message: format!(
                            "`{reference}` refers to a schema this one is inside of (a cycle); \
                             recursive payload specs are not accepted"
                        ),
                    });
                }
                let node = lookup(self.root, &target).expect("resolve checked the target exists");
                let child = self.cost(node, target)?;
                add(&mut total, child, false);
                continue;
            }
            if MANY.contains(&keyword.as_str()) {
                if let Value::Array(items) = value {
                    for (i, item) in items.iter().enumerate() {
                        let child = self.cost(item, format!("{here}/{i}"))?;
                        add(&mut total, child, combinator);
                    }
                    continue;
                }
            }
            if ONE.contains(&keyword.as_str()) && (value.is_object() || value.is_boolean()) {
                let child = self.cost(value, here)?;
                add(&mut total, child, combinator);
            } else if MAP.contains(&keyword.as_str()) {
                if let Value::Object(entries) = value {
                    for (name, item) in entries {
                        if item.is_object() || item.is_boolean() {
                            let child = self.cost(item, format!("{here}/{}", escape(name)))?;
                            add(&mut total, child, false);
                        }
                    }
                }
            }
        }
        self.open.pop();
        if total.subschemas > self.limits.max_subschemas {
            return Err(SchemaCostError {
                path: pointer,
                message: format!(
                    "with its `$ref`s expanded this schema has more than {} subschemas \
                     (TE_SCHEMA_MAX_SUBSCHEMAS): each is checked against the input",
                    self.limits.max_subschemas
                ),
            });
        }
        if total.depth > self.limits.max_combinator_depth {
            return Err(SchemaCostError {
                path: pointer,
                message: format!(
                    "allOf/anyOf/oneOf/not/if nest more than {} deep here, counting through `$ref`s \
                     (TE_SCHEMA_MAX_COMBINATOR_DEPTH)",
                    self.limits.max_combinator_depth
                ),
            });
        }
        self.done.insert(pointer, total);
        Ok(total)
    }

    /// The pointer a same-document reference names (`#`, `#/json/pointer`, `#anchor`).
    fn resolve(&self, reference: &str, at: &str) -> Result<String, SchemaCostError> {
        let refused = |message: String| SchemaCostError { path: at.to_owned(), message };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(refused(format!(
                "`{reference}` is not a reference within this schema: payload specs use `#/…` pointers \
                 or `#name` anchors (nothing is fetched)"
            )));
        };
        let fragment = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
        let pointer = if fragment.is_empty() || fragment.starts_with('/') {
            fragment.into_owned()
        } else {
            match self.anchors.get(fragment.as_ref()) {
                Some(pointer) => pointer.clone(),
                None => return Err(refused(format!("`{reference}`: no `$anchor` of that name"))),
            }
        };
        if lookup(self.root, &pointer).is_none() {
            return Err(refused(format!("`{reference}` points at nothing in this schema")));
        }
        Ok(pointer)
    }
}

fn lookup<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    if pointer.is_empty() {
        Some(root)
    } else {
        root.pointer(pointer)
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Every `$anchor` (and draft-7 `"$id": "#name"`) in `node`, with its pointer.
fn collect_anchors(node: &Value, pointer: String, anchors: &mut HashMap<String, String>) {
    match node {
        Value::Object(map) => {
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(name) = map.get(key).and_then(Value::as_str) {
                    anchors.entry(name.to_owned()).or_insert_with(|| pointer.clone());
                }
            }
            if let Some(name) = map.get("$id").and_then(Value::as_str).and_then(|id| id.strip_prefix('#')) {
                anchors.entry(name.to_owned()).or_insert_with(|| pointer.clone());
            }
            for (key, value) in map {
                collect_anchors(value, format!("{pointer}/{}", escape(key)), anchors);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_anchors(item, format!("{pointer}/{i}"), anchors);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_default(schema: Value) -> Result<(), SchemaCostError> {
        check(&schema, SchemaLimits::default())
    }

    #[test]
    fn ordinary_schemas_pass() {
        check_default(json!(true)).unwrap();
        check_default(json!({
            "type": "object",
            "$defs": {"money": {"type": "object", "properties": {"amount": {"type": "number"}}}},
            "properties": {"price": {"$ref": "#/$defs/money"}, "cost": {"$ref": "#/$defs/money"},
                           "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            "required": ["price"]
        }))
        .unwrap();
        check_default(json!({"$defs": {"a": {"$anchor": "thing", "type": "string"}}, "items": {"$ref": "#thing"}}))
            .unwrap();
    }

    #[test]
    fn a_ref_cycle_is_refused_at_the_ref_that_closes_it() {
        let error = check_default(json!({"$defs": {"node": {"properties": {"next": {"$ref": "#/$defs/node"}}}},
                                          "$ref": "#/$defs/node"}))
        .unwrap_err();
        assert_eq!(error.path, "/$defs/node/properties/next/$ref");
        assert!(error.message.contains("cycle"), "{error}");
        let error = check_default(json!({"items": {"$ref": "#"}})).unwrap_err();
        assert_eq!(error.path, "/items/$ref");
    }

    #[test]
    fn refs_outside_the_document_or_to_nothing_are_refused() {
        assert!(check_default(json!({"$ref": "https://example.com/s.json"})).unwrap_err().message.contains("within"));
        assert!(check_default(json!({"$ref": "#/$defs/missing"})).unwrap_err().message.contains("nothing"));
        assert!(check_default(json!({"$ref": "#nope"})).unwrap_err().message.contains("anchor"));
    }

    #[test]
    fn a_doubling_chain_of_refs_is_refused_by_its_expanded_size() {
        // 2^20 subschemas from 20 definitions of a few bytes each.
        let mut defs = serde_json::Map::new();
        defs.insert("a0".into(), json!({"type": "string"}));
        for i in 1..=20 {
            let prev = format!("#/$defs/a{}", i - 1);
            defs.insert(format!("a{i}"), json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}));
        }
        let schema = json!({"$defs": defs, "$ref": "#/$defs/a20"});
        let error = check(&schema, SchemaLimits { max_subschemas: 10_000, max_combinator_depth: 64 }).unwrap_err();
        assert!(error.message.contains("more than 10000 subschemas"), "{error}");
        assert!(error.path.starts_with("/$defs/a"), "{error}");
    }

    #[test]
    fn deep_combinator_nesting_is_refused_naming_where() {
        let mut schema = json!({"type": "string"});
        for _ in 0..17 {
            schema = json!({"anyOf": [schema, {"type": "number"}]});
        }
        let error = check_default(schema).unwrap_err();
        assert!(error.message.contains("nest more than 16"), "{error}");
        assert_eq!(error.path, "");
    }
}
