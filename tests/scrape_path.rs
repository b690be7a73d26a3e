//! The scrape path: `/metrics` hands out the prepared body (gzipped once per refresh) and a
//! per-scrape tail of self-metrics; gzip is negotiated from `Accept-Encoding`, and the
//! gunzipped answer is byte for byte the identity answer.

use std::io::Read as _;

use mailhost_exporter::config::Config;
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};

use crate::helpers::{Exporter, TOKEN, spawn_exporter, spawn_sim, wait_for};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0";

/// The demo accounts, polled once a minute: after the first run nothing changes for a while,
/// so two scrapes a moment apart agree.
async fn exporter(sim_url: &str) -> Exporter {
    let yaml = format!(
        "api:\n  base_url: {sim_url}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 60s\n    max_age: 10m\n    accounts: [1001, 1002, 1003, 1004]\n"
    );
    let exporter = spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
    exporter
        .scrape_until("the first run", |b| {
            b.contains("mailhost_delivery_remaining_messages{")
        })
        .await;
    exporter
}

/// (Content-Encoding, Vary, Content-Length, body bytes) of one scrape.
async fn fetch(
    exporter: &Exporter,
    accept: Option<&str>,
    encoding: Option<&str>,
) -> (Option<String>, Option<String>, Option<u64>, Vec<u8>) {
    let mut request = reqwest::Client::new().get(exporter.url("/metrics"));
    if let Some(a) = accept {
        request = request.header(ACCEPT, a);
    }
    if let Some(e) = encoding {
        request = request.header(ACCEPT_ENCODING, e);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_owned())
    };
    let encoding = header(CONTENT_ENCODING);
    let vary = header(VARY);
    let length = header(CONTENT_LENGTH).map(|l| l.parse().unwrap());
    let body = response.bytes().await.unwrap().to_vec();
    (encoding, vary, length, body)
}

/// Every member of a gzip stream, concatenated, as Go's reader (Prometheus) reads it.
fn gunzip_all(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The first gzip member only.
fn gunzip_first(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn the_gunzipped_body_equals_the_identity_body_exactly_in_both_formats() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for (accept, eof) in [(None, false), (Some(OPENMETRICS), true)] {
        // Self-metrics only grow: two equal identity bodies around the gzip one mean nothing
        // changed in between, and then the three must agree exactly.
        let (identity, gzip) = wait_for("two equal identity bodies around a gzip one", || async {
            let (_, _, _, before) = fetch(&exporter, accept, None).await;
            let (encoding, vary, length, gzip) = fetch(&exporter, accept, Some("gzip")).await;
            let (_, _, _, after) = fetch(&exporter, accept, None).await;
            assert_eq!(encoding.as_deref(), Some("gzip"));
            assert_eq!(vary.as_deref(), Some("accept-encoding"));
            assert_eq!(length, Some(gzip.len() as u64), "an exact Content-Length");
            (before == after).then_some((before, gzip))
        })
        .await;
        let text = String::from_utf8(identity.clone()).unwrap();
        assert!(text.contains("mailhost_delivery_remaining_messages{"));
        assert!(
            text.contains("mailhost_build_info{"),
            "self-metrics in the tail"
        );
        assert_eq!(text.ends_with("# EOF\n"), eof, "{accept:?}");
        assert_eq!(text.matches("# EOF").count(), usize::from(eof));
        assert_eq!(gunzip_all(&gzip), identity, "{accept:?}");
        // Two members: the prepared body, gzipped once per refresh, then the self-metrics.
        let first = gunzip_first(&gzip);
        assert!(first.len() < identity.len());
        assert!(identity.starts_with(&first));
        assert!(
            !String::from_utf8(first)
                .unwrap()
                .contains("mailhost_build_info")
        );
    }
}

#[tokio::test]
async fn a_client_that_does_not_accept_gzip_gets_identity() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for encoding in [None, Some("identity"), Some("br, deflate"), Some("")] {
        let (content_encoding, vary, length, body) = fetch(&exporter, None, encoding).await;
        assert_eq!(content_encoding, None, "{encoding:?}");
        assert_eq!(vary.as_deref(), Some("accept-encoding"));
        assert_eq!(length, Some(body.len() as u64));
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("# HELP "), "{encoding:?}");
        assert!(text.contains("mailhost_build_info{"));
    }
}

#[tokio::test]
async fn gzip_with_q_zero_means_identity() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for encoding in [
        "gzip;q=0",
        "gzip;q=0.000, identity",
        "gzip;q=0, *;q=1",
        "*;q=0",
    ] {
        let (content_encoding, _, _, body) = fetch(&exporter, None, Some(encoding)).await;
        assert_eq!(content_encoding, None, "{encoding}");
        assert!(String::from_utf8(body).unwrap().starts_with("# HELP "));
    }
    // A positive q still means gzip.
    let (content_encoding, _, _, body) = fetch(&exporter, None, Some("gzip;q=0.1")).await;
    assert_eq!(content_encoding.as_deref(), Some("gzip"));
    assert!(
        String::from_utf8(gunzip_all(&body))
            .unwrap()
            .starts_with("# HELP ")
    );
}

#[tokio::test]
async fn the_landing_page_is_still_gzipped_by_the_compression_layer() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    let response = reqwest::Client::new()
        .get(exporter.url("/"))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get(CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap()),
        Some("gzip")
    );
    let page = String::from_utf8(gunzip_all(&response.bytes().await.unwrap())).unwrap();
    assert!(
        page.contains("<html") || page.contains("<!DOCTYPE"),
        "{page}"
    );
}
