//! `/sd`: Prometheus HTTP service discovery. One target group per (tenant, account) this
//! process knows of (configured or probed), labelled so that an `http_sd_configs` job scrapes
//! `/probe` for each of them with no relabeling: `__metrics_path__`, the `__param_*` of the
//! probe, and an `instance` that names the account.

use tokio::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::web::AppState;

/// Longest `Host` header taken as the address of the targets.
const MAX_HOST_CHARS: usize = 255;

#[derive(Serialize)]
struct Group<'a> {
    targets: [&'a str; 1],
    labels: Labels<'a>,
}

#[derive(Serialize)]
struct Labels<'a> {
    #[serde(rename = "__metrics_path__")]
    metrics_path: &'static str,
    #[serde(rename = "__param_tenant", skip_serializing_if = "str::is_empty")]
    tenant: &'a str,
    #[serde(rename = "__param_target")]
    target: String,
    instance: String,
    #[serde(rename = "__meta_mailhost_tenant")]
    meta_tenant: &'a str,
    #[serde(rename = "__meta_mailhost_source")]
    source: &'static str,
}

pub(super) async fn sd(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(host) = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| usable_host(h))
    else {
        return (
            StatusCode::BAD_REQUEST,
            "/sd lists targets at the address it is asked at: send a Host header of the form host:port\n",
        )
            .into_response();
    };
    let now = Instant::now();
    let tenants = state.poll_sets.tenants();
    let known: Vec<_> = tenants
        .iter()
        .filter_map(|tenant| Some((tenant, state.poll_sets.get(tenant)?.known(now))))
        .collect();
    let groups: Vec<Group> = known
        .iter()
        .flat_map(|(tenant, accounts)| {
            accounts.iter().map(move |(id, source)| Group {
                targets: [host],
                labels: Labels {
                    metrics_path: "/probe",
                    tenant: tenant.as_str(),
                    target: id.to_string(),
                    instance: if tenant.is_default() {
                        id.to_string()
                    } else {
                        format!("{tenant}/{id}")
                    },
                    meta_tenant: tenant.as_str(),
                    source: source.as_str(),
                },
            })
        })
        .collect();
    // Serialising plain structs of strings cannot fail.
    let body = serde_json::to_string(&groups).unwrap_or_else(|_| "[]".to_owned());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A host, or host:port, made only of what a host name, an IPv4 or a bracketed IPv6 address
/// and a port are made of: the `Host` header is the client's, and it lands in every target.
fn usable_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= MAX_HOST_CHARS
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_host_shaped_headers_are_taken() {
        for good in ["127.0.0.1:19587", "exporter.svc:80", "[::1]:9", "a"] {
            assert!(usable_host(good), "{good}");
        }
        for bad in ["", "a b", "a/b", "a\"b", "x@y", &"h".repeat(300)] {
            assert!(!usable_host(bad), "{bad}");
        }
    }
}
