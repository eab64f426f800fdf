//! Templates bounded in memory, not only in steps (fuel) and output.
//!
//! minijinja's fuel counts instructions and the render's writer caps what is output, but an
//! instruction can build a value of any size: `"x" * 100000000` is one step, and a chain of
//! `{% set s = s ~ s %}` doubles a string per step, so five lines grew a worker to gigabytes
//! without writing a byte. minijinja has no hook on its operators, so every templated string is
//! rewritten once, when its endpoint version is compiled, so that each operator that can build a
//! larger value than its operands, and every filter, is a call to a function of ours:
//!
//! - `a * b`, `a + b`, `a ~ b` become `__te_mul(a, b)`, `__te_add(a, b)`, `__te_concat(a, b)`;
//! - `x|f(args)` becomes `__te_filter("f", x, args)`.
//!
//! Each function charges the size of what it is about to build to the render's budget (the
//! bytes of strings, a few bytes per item of a list) *before* building it — where the size is
//! known from the operands (a repeat, a concatenation, `join`, `replace`, `center`, `indent`,
//! `list`, `format`, `tojson`, `urlencode`) — and otherwise after (filters whose result is no
//! larger than their input). Past the budget the render fails with a `TEMPLATE_TOO_LARGE`
//! message: permanent, not retried. The operators then do what minijinja does (each is
//! evaluated as the same expression minijinja would evaluate), so a template renders as it did.
//!
//! Also refused when a spec is compiled, so at registration too: blocks that capture output
//! into a value outside the render's writer (`{% set x %}…{% endset %}`, `{% filter %}`,
//! macros and `{% call %}`), templates that load others, recursive loops; a repeat of two
//! literals past the budget; and the `debug()` function, which prints the whole context,
//! secrets included.

use std::fmt::Write as _;
use std::sync::LazyLock;

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt};
use minijinja::machinery::Span;
use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

/// The bytes one render may build in values, all values together (`TE_RENDER_MAX_BUILD_BYTES`).
pub const DEFAULT_BUILD_BYTES: usize = 8 * 1024 * 1024;

/// What a list item is charged: the size of a value's slot, whatever it holds.
const ITEM_BYTES: usize = 16;

/// The render's running total, kept in minijinja's per-render temporary storage.
const SPENT: &str = "__te_built_bytes";

/// The start of the message of a render stopped by its budget (the worker reports it as is).
pub const TOO_LARGE: &str = "TEMPLATE_TOO_LARGE";

/// Register the checked operators and filter on `env`, and take away `debug()`.
pub fn install(env: &mut Environment<'static>, budget: usize) {
    env.remove_global("debug");
    env.add_function("__te_concat", move |state: &State, a: Value, b: Value| {
        charge(state, budget, display_len(&a, budget)?.saturating_add(display_len(&b, budget)?))?;
        evaluate(&CONCAT, a, b)
    });
    env.add_function("__te_add", move |state: &State, a: Value, b: Value| {
        charge(state, budget, added_size(&a, &b, budget)?)?;
        evaluate(&ADD, a, b)
    });
    env.add_function("__te_mul", move |state: &State, a: Value, b: Value| {
        charge(state, budget, repeated_size(&a, &b).max(repeated_size(&b, &a)))?;
        evaluate(&MUL, a, b)
    });
    env.add_function("__te_filter", move |state: &State, name: &str, args: Rest<Value>| {
        if let Some(size) = filter_size(name, &args, budget)? {
            charge(state, budget, size)?;
        }
        let result = state.apply_filter(name, &args)?;
        if !PRECHARGED.contains(&name) {
            charge(state, budget, value_size(&result, budget)?)?;
        }
        Ok(result)
    });
}

/// Filters whose result's size [`filter_size`] charges before they run.
const PRECHARGED: [&str; 9] =
    ["join", "replace", "center", "indent", "list", "format", "tojson", "te_json", "urlencode"];

/// The private environment the operators are evaluated in: the same rules as every template's
/// (strict undefined values), so an operator gives what minijinja gives, errors included.
static OPERATORS: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
});
static CONCAT: LazyLock<minijinja::Expression<'static, 'static>> =
    LazyLock::new(|| OPERATORS.compile_expression("a ~ b").expect("the expression compiles"));
static ADD: LazyLock<minijinja::Expression<'static, 'static>> =
    LazyLock::new(|| OPERATORS.compile_expression("a + b").expect("the expression compiles"));
static MUL: LazyLock<minijinja::Expression<'static, 'static>> =
    LazyLock::new(|| OPERATORS.compile_expression("a * b").expect("the expression compiles"));

fn evaluate(expression: &minijinja::Expression<'static, 'static>, a: Value, b: Value) -> Result<Value, Error> {
    expression.eval(minijinja::context! { a, b })
}

fn too_large(budget: usize) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{TOO_LARGE}: the template built more than {budget} bytes of values (TE_RENDER_MAX_BUILD_BYTES)"),
    )
}

/// Add `bytes` to the render's total; an error once it passes `budget`.
fn charge(state: &State, budget: usize, bytes: usize) -> Result<(), Error> {
    let spent = state.get_temp(SPENT).and_then(|v| v.as_usize()).unwrap_or(0);
    let spent = spent.saturating_add(bytes);
    if spent > budget {
        return Err(too_large(budget));
    }
    state.set_temp(SPENT, Value::from(spent));
    Ok(())
}

/// A writer that counts what is written and stops past a limit.
struct Counter {
    written: usize,
    limit: usize,
}

impl std::fmt::Write for Counter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.written = self.written.saturating_add(s.len());
        if self.written > self.limit {
            return Err(std::fmt::Error);
        }
        Ok(())
    }
}

/// How long `value` is as text (what `~` and `join` write), counted without building it; an
/// error past `budget`.
fn display_len(value: &Value, budget: usize) -> Result<usize, Error> {
    if let Some(s) = value.as_str() {
        return if s.len() > budget { Err(too_large(budget)) } else { Ok(s.len()) };
    }
    let mut counter = Counter { written: 0, limit: budget };
    match write!(counter, "{value}") {
        Ok(()) => Ok(counter.written),
        Err(_) => Err(too_large(budget)),
    }
}

/// What a value costs to hold: a string's bytes, a list's slots, nothing for the rest (numbers,
/// and objects minijinja builds lazily, which are charged as they are turned into text).
fn value_size(value: &Value, budget: usize) -> Result<usize, Error> {
    Ok(match value.kind() {
        ValueKind::String | ValueKind::Bytes => display_len(value, budget)?,
        ValueKind::Seq | ValueKind::Map => value.len().unwrap_or(0).saturating_mul(ITEM_BYTES),
        _ => 0,
    })
}

/// The size of `text * times` (or `list * times`) when `text` is a string or list and `times`
/// a count; 0 for numbers.
fn repeated_size(text: &Value, times: &Value) -> usize {
    let Some(times) = times.as_usize() else { return 0 };
    match text.kind() {
        ValueKind::String => text.as_str().map_or(0, str::len).saturating_mul(times),
        ValueKind::Seq | ValueKind::Iterable => {
            text.len().unwrap_or(1).saturating_mul(times).saturating_mul(ITEM_BYTES)
        }
        _ => 0,
    }
}

/// The size of `a + b`: strings joined, lists chained (slots), numbers nothing.
fn added_size(a: &Value, b: &Value, budget: usize) -> Result<usize, Error> {
    if a.kind() == ValueKind::String || b.kind() == ValueKind::String {
        return Ok(display_len(a, budget)?.saturating_add(display_len(b, budget)?));
    }
    let items = |v: &Value| v.len().unwrap_or(0);
    Ok(items(a).saturating_add(items(b)).saturating_mul(ITEM_BYTES))
}

/// What the filters that can build more than they are given will build, before they run.
fn filter_size(name: &str, args: &[Value], budget: usize) -> Result<Option<usize>, Error> {
    let arg = |i: usize| args.get(i).filter(|v| !v.is_kwargs());
    let input = args.first();
    Ok(Some(match name {
        "join" => {
            let Some(input) = input else { return Ok(None) };
            let separator = arg(1).map_or(Ok(0), |s| display_len(s, budget))?;
            let mut total = 0usize;
            if let Ok(items) = input.try_iter() {
                for (i, item) in items.enumerate() {
                    total = total.saturating_add(display_len(&item, budget)?);
                    if i > 0 {
                        total = total.saturating_add(separator);
                    }
                    if total > budget {
                        return Err(too_large(budget));
                    }
                }
            }
            total
        }
        "replace" => {
            let (Some(text), Some(old), Some(new)) = (input, arg(1), arg(2)) else { return Ok(None) };
            let (text, old, new) = (text.to_string(), old.to_string(), new.to_string());
            let matches = if old.is_empty() { text.chars().count() + 1 } else { text.matches(old.as_str()).count() };
            text.len().saturating_add(matches.saturating_mul(new.len()))
        }
        "center" | "indent" => {
            let Some(text) = input else { return Ok(None) };
            let width = arg(1).and_then(Value::as_usize).unwrap_or(80);
            let lines = text.as_str().map_or(1, |t| t.lines().count().max(1));
            display_len(text, budget)?.saturating_add(width.saturating_mul(lines))
        }
        "list" => {
            let Some(input) = input else { return Ok(None) };
            let items = match input.as_str() {
                Some(text) => text.chars().count(),
                None => input.len().unwrap_or(0),
            };
            items.saturating_mul(ITEM_BYTES)
        }
        "format" => {
            args.iter().try_fold(0usize, |total, a| Ok::<_, Error>(total.saturating_add(display_len(a, budget)?)))?
        }
        // JSON and percent-encoding write each byte as at most six.
        "tojson" | "te_json" | "urlencode" => {
            let Some(input) = input else { return Ok(None) };
            let mut counter = Counter { written: 0, limit: budget };
            let size = match serde_json::to_string(input) {
                Ok(json) => json.len(),
                Err(_) => match write!(counter, "{input}") {
                    Ok(()) => counter.written,
                    Err(_) => return Err(too_large(budget)),
                },
            };
            size.saturating_mul(if name == "urlencode" { 3 } else { 1 })
        }
        _ => return Ok(None),
    }))
}

/// A template rewritten, and the names of the variables it reads (`input`, `secret`, …).
pub struct Rewritten {
    pub source: String,
    pub reads: std::collections::BTreeSet<String>,
}

/// `source` (a template) rewritten so that its operators and filters are the checked
/// functions above; an error names what is refused.
pub fn rewrite(source: &str, budget: usize) -> Result<Rewritten, String> {
    let syntax = minijinja::syntax::SyntaxConfig;
    let whitespace = minijinja::machinery::WhitespaceConfig::default();
    let tree = minijinja::machinery::parse(source, "template", syntax, whitespace)
        .map_err(|e| format!("template syntax error: {}", e.detail().unwrap_or("invalid template")))?;
    let mut rewriter = Rewriter { source, budget, edits: Vec::new(), reads: Default::default() };
    rewriter.stmt(&tree)?;
    let mut out = String::with_capacity(source.len() + rewriter.edits.len() * 16);
    let mut at = 0;
    rewriter.edits.sort_by_key(|(start, _, _)| *start);
    for (start, end, text) in rewriter.edits {
        out.push_str(&source[at..start]);
        out.push_str(&text);
        at = end;
    }
    out.push_str(&source[at..]);
    Ok(Rewritten { source: out, reads: rewriter.reads })
}

struct Rewriter<'s> {
    source: &'s str,
    budget: usize,
    /// Replacements of whole top-level expressions: (start, end, new text); never overlapping.
    edits: Vec<(usize, usize, String)>,
    /// Every variable name an expression reads.
    reads: std::collections::BTreeSet<String>,
}

fn range(span: Span) -> (usize, usize) {
    (span.start_offset as usize, span.end_offset as usize)
}

impl<'s> Rewriter<'s> {
    fn refuse(what: &str) -> Result<(), String> {
        Err(format!(
            "{what} is not accepted in an endpoint spec's templates: it builds a value outside the render's \
             size checks"
        ))
    }

    fn stmts(&mut self, stmts: &[Stmt<'s>]) -> Result<(), String> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt<'s>) -> Result<(), String> {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.top(&e.expr),
            Stmt::EmitRaw(_) => Ok(()),
            Stmt::ForLoop(l) => {
                if l.recursive {
                    return Self::refuse("A recursive loop");
                }
                self.top(&l.iter)?;
                if let Some(filter) = &l.filter_expr {
                    self.top(filter)?;
                }
                self.stmts(&l.body)?;
                self.stmts(&l.else_body)
            }
            Stmt::IfCond(c) => {
                self.top(&c.expr)?;
                self.stmts(&c.true_body)?;
                self.stmts(&c.false_body)
            }
            Stmt::WithBlock(w) => {
                for (_, value) in &w.assignments {
                    self.top(value)?;
                }
                self.stmts(&w.body)
            }
            Stmt::Set(s) => self.top(&s.expr),
            Stmt::AutoEscape(a) => {
                self.top(&a.enabled)?;
                self.stmts(&a.body)
            }
            Stmt::Do(d) => self.top_call(&d.call),
            Stmt::SetBlock(_) => Self::refuse("`{% set NAME %}…{% endset %}`"),
            Stmt::FilterBlock(_) => Self::refuse("`{% filter %}`"),
            Stmt::Macro(_) => Self::refuse("`{% macro %}`"),
            Stmt::CallBlock(_) => Self::refuse("`{% call %}`"),
            Stmt::Block(_) | Stmt::Import(_) | Stmt::FromImport(_) | Stmt::Extends(_) | Stmt::Include(_) => {
                Self::refuse("A template that loads another (`block`, `import`, `extends`, `include`)")
            }
        }
    }

    /// A whole expression in a statement: replaced by its rewritten text.
    fn top(&mut self, expr: &Expr<'s>) -> Result<(), String> {
        let (start, end) = full_range(self.source, expr);
        let text = self.expr(expr)?;
        if text != self.source[start..end] {
            self.edits.push((start, end, text));
        }
        Ok(())
    }

    fn top_call(&mut self, call: &ast::Spanned<ast::Call<'s>>) -> Result<(), String> {
        let mut children = vec![&call.expr];
        children.extend(call.args.iter().map(arg_expr));
        let (mut start, mut end) = range(call.span());
        for child in &children {
            let (s, e) = full_range(self.source, child);
            (start, end) = (start.min(s), end.max(e));
        }
        let text = self.splice_range(start, end, &children)?;
        self.edits.push((start, end, text));
        Ok(())
    }

    /// The text of `expr` with its checked operators and filters rewritten.
    fn expr(&mut self, expr: &Expr<'s>) -> Result<String, String> {
        Ok(match expr {
            Expr::BinOp(op) if matches!(op.op, BinOpKind::Mul | BinOpKind::Add | BinOpKind::Concat) => {
                if let (BinOpKind::Mul, Expr::Const(a), Expr::Const(b)) = (&op.op, &op.left, &op.right) {
                    if repeated_size(&a.value, &b.value).max(repeated_size(&b.value, &a.value)) > self.budget {
                        return Err(format!(
                            "{TOO_LARGE}: this repeat builds more than {} bytes (TE_RENDER_MAX_BUILD_BYTES)",
                            self.budget
                        ));
                    }
                }
                let function = match op.op {
                    BinOpKind::Mul => "__te_mul",
                    BinOpKind::Add => "__te_add",
                    _ => "__te_concat",
                };
                format!("{function}({}, {})", self.expr(&op.left)?, self.expr(&op.right)?)
            }
            Expr::Filter(f) => {
                let Some(input) = &f.expr else { return Ok(self.slice(expr)) };
                let mut text = format!("__te_filter({:?}, {}", f.name, self.expr(input)?);
                for arg in &f.args {
                    text.push_str(", ");
                    text.push_str(&self.arg(arg)?);
                }
                text.push(')');
                text
            }
            Expr::Call(c) => {
                if let Expr::Var(v) = &c.expr {
                    if v.id == "debug" {
                        return Err("`debug()` is not available in endpoint specs: it prints every value the \
                                    template can read, secrets included"
                            .to_owned());
                    }
                }
                self.splice(expr, &children(expr))?
            }
            Expr::Var(v) => {
                self.reads.insert(v.id.to_owned());
                self.slice(expr)
            }
            Expr::Const(_) => self.slice(expr),
            _ => self.splice(expr, &children(expr))?,
        })
    }

    fn arg(&mut self, arg: &CallArg<'s>) -> Result<String, String> {
        Ok(match arg {
            CallArg::Pos(e) => self.expr(e)?,
            CallArg::Kwarg(name, e) => format!("{name}={}", self.expr(e)?),
            CallArg::PosSplat(e) => format!("*{}", self.expr(e)?),
            CallArg::KwargSplat(e) => format!("**{}", self.expr(e)?),
        })
    }

    fn slice(&self, expr: &Expr<'s>) -> String {
        let (start, end) = full_range(self.source, expr);
        self.source[start..end].to_owned()
    }

    /// `expr`'s own text with each child's text replaced by the child rewritten.
    fn splice(&mut self, expr: &Expr<'s>, children: &[&Expr<'s>]) -> Result<String, String> {
        let (start, end) = full_range(self.source, expr);
        self.splice_range(start, end, children)
    }

    fn splice_range(&mut self, start: usize, end: usize, children: &[&Expr<'s>]) -> Result<String, String> {
        let mut parts: Vec<(usize, usize, String)> = Vec::with_capacity(children.len());
        for child in children {
            let (child_start, child_end) = full_range(self.source, child);
            let text = self.expr(child)?;
            if text != self.source[child_start..child_end] {
                parts.push((child_start, child_end, text));
            }
        }
        parts.sort_by_key(|(s, _, _)| *s);
        let mut out = String::new();
        let mut at = start;
        for (child_start, child_end, text) in parts {
            if child_start < at || child_end > end {
                // Children that overlap: the parser's spans are not what this rewrite expects,
                // so refuse rather than guess.
                return Err("this template could not be checked for its size (unexpected layout)".to_owned());
            }
            out.push_str(&self.source[at..child_start]);
            out.push_str(&text);
            at = child_end;
        }
        out.push_str(&self.source[at..end]);
        Ok(out)
    }
}

/// The expressions directly inside `expr`, in source order.
fn children<'a, 's>(expr: &'a Expr<'s>) -> Vec<&'a Expr<'s>> {
    let mut out: Vec<&Expr<'s>> = Vec::new();
    match expr {
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Slice(s) => {
            out.push(&s.expr);
            out.extend(s.start.iter().chain(s.stop.iter()).chain(s.step.iter()));
        }
        Expr::UnaryOp(u) => out.push(&u.expr),
        Expr::BinOp(op) => out.extend([&op.left, &op.right]),
        Expr::Compare(c) => {
            out.push(&c.expr);
            out.extend(c.ops.iter().map(|o| &o.expr));
        }
        Expr::IfExpr(i) => {
            out.extend([&i.test_expr, &i.true_expr]);
            out.extend(i.false_expr.iter());
        }
        Expr::Filter(f) => {
            out.extend(f.expr.iter());
            out.extend(f.args.iter().map(arg_expr));
        }
        Expr::Test(t) => {
            out.push(&t.expr);
            out.extend(t.args.iter().map(arg_expr));
        }
        Expr::GetAttr(g) => out.push(&g.expr),
        Expr::GetItem(g) => out.extend([&g.expr, &g.subscript_expr]),
        Expr::Call(c) => {
            out.push(&c.expr);
            out.extend(c.args.iter().map(arg_expr));
        }
        Expr::List(l) => out.extend(l.items.iter()),
        Expr::Map(m) => {
            for (k, v) in m.keys.iter().zip(m.values.iter()) {
                out.extend([k, v]);
            }
        }
    }
    out
}

/// Where `expr`'s text is, whole: its own span widened to take in every expression inside it
/// (a filter's span, for one, leaves out the value it filters), and the parentheses around a
/// part of it (`(a) | f`: the span of `a` leaves them out).
fn full_range(source: &str, expr: &Expr<'_>) -> (usize, usize) {
    let (mut start, mut end) = range(expr.span());
    for child in children(expr) {
        let (s, e) = full_range(source, child);
        (start, end) = (start.min(s), end.max(e));
    }
    balance(source, start, end)
}

/// `start..end` widened over the parentheses it closes without opening, or opens without
/// closing (quotes skipped).
fn balance(source: &str, mut start: usize, mut end: usize) -> (usize, usize) {
    let bytes = source.as_bytes();
    let (mut depth, mut lowest) = (0i32, 0i32);
    let mut quote: Option<u8> = None;
    let mut i = start;
    while i < end {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'(' => depth += 1,
            None if b == b')' => {
                depth -= 1;
                lowest = lowest.min(depth);
            }
            None => {}
        }
        i += 1;
    }
    for _ in 0..-lowest {
        while start > 0 && bytes[start - 1].is_ascii_whitespace() {
            start -= 1;
        }
        if start > 0 && bytes[start - 1] == b'(' {
            start -= 1;
        }
    }
    for _ in 0..(depth - lowest) {
        while end < bytes.len() && bytes[end].is_ascii_whitespace() {
            end += 1;
        }
        if end < bytes.len() && bytes[end] == b')' {
            end += 1;
        }
    }
    (start, end)
}

fn arg_expr<'a, 's>(arg: &'a CallArg<'s>) -> &'a Expr<'s> {
    match arg {
        CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => e,
    }
}

#[cfg(test)]
mod tests;
