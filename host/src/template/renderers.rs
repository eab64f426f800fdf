//! Every renderer, made once and shared: the built-in minijinja renderer and renderer plugins.
//! [`Renderers::for_endpoint`] is the one place that picks an endpoint's renderer, as
//! `Transports::for_endpoint` picks its transport, so the worker and the endpoints API never
//! choose for themselves.

use std::sync::Arc;

use super::wasm::WasmRenderer;
use super::{MinijinjaRenderer, Renderer};
use crate::plugin::PluginHost;

#[derive(Clone)]
pub struct Renderers {
    built_in: Arc<MinijinjaRenderer>,
    plugins: PluginHost,
}

impl Renderers {
    /// The renderers, the built-in one allowing each render `build_bytes` of values
    /// (`TE_RENDER_MAX_BUILD_BYTES`).
    pub fn new(plugins: PluginHost, build_bytes: usize) -> Self {
        Self { built_in: Arc::new(MinijinjaRenderer::with_build_bytes(build_bytes)), plugins }
    }

    /// The renderer of an endpoint: the renderer plugin it names, or the built-in one.
    pub fn for_endpoint(&self, renderer_plugin: Option<&str>) -> Arc<dyn Renderer> {
        match renderer_plugin {
            Some(plugin) => Arc::new(WasmRenderer { host: self.plugins.clone(), plugin: plugin.to_owned() }),
            None => self.built_in.clone(),
        }
    }
}
