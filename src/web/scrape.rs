//! `/metrics`: the prepared body, shared and never copied, followed by the self-metrics; gzip
//! negotiated here, with the prepared body gzipped once per refresh and the small self-metrics
//! tail, a second gzip member, rendered and gzipped once per change of the counters.

use std::io::Read as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::engine::snapshot::Snapshot;
use crate::engine::spec::CollectorName;
use crate::engine::store::gzip_member;
use crate::metrics::process::ProcessFigures;
use crate::metrics::self_metrics::Telemetry;
use crate::metrics::{Format, Section};
use crate::web::{AppState, negotiate};

pub(super) async fn metrics(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let format = negotiate::format(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let gzip = accepts_gzip(&headers);
    let prepared = state.store.prepared();
    let wanted = match selection(&pairs, &prepared.snapshot) {
        Ok(wanted) => wanted,
        Err(problem) => return (StatusCode::BAD_REQUEST, problem).into_response(),
    };
    let tail = state.tails.get(&state.telemetry, format);
    // CPU time and memory move without any event of the exporter's: read again at most once a
    // second, so that a flood of scrapes reads /proc and compresses once a second, not each time.
    let process = state.process_metrics.then(|| state.tails.process(format));
    let parts = prepared.parts(format, |section| match (&wanted, section) {
        (None, _) | (_, Section::Health) => true,
        (Some(names), Section::Collector(name)) => names.contains(&name),
    });
    let chunks: Vec<Part> = if gzip {
        parts
            .map(|p| Part::Plain(p.gzip.clone()))
            .chain(process.as_ref().map(|p| Part::Plain(p.gzip.clone())))
            .chain([Part::Plain(tail.gzip.clone())])
            .collect()
    } else {
        parts
            .map(|p| match &p.identity {
                Some(b) => Part::Plain(b.clone()),
                None => Part::inflate(p.gzip.clone(), p.identity_len),
            })
            .chain(process.as_ref().map(|p| Part::Plain(p.plain.clone())))
            .chain([Part::Plain(tail.plain.clone())])
            .collect()
    };
    // A cache in between must not hand a gzip body to a client that did not ask for one.
    let headers = [
        (header::CONTENT_TYPE, format.content_type()),
        (header::VARY, "accept-encoding"),
    ];
    let encoding = gzip.then_some([(header::CONTENT_ENCODING, "gzip")]);
    (headers, encoding, Body::new(Chunks::new(chunks))).into_response()
}

/// `collect[]` values at most in one request; there are only five collectors.
const MAX_COLLECT_PARAMS: usize = 16;

/// The collectors `collect[]` asks for (`None`: every collector), as node_exporter reads it:
/// each value names one enabled collector; another name is a 400 that lists the enabled ones.
/// Other query parameters are ignored.
fn selection(
    pairs: &[(String, String)],
    snapshot: &Snapshot,
) -> Result<Option<Vec<CollectorName>>, String> {
    let values = super::query_values(pairs, "collect[]");
    if values.is_empty() {
        return Ok(None);
    }
    let enabled = || {
        snapshot
            .collectors()
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if values.len() > MAX_COLLECT_PARAMS {
        return Err(format!(
            "collect[]: {} values; at most {MAX_COLLECT_PARAMS}, one per enabled collector ({})\n",
            values.len(),
            enabled()
        ));
    }
    let mut names = Vec::new();
    for value in values {
        let name = CollectorName::from_key(value)
            .filter(|c| snapshot.collectors().contains(c))
            .ok_or_else(|| {
                format!(
                    "collect[]: {} is not an enabled collector; use one of: {}\n",
                    crate::redact::quote(value),
                    enabled()
                )
            })?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(Some(names))
}

/// A tail of one format, plain and gzipped, and what it was made at: the generation of the
/// self-metrics' counters, or when the `process_*` series were read.
#[derive(Debug)]
pub struct Tail<M> {
    made: M,
    pub plain: Bytes,
    pub gzip: Bytes,
}

/// The last tail of each format. The self-metrics change only when the exporter calls upstream
/// or reloads, never because of a scrape, so most scrapes find theirs here and render and
/// compress nothing; keyed by [`Telemetry::generation`], so a hit is never stale. Two entries.
#[derive(Debug, Default)]
pub struct TailCache {
    slots: [ArcSwapOption<Tail<u64>>; 2],
    /// The `process_*` series of each format, and when they were read.
    process: [ArcSwapOption<Tail<Instant>>; 2],
}

/// How long a reading of the `process_*` series is served again.
const PROCESS_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// The tail in `slot` while `fresh` holds for what it was made at, else `render`'s text, made
/// at `made`, which takes its place.
fn cached<M>(
    slot: &ArcSwapOption<Tail<M>>,
    fresh: impl FnOnce(&M) -> bool,
    made: impl FnOnce() -> M,
    render: impl FnOnce() -> String,
) -> Arc<Tail<M>> {
    if let Some(tail) = slot.load_full()
        && fresh(&tail.made)
    {
        return tail;
    }
    let plain = Bytes::from(render());
    let tail = Arc::new(Tail {
        made: made(),
        gzip: gzip_member(&plain),
        plain,
    });
    slot.store(Some(tail.clone()));
    tail
}

fn slot(format: Format) -> usize {
    match format {
        Format::Classic => 0,
        Format::OpenMetrics => 1,
    }
}

impl TailCache {
    /// The `process_*` series in `format`, read again when the last reading is a second old.
    pub fn process(&self, format: Format) -> Arc<Tail<Instant>> {
        cached(
            &self.process[slot(format)],
            |read_at| read_at.elapsed() < PROCESS_TTL,
            Instant::now,
            || ProcessFigures::read().render(format),
        )
    }

    pub fn get(&self, telemetry: &Telemetry, format: Format) -> Arc<Tail<u64>> {
        // Read before rendering: a change made meanwhile moves the generation past this one,
        // so what is cached under it can only be as new or newer than it.
        let generation = telemetry.generation();
        cached(
            &self.slots[slot(format)],
            |made| *made == generation,
            || generation,
            || telemetry.metrics().render(format),
        )
    }
}

/// Whether the client takes gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip` with a q above 0, or,
/// when neither is named, `*` with a q above 0. Anything unreadable counts as not accepted:
/// identity is always a safe answer. The header's size is bounded by the server's head limit.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut named: Option<bool> = None;
    let mut any: Option<bool> = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else {
            continue;
        };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let mut q_ok = true;
            for param in parts {
                let (name, v) = param.split_once('=').unwrap_or((param, ""));
                if name.trim().eq_ignore_ascii_case("q") {
                    q_ok = positive_qvalue(v.trim());
                }
            }
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                // Of several gzip items, a refusal wins.
                named = Some(named.unwrap_or(true) && q_ok);
            } else if coding == "*" {
                any = Some(any.unwrap_or(true) && q_ok);
            }
        }
    }
    named.or(any).unwrap_or(false)
}

/// A qvalue (`0`, `0.5`, `1.000`) above zero; anything else, including a malformed one, is not.
fn positive_qvalue(text: &str) -> bool {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return false;
    }
    text.parse::<f32>().is_ok_and(|q| q > 0.0 && q <= 1.0)
}

/// One part of a body: shared bytes sent as they are, or a section kept only gzipped, inflated
/// a frame at a time as it is sent.
pub enum Part {
    Plain(Bytes),
    Inflate {
        gz: Box<flate2::bufread::GzDecoder<std::io::Cursor<Bytes>>>,
        /// Bytes of the inflated body still to send.
        left: u64,
    },
}

/// The inflated bytes sent in one frame at most.
const INFLATE_FRAME_BYTES: usize = 64 * 1024;

impl Part {
    pub fn inflate(gzip: Bytes, len: u64) -> Part {
        Part::Inflate {
            gz: Box::new(flate2::bufread::GzDecoder::new(std::io::Cursor::new(gzip))),
            left: len,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Part::Plain(b) => b.len() as u64,
            Part::Inflate { left, .. } => *left,
        }
    }
}

/// A body of shared chunks, sent as one frame each with an exact length: nothing is copied
/// into a response buffer, and the length lets the server send `Content-Length`.
pub struct Chunks {
    /// In reverse order, so that the next one is popped from the end.
    rest: Vec<Part>,
}

impl Chunks {
    pub fn new(chunks: Vec<Part>) -> Self {
        let mut rest: Vec<Part> = chunks.into_iter().filter(|p| p.len() > 0).collect();
        rest.reverse();
        Chunks { rest }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let rest = &mut self.get_mut().rest;
        let Some(part) = rest.pop() else {
            return Poll::Ready(None);
        };
        let (mut gz, left) = match part {
            Part::Plain(b) => return Poll::Ready(Some(Ok(Frame::data(b)))),
            Part::Inflate { gz, left } => (gz, left),
        };
        let want =
            usize::try_from(left).map_or(INFLATE_FRAME_BYTES, |l| l.min(INFLATE_FRAME_BYTES));
        let mut buf = Vec::with_capacity(want);
        if let Err(e) = std::io::Read::take(&mut gz, want as u64).read_to_end(&mut buf) {
            return Poll::Ready(Some(Err(e)));
        }
        if buf.len() < want {
            // Our own gzip member ended short of its length: never, but the length was promised.
            return Poll::Ready(Some(Err(std::io::Error::other(
                "a prepared section inflated short of its length",
            ))));
        }
        let left = left - buf.len() as u64;
        if left > 0 {
            rest.push(Part::Inflate { gz, left });
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.iter().map(Part::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::observe::Observer as _;
    use http_body::Body as _;

    fn accepts(values: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, v.parse().unwrap());
        }
        accepts_gzip(&h)
    }

    #[test]
    fn gzip_is_chosen_only_when_the_client_accepts_it_with_a_positive_q() {
        assert!(!accepts(&[]));
        assert!(!accepts(&[""]));
        assert!(!accepts(&["identity"]));
        assert!(!accepts(&["br, deflate"]));
        assert!(accepts(&["gzip"]));
        assert!(accepts(&["GZip"]));
        assert!(accepts(&["x-gzip"]));
        assert!(accepts(&["identity, gzip, deflate"]));
        assert!(accepts(&["br", "gzip;q=0.5"]));
        assert!(accepts(&["gzip ; q=1.000"]));
        assert!(accepts(&["*"]));
        assert!(accepts(&["*;q=0.1"]));
        assert!(!accepts(&["gzip;q=0"]));
        assert!(!accepts(&["gzip;q=0.000"]));
        assert!(!accepts(&["gzip;q=0, *"]));
        assert!(!accepts(&["*;q=0"]));
        assert!(!accepts(&["gzip;q=abc"]));
        assert!(!accepts(&["gzip;q=2"]));
        assert!(!accepts(&["gzip;q=-1"]));
        assert!(!accepts(&["gzip;q=0.0000001"]));
        assert!(!accepts(&["gzip, gzip;q=0"]));
    }

    #[test]
    fn the_self_metrics_are_rendered_again_after_every_change_and_reused_otherwise() {
        use crate::upstream::endpoint::Endpoint;
        use crate::upstream::error::FailureReason;
        let telemetry = Telemetry::new(&[Endpoint::new("delivery_account")]);
        let cache = TailCache::default();
        let line =
            "mailhost_api_request_failures_total{endpoint=\"delivery_account\",reason=\"timeout\"}";
        let plain = |tail: &Tail<u64>| std::str::from_utf8(&tail.plain).unwrap().to_owned();
        let first = cache.get(&telemetry, Format::Classic);
        assert!(plain(&first).contains(&format!("{line} 0\n")));
        assert!(
            Arc::ptr_eq(&first, &cache.get(&telemetry, Format::Classic)),
            "reused"
        );
        telemetry.observe_failure(
            &crate::tenant::TenantName::default(),
            Endpoint::new("delivery_account"),
            FailureReason::Timeout,
        );
        let second = cache.get(&telemetry, Format::Classic);
        let text = plain(&second);
        assert!(text.contains(&format!("{line} 1\n")), "{text}");
        let mut gunzipped = String::new();
        flate2::read::GzDecoder::new(&second.gzip[..])
            .read_to_string(&mut gunzipped)
            .unwrap();
        assert_eq!(gunzipped, text);
        telemetry.observe_reload(true);
        assert!(!Arc::ptr_eq(
            &second,
            &cache.get(&telemetry, Format::Classic)
        ));
        let om = cache.get(&telemetry, Format::OpenMetrics);
        assert!(plain(&om).ends_with("# EOF\n"));
    }

    /// The frames of `body`, in order, until it ends.
    fn frames(body: &mut Chunks) -> Vec<Bytes> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut frames = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut *body).poll_frame(&mut cx) {
            frames.push(frame.into_data().unwrap());
        }
        frames
    }

    #[test]
    fn a_body_of_chunks_has_an_exact_length_keeps_their_order_and_skips_empty_ones() {
        let mut body = Chunks::new(vec![
            Part::Plain(Bytes::from_static(b"abc")),
            Part::Plain(Bytes::new()),
            Part::Plain(Bytes::from_static(b"de")),
            Part::Plain(Bytes::from_static(b"f")),
        ]);
        assert_eq!(body.size_hint().exact(), Some(6));
        assert_eq!(frames(&mut body), ["abc", "de", "f"].map(str::as_bytes));
        assert!(body.is_end_stream());
        let empty = Chunks::new(vec![Part::Plain(Bytes::new()), Part::Plain(Bytes::new())]);
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));
    }

    #[test]
    fn a_section_kept_only_gzipped_is_sent_inflated_in_frames_with_its_exact_length() {
        let text: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let gz = crate::engine::store::gzip_member(text.as_bytes());
        let mut body = Chunks::new(vec![
            Part::Plain(Bytes::from_static(b"head\n")),
            Part::inflate(gz, text.len() as u64),
            Part::Plain(Bytes::from_static(b"tail\n")),
        ]);
        assert_eq!(body.size_hint().exact(), Some(text.len() as u64 + 10));
        let frames = frames(&mut body);
        assert!(frames.iter().all(|f| f.len() <= INFLATE_FRAME_BYTES));
        assert!(frames.len() > 4, "{}", frames.len());
        assert_eq!(frames.concat(), format!("head\n{text}tail\n").into_bytes());
        assert!(body.is_end_stream());
    }

    #[test]
    fn collect_selects_enabled_collectors_and_refuses_other_names_with_the_list() {
        let spec =
            crate::engine::spec::fixtures::accounts(&[1], std::time::Duration::from_secs(60));
        let mut snapshot = Snapshot::default();
        snapshot.collectors.insert(
            spec.key(),
            Arc::new(crate::engine::snapshot::CollectorState::new(&spec)),
        );
        let pairs = |values: &[&str]| -> Vec<(String, String)> {
            values
                .iter()
                .map(|v| ("collect[]".to_owned(), (*v).to_owned()))
                .chain([("other".to_owned(), "x".to_owned())])
                .collect()
        };
        assert_eq!(selection(&pairs(&[]), &snapshot), Ok(None));
        assert_eq!(
            selection(&pairs(&["delivery_account", "delivery_account"]), &snapshot),
            Ok(Some(vec![CollectorName::DeliveryAccount]))
        );
        let err = selection(&pairs(&["mailbox"]), &snapshot).unwrap_err();
        assert!(
            err.contains("\"mailbox\" is not an enabled collector; use one of: delivery_account"),
            "{err}"
        );
        let err = selection(&pairs(&["<script>"]), &snapshot).unwrap_err();
        assert!(err.contains("is not an enabled collector"), "{err}");
        let many = vec!["delivery_account"; MAX_COLLECT_PARAMS + 1];
        let err = selection(&pairs(&many), &snapshot).unwrap_err();
        assert!(err.contains("at most 16"), "{err}");
    }
}
