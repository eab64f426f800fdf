//! Cursor pagination for every list: `?limit=` (default 50, at most 200) and `?cursor=`, answered
//! with `{ "items": [...], "cursor": "..." }`. The cursor is opaque to clients: base64 of the
//! last row's creation time and key. Paging walks (created_at, key) order, so rows created
//! while a client pages appear at the end and never shift or repeat a page. Jobs and
//! executions may also be listed newest first (`?order=newest`): the same walk backwards,
//! with the same cursor (pass the same `order` again).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::api::error::ApiError;
use crate::store::{PageKey, PageRequest};

/// `?order=` of the lists that offer it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListOrder {
    /// Oldest first (the default).
    #[default]
    Oldest,
    /// Newest first.
    Newest,
}

impl ListOrder {
    /// `page` in this order.
    pub fn apply(order: Option<Self>, mut page: PageRequest) -> PageRequest {
        page.newest_first = order == Some(Self::Newest);
        page
    }
}

pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 200;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Items per page: 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// The `cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ListOut<T> {
    pub items: Vec<T>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    pub cursor: Option<String>,
}

impl ListParams {
    /// The page to fetch: one row more than the limit, to learn whether another page exists.
    pub fn page_request(&self) -> Result<PageRequest, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::invalid_field("limit", format!("must be between 1 and {MAX_LIMIT}, got {limit}")));
        }
        let after = self.cursor.as_deref().filter(|c| !c.is_empty()).map(decode_cursor).transpose()?;
        Ok(PageRequest { after, limit: i64::from(limit) + 1, ..Default::default() })
    }
}

#[derive(Serialize, Deserialize)]
struct CursorBody {
    t: DateTime<Utc>,
    k: String,
}

fn encode_cursor(key: &PageKey) -> String {
    let body = CursorBody { t: key.created_at, k: key.key.clone() };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&body).expect("cursor serializes"))
}

fn decode_cursor(cursor: &str) -> Result<PageKey, ApiError> {
    let invalid = || ApiError::invalid_field("cursor", "is not a cursor returned by this API");
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let body: CursorBody = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    // A forged cursor must not carry what no key holds (PostgreSQL refuses NUL in text).
    if body.k.contains('\0') || body.k.len() > 1024 {
        return Err(invalid());
    }
    Ok(PageKey { created_at: body.t, key: body.k })
}

/// Cut the fetched rows (one more than the page) into a page and the cursor to the next one.
pub fn paginate<R, T>(
    mut rows: Vec<R>,
    page: &PageRequest,
    key: impl Fn(&R) -> PageKey,
    out: impl Fn(R) -> T,
) -> ListOut<T> {
    let shown = usize::try_from(page.limit - 1).unwrap_or(0);
    let cursor = if rows.len() > shown {
        rows.truncate(shown);
        rows.last().map(|last| encode_cursor(&key(last)))
    } else {
        None
    };
    ListOut { items: rows.into_iter().map(out).collect(), cursor }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_garbage_is_a_400_naming_cursor() {
        let key = PageKey { created_at: crate::store::now(), key: "a-name".into() };
        assert_eq!(decode_cursor(&encode_cursor(&key)).unwrap(), key);
        let err = decode_cursor("not!base64").unwrap_err();
        assert_eq!(err.code.status(), 400);
        assert!(err.message.contains("`cursor`"));
    }

    #[test]
    fn limit_bounds() {
        let p = |limit| ListParams { limit, cursor: None }.page_request();
        assert_eq!(p(None).unwrap().limit, 51);
        assert_eq!(p(Some(200)).unwrap().limit, 201);
        assert!(p(Some(0)).unwrap_err().message.contains("`limit`"));
        assert!(p(Some(201)).is_err());
    }

    #[test]
    fn paginate_sets_cursor_only_when_more_rows_exist() {
        let page = PageRequest { after: None, limit: 3, ..Default::default() };
        let key = |s: &&str| PageKey { created_at: DateTime::<Utc>::UNIX_EPOCH, key: s.to_string() };
        let full = paginate(vec!["a", "b", "c"], &page, key, |s| s);
        assert_eq!(full.items, vec!["a", "b"]);
        assert_eq!(decode_cursor(full.cursor.as_deref().unwrap()).unwrap().key, "b");
        let last = paginate(vec!["a", "b"], &page, key, |s| s);
        assert_eq!((last.items.len(), last.cursor), (2, None));
    }
}
