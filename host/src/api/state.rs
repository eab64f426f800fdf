//! What every handler can reach.

use std::sync::Arc;

use crate::secret::SecretCipher;
use crate::store::Store;
use crate::template::Renderer;
use crate::transport::Transports;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub cipher: Arc<SecretCipher>,
    /// Registration asks each endpoint's transport to check its spec.
    pub transports: Transports,
    /// Registration asks the renderer to check the spec's templates.
    pub renderer: Arc<dyn Renderer>,
}
