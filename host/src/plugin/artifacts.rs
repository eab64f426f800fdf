//! Compiled plugins, by the sha256 of their source: linked and ready to instantiate in memory,
//! and as compiled artifacts on disk so a restart does not compile every plugin again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use super::engine::{Loaded, PluginEngine};
use super::error::PluginError;

pub(super) struct ArtifactCache {
    loaded: RwLock<HashMap<String, Arc<Loaded>>>,
    /// Where compiled artifacts are kept, a directory of this service's alone (0700).
    dir: Option<PathBuf>,
}

impl ArtifactCache {
    pub(super) fn new(dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir)?;
            // Cached artifacts are loaded without validation: the directory must be ours alone.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Self { loaded: RwLock::default(), dir })
    }

    /// The ready-to-instantiate component for `sha256`, from memory, the artifact directory, or
    /// by compiling `bytes()` (fetched only when needed).
    pub(super) fn load(
        &self,
        engine: &PluginEngine,
        sha256: &str,
        bytes: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Result<Arc<Loaded>, PluginError> {
        if let Some(loaded) = self.loaded.read().expect("plugin cache lock").get(sha256) {
            return Ok(loaded.clone());
        }
        let artifact =
            self.dir.as_ref().map(|dir| dir.join(format!("{sha256}-{:016x}.cwasm", engine.compatibility_hash())));
        // SAFETY: artifacts are written only by this service, into a 0700 directory, named by
        // the sha256 of their source and the engine's compatibility hash.
        let cached = artifact.as_ref().filter(|p| p.exists()).and_then(|p| unsafe { engine.deserialize(p) });
        let component = match cached {
            Some(component) => component,
            None => {
                let bytes = bytes().ok_or("the plugin's bytes are missing")?;
                let (_, component) = engine.inspect(&bytes, None)?;
                if let (Some(path), Ok(serialized)) = (&artifact, component.serialize()) {
                    let tmp = path.with_extension("tmp");
                    if std::fs::write(&tmp, serialized).is_ok() {
                        let _ = std::fs::rename(&tmp, path);
                    }
                }
                component
            }
        };
        let loaded = Arc::new(engine.prepare(&component)?);
        self.loaded.write().expect("plugin cache lock").insert(sha256.to_owned(), loaded.clone());
        Ok(loaded)
    }
}
