//! Which tenant a name belongs to, and the name a tenant's resource is stored under.
//!
//! Names are unique per tenant: two tenants may each have an endpoint `orders`. The store keeps
//! one name space, so a tenant's resources are stored under a *qualified* name: the tenant
//! `default`'s under their own names (`orders`: a database from before tenants needs no
//! rename, and a single-team install never sees the word), every other tenant's under
//! `tenant/name` (`acme/orders`). Neither a tenant's nor a resource's name may hold a `/`
//! (`api::names`), so the two forms never meet, and a stored name says whose it is.
//!
//! Everything past the API (the worker, the flow control, the concurrency keys, the metrics'
//! labels) keys on stored names, which are unique across tenants; the API qualifies every name
//! a request gives with the caller's [`Scope`] and shows every stored name back without it.
//! A name qualified with one tenant can never find another tenant's row, which is what makes
//! another tenant's resource a 404 "as if it did not exist".

use std::borrow::Cow;

/// The tenant every deployment has; its resources are stored under their own names.
pub const DEFAULT_TENANT: &str = "default";

/// What separates a tenant from its resource's name in a stored name.
const SEPARATOR: char = '/';

/// The tenant a request acts within.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    tenant: String,
}

impl Default for Scope {
    fn default() -> Self {
        Self::new(DEFAULT_TENANT)
    }
}

impl Scope {
    /// `tenant` must be a tenant's name (checked where tenants are made: no `/`).
    pub fn new(tenant: &str) -> Self {
        debug_assert!(!tenant.contains(SEPARATOR), "a tenant's name has no '/': {tenant}");
        Self { tenant: tenant.to_owned() }
    }

    /// The scope a stored name belongs to.
    pub fn of_stored(stored: &str) -> Self {
        Self::new(tenant_of(stored))
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn is_default(&self) -> bool {
        self.tenant == DEFAULT_TENANT
    }

    /// The name this tenant's resource `name` is stored under.
    pub fn stored<'a>(&self, name: &'a str) -> Cow<'a, str> {
        if self.is_default() {
            Cow::Borrowed(name)
        } else {
            Cow::Owned(format!("{}{SEPARATOR}{name}", self.tenant))
        }
    }

    /// [`Self::stored`] of an optional name.
    pub fn stored_opt(&self, name: Option<&str>) -> Option<String> {
        name.map(|n| self.stored(n).into_owned())
    }

    /// Whether the resource stored as `stored` is this tenant's.
    pub fn owns(&self, stored: &str) -> bool {
        tenant_of(stored) == self.tenant
    }

    /// The name a stored name is shown under to this tenant: without the tenant. A name of
    /// another tenant's (which no read qualified by this scope returns) is shown whole.
    pub fn shown(&self, stored: &str) -> String {
        match stored.split_once(SEPARATOR) {
            Some((tenant, name)) if tenant == self.tenant => name.to_owned(),
            _ => stored.to_owned(),
        }
    }

    /// [`Self::shown`] of an optional name.
    pub fn shown_opt(&self, stored: Option<&str>) -> Option<String> {
        stored.map(|s| self.shown(s))
    }
}

/// The name a stored name has within its own tenant: what that tenant's callbacks and
/// messages show (`acme/orders` → `orders`).
pub fn own_name(stored: &str) -> &str {
    stored.split_once(SEPARATOR).map_or(stored, |(_, name)| name)
}

/// The tenant whose resource is stored as `stored`.
pub fn tenant_of(stored: &str) -> &str {
    stored.split_once(SEPARATOR).map_or(DEFAULT_TENANT, |(tenant, _)| tenant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_tenant_stores_names_as_they_are() {
        let scope = Scope::default();
        assert_eq!(scope.stored("orders"), "orders");
        assert!(scope.owns("orders"));
        assert!(!scope.owns("acme/orders"));
        assert_eq!(scope.shown("orders"), "orders");
        assert_eq!(tenant_of("orders"), "default");
    }

    #[test]
    fn another_tenant_stores_names_under_its_own() {
        let acme = Scope::new("acme");
        assert_eq!(acme.stored("orders"), "acme/orders");
        assert!(acme.owns("acme/orders"));
        assert!(!acme.owns("orders"), "the default tenant's");
        assert!(!acme.owns("acme-two/orders"), "a tenant whose name begins with acme's");
        assert_eq!(acme.shown("acme/orders"), "orders");
        assert_eq!(Scope::of_stored("acme/orders"), acme);
        assert_eq!((own_name("acme/orders"), own_name("orders")), ("orders", "orders"));
        assert_eq!(Scope::new("beta").stored("orders"), "beta/orders", "one name, two tenants, two rows");
    }
}
