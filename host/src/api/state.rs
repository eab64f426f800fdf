//! What every handler can reach.

use std::sync::Arc;

use crate::secret::SecretCipher;
use crate::store::Store;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub cipher: Arc<SecretCipher>,
}
