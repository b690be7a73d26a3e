//! The web config in force, swapped whole on reload; the layer that applies its users and
//! headers to every request.

use std::fmt;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::web::auth;

use super::WebConfig;

/// A digest of the config text and the files it names; a file that cannot be read (or is no
/// regular file, or too large) counts as empty: the reload that follows refuses it anyway.
pub(super) fn fingerprint(text: &str, files: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    for file in files {
        file.hash(&mut h);
        crate::files::read_bounded(file, crate::files::MAX_WEB_FILE_BYTES)
            .ok()
            .flatten()
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

/// What a reload did with the web config; its text never quotes a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebReload {
    /// No `--web.config.file`: nothing to reload.
    NoFile,
    Reloaded,
    Unchanged,
    /// The new file is bad or asks for what a reload cannot do; the old config keeps serving.
    Refused(String),
}

impl WebReload {
    pub fn is_refused(&self) -> bool {
        matches!(self, WebReload::Refused(_))
    }
}

impl fmt::Display for WebReload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WebReload::NoFile => Ok(()),
            WebReload::Reloaded => f.write_str("web config reloaded"),
            WebReload::Unchanged => f.write_str("web config unchanged"),
            WebReload::Refused(why) => write!(
                f,
                "web config refused: {why}; the previous web config keeps serving"
            ),
        }
    }
}

/// The web config in force, swapped whole on reload. Clones share it.
#[derive(Clone)]
pub struct LiveWebConfig {
    current: Arc<ArcSwap<WebConfig>>,
    /// The TLS config handed to the accept loop, read at each handshake; `None` for plain
    /// HTTP, which a reload cannot change.
    tls: Option<crate::web::serve::LiveTls>,
}

impl fmt::Debug for LiveWebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LiveWebConfig")
            .field(&*self.current.load())
            .finish()
    }
}

impl LiveWebConfig {
    pub fn new(config: WebConfig) -> LiveWebConfig {
        let tls = config.tls.clone().map(|t| Arc::new(ArcSwap::new(t)));
        LiveWebConfig {
            current: Arc::new(ArcSwap::from_pointee(config)),
            tls,
        }
    }

    /// The TLS config for the accept loop, or `None` to serve plain HTTP.
    pub fn tls(&self) -> Option<crate::web::serve::LiveTls> {
        self.tls.clone()
    }

    /// Wraps `router` in the basic auth and headers of the config in force at each request.
    pub fn apply(&self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            web_layer,
        ))
    }

    /// Reads the file again. A new, valid file takes effect for the next request and the next
    /// TLS handshake; a bad one, or one that switches TLS on or off (which needs a new
    /// listener), is refused and the old config keeps serving.
    pub fn reload(&self) -> WebReload {
        let old = self.current.load_full();
        let Some(path) = old.source.clone() else {
            return WebReload::NoFile;
        };
        let new = match WebConfig::load(&path) {
            Ok(new) => new,
            Err(e) => return self.refused(e.to_string()),
        };
        if new.fingerprint == old.fingerprint {
            return WebReload::Unchanged;
        }
        if new.tls.is_some() != old.tls.is_some() {
            let now = if old.tls.is_some() { "on" } else { "off" };
            return self.refused(format!(
                "tls_server_config: TLS is {now} and cannot be switched by a reload; restart the exporter to change it"
            ));
        }
        let users = new.users.clone().sharing_gate_of(&old.users);
        let new = WebConfig { users, ..new };
        if let (Some(live), Some(tls)) = (&self.tls, &new.tls) {
            live.store(tls.clone());
        }
        self.current.store(Arc::new(new));
        tracing::info!("web config reloaded");
        WebReload::Reloaded
    }

    fn refused(&self, why: String) -> WebReload {
        tracing::error!(reason = %why, "web config reload refused; the previous web config keeps serving");
        WebReload::Refused(why)
    }
}

async fn web_layer(State(live): State<LiveWebConfig>, request: Request, next: Next) -> Response {
    let config = live.current.load_full();
    let mut response = match auth::authorize(&config.users, &request).await {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal,
    };
    for (name, value) in &config.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}
