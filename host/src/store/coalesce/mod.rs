//! Store calls of many concurrent requests made as one: the creates that arrive while a write is
//! under way are written by the next one ([`JobWriter`]), the endpoint reads that arrive together
//! are made in one query ([`EndpointReader`]). Each caller gets its own answer back, as from a
//! call of its own; a task that ended (the service shutting down) answers
//! [`StoreError::Closed`](super::StoreError::Closed).

mod endpoints;
mod jobs;

pub use endpoints::EndpointReader;
pub use jobs::JobWriter;
