//! The way to the provider that every tenant shares: the HTTP connection pool, and the caps on
//! upstream calls in flight, idle connections and connections being made across all tenants,
//! which the descriptor plan ([`crate::descriptors`]) sizes from the open-file limit. A tenant's token rides on each
//! request, never on a connection, so tenants sharing a pool share nothing else; and ten thousand
//! tenants cost one pool, not ten thousand, each with its own idle connections and TLS setup.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::BuildError;
use super::tls::client_config;
use crate::descriptors::{MAX_CONNECTING, MAX_IDLE, Upstream};
use crate::settings::http_client::{HttpClientSettings, TlsSettings};

/// How long an idle connection is kept for the next call.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The shared way to the provider; cloning shares it.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    /// One pool for every tenant with the default proxy and TLS settings. It sets no connect
    /// timeout of its own: each attempt, connect included, is bounded by its tenant's
    /// `api.timeout` and the run's deadline.
    pool: reqwest::Client,
    /// A pool for each other proxy and TLS setting tenants use, made when first asked for;
    /// at most [`MAX_POOLS`] (the config refuses more).
    others: Mutex<Vec<(HttpClientSettings, reqwest::Client)>>,
    plan: Option<Upstream>,
    /// Calls in flight across all tenants, at most: the descriptor plan's, and never more than
    /// [`MAX_CALLS`].
    connections: Arc<Semaphore>,
}

/// Upstream calls in flight across all tenants, at most, whatever the open-file limit allows.
/// A call under way holds its request, its connection's buffers and the client's futures
/// (about 3.5 KiB); ten thousand tenants starting together would otherwise hold one each while
/// they wait inside the pool for a connection, which the pool makes at most
/// [`MAX_CONNECTING`] at a time. A call beyond waits for a turn here, in a queue whose place costs
/// a few bytes. 2,048 calls in flight carry 2,048 calls per second from a provider answering
/// in a second.
pub const MAX_CALLS: usize = 2048;

impl Transport {
    /// A transport within the upstream side of the descriptor plan (`None`: no open-file limit,
    /// so calls in flight are capped at [`MAX_CALLS`] alone).
    pub fn new(plan: Option<Upstream>) -> Result<Transport, BuildError> {
        let cap = plan.map_or(MAX_CALLS, |p| p.calls.clamp(1, MAX_CALLS));
        Ok(Transport {
            inner: Arc::new(Inner {
                pool: build(plan, &HttpClientSettings::default())?,
                others: Mutex::default(),
                plan,
                connections: Arc::new(Semaphore::new(cap)),
            }),
        })
    }

    /// The connection pool for `settings`: the shared one for the defaults, else one per
    /// distinct setting, kept for the process's life (a reload that changes them makes
    /// another; pools are few and small).
    pub fn pool_for(&self, settings: &HttpClientSettings) -> Result<reqwest::Client, BuildError> {
        if settings.is_default() {
            return Ok(self.inner.pool.clone());
        }
        let mut others = self
            .inner
            .others
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, pool)) = others.iter().find(|(s, _)| s == settings) {
            return Ok(pool.clone());
        }
        if others.len() >= MAX_POOLS {
            // The oldest goes: a process reloaded through many settings keeps only recent ones.
            others.remove(0);
        }
        let pool = build(self.inner.plan, settings)?;
        others.push((settings.clone(), pool.clone()));
        Ok(pool)
    }

    /// A turn to have a call in flight, once one is free; `None` if `deadline` comes first.
    pub async fn connection(&self, deadline: Option<Instant>) -> Result<Connection, ()> {
        let acquire = self.inner.connections.clone().acquire_owned();
        let permit = match deadline {
            Some(d) => tokio::time::timeout_at(d, acquire).await.map_err(|_| ())?,
            None => acquire.await,
        };
        // The semaphore is never closed.
        permit.map(Connection).map_err(|_| ())
    }
}

/// A call's turn to be in flight; the turn is given back when this is dropped.
pub struct Connection(#[allow(dead_code)] OwnedSemaphorePermit);

/// Distinct proxy and TLS settings with a pool of their own, at most.
pub const MAX_POOLS: usize = crate::settings::http_client::MAX_DISTINCT;

fn build(
    plan: Option<Upstream>,
    settings: &HttpClientSettings,
) -> Result<reqwest::Client, BuildError> {
    let idle = plan.map_or(MAX_IDLE, |p| p.idle);
    let connecting = plan.map_or(MAX_CONNECTING, |p| p.connecting.max(1));
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    let mut builder = reqwest::Client::builder();
    // Proxies from the environment only when asked for, as Prometheus does.
    if !settings.proxy_from_environment {
        builder = builder.no_proxy();
    }
    if let Some(url) = &settings.proxy_url {
        let no_proxy = settings
            .no_proxy
            .as_deref()
            .and_then(reqwest::NoProxy::from_string);
        let proxy = reqwest::Proxy::all(url)
            .map_err(|_| BuildError("proxy_url is not a usable proxy address".to_owned()))?
            .no_proxy(no_proxy);
        builder = builder.proxy(proxy);
    }
    if settings.tls != TlsSettings::default() {
        builder = builder.use_preconfigured_tls(client_config(&settings.tls).map_err(BuildError)?);
    }
    builder
        .default_headers(headers)
        .user_agent(concat!("mailhost_exporter/", env!("CARGO_PKG_VERSION")))
        // A redirect could carry the token header to another host: never follow one.
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(POOL_IDLE)
        // A burst of calls at the tick of ten thousand tenants would otherwise keep thousands of
        // connections open (and their buffers) all interval for the next burst.
        .pool_max_idle_per_host(idle)
        // Connections being made, which the cap on calls does not bound: the pool may hand a
        // call an idle connection while the one it started connecting goes on.
        .connector_layer(tower::limit::ConcurrencyLimitLayer::new(connecting))
        .build()
        .map_err(|e| BuildError(e.without_url().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_past_the_cap_wait_for_a_turn_until_their_deadline() {
        let t = Transport::new(Some(Upstream {
            calls: 2,
            idle: 1,
            connecting: 1,
        }))
        .unwrap();
        let a = t.connection(None).await.unwrap();
        let _b = t.connection(None).await.unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(
            t.connection(Some(soon)).await.is_err(),
            "a third call waits"
        );
        drop(a);
        assert!(
            t.connection(Some(soon)).await.is_ok(),
            "a freed turn is taken"
        );
    }

    #[tokio::test]
    async fn calls_in_flight_stay_within_max_calls_whatever_the_open_file_limit() {
        let roomy = Some(Upstream {
            calls: 100_000,
            idle: 1,
            connecting: 1,
        });
        for t in [
            Transport::new(None).unwrap(),
            Transport::new(roomy).unwrap(),
        ] {
            let held = take(&t, MAX_CALLS).await;
            assert_eq!(held.len(), MAX_CALLS);
            let soon = Instant::now() + Duration::from_millis(20);
            assert!(
                t.connection(Some(soon)).await.is_err(),
                "the call past MAX_CALLS waits"
            );
            drop(held);
            assert!(t.connection(Some(soon)).await.is_ok());
        }
    }

    async fn take(t: &Transport, n: usize) -> Vec<Connection> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(t.connection(None).await.unwrap());
        }
        out
    }
}
