//! Delivery faults: a body trickled over time, or one broken off half-way. Status and headers go
//! out at once; only the body misbehaves, so a client sees the fault while reading it. And the
//! end of a request never answered: a connection closed before anything is sent.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes, to_bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame};
use tokio::time::Sleep;

/// Chunks a slow body is cut into (fewer for tiny bodies): "a few bytes every few milliseconds".
const SLOW_CHUNKS: usize = 20;

/// Least pause between the last chunk of a broken body and the break: without it hyper would see
/// the error before flushing the headers, and the client would see no answer at all.
const BREAK_PAUSE: Duration = Duration::from_millis(50);

/// The error a broken body ends with; hyper then drops the connection without finishing the
/// message, so the client sees a body shorter than its `Content-Length`.
#[derive(Debug, thiserror::Error)]
#[error("connection broken by the simulator's reset_mid_body or no_answer_rate fault")]
pub(super) struct BodyBroken;

/// Re-sends `response` with its body trickled over `slow` (if given) and, with `reset`, only its
/// first half followed by a broken connection. `Content-Length` always announces the whole body.
pub(super) async fn deliver(response: Response, slow: Option<Duration>, reset: bool) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    if reset {
        bytes.truncate(bytes.len() / 2);
    }
    let pieces = match slow {
        Some(_) => SLOW_CHUNKS.min(bytes.len()).max(1),
        None => 1,
    };
    let chunks = split(bytes, pieces);
    // The first chunk goes out with the headers; a pause precedes each later chunk and the break.
    let pauses = u32::try_from(chunks.len() - 1 + usize::from(reset))
        .unwrap_or(u32::MAX)
        .max(1);
    let interval = slow.map_or(Duration::ZERO, |total| total / pauses);
    Response::from_parts(
        parts,
        Body::new(Trickle {
            chunks,
            interval,
            pause: None,
            break_at_end: reset,
            break_pause: interval.max(BREAK_PAUSE),
        }),
    )
}

/// A response whose body fails before its first byte. hyper polls the body before it flushes the
/// head, so it drops the connection without sending anything: the client sees the connection
/// closed and no status. (Through the router, without a socket, it is a 504 whose body fails.)
pub(super) fn unanswered() -> Response {
    let mut response = Response::new(Body::new(Trickle {
        chunks: VecDeque::new(),
        interval: Duration::ZERO,
        pause: None,
        break_at_end: true,
        break_pause: Duration::ZERO,
    }));
    *response.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    response
}

/// `bytes` in `pieces` chunks of about the same size (at least one chunk, possibly empty).
fn split(bytes: Bytes, pieces: usize) -> VecDeque<Bytes> {
    let size = bytes.len().div_ceil(pieces.max(1)).max(1);
    let mut chunks: VecDeque<Bytes> = (0..bytes.len())
        .step_by(size)
        .map(|start| bytes.slice(start..(start + size).min(bytes.len())))
        .collect();
    if chunks.is_empty() {
        chunks.push_back(Bytes::new());
    }
    chunks
}

/// A body yielding its chunks `interval` apart, then, if `break_at_end`, an error `break_pause`
/// after the last one.
struct Trickle {
    chunks: VecDeque<Bytes>,
    interval: Duration,
    pause: Option<Pin<Box<Sleep>>>,
    break_at_end: bool,
    break_pause: Duration,
}

impl HttpBody for Trickle {
    type Data = Bytes;
    type Error = BodyBroken;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Some(pause) = this.pause.as_mut() {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        let next = match this.chunks.pop_front() {
            Some(chunk) => Ok(Frame::data(chunk)),
            None if this.break_at_end => {
                this.break_at_end = false;
                Err(BodyBroken)
            }
            None => return Poll::Ready(None),
        };
        let pause = if next.is_err() {
            Duration::ZERO
        } else if !this.chunks.is_empty() {
            this.interval
        } else if this.break_at_end {
            this.break_pause
        } else {
            Duration::ZERO
        };
        if !pause.is_zero() {
            this.pause = Some(Box::pin(tokio::time::sleep(pause)));
        }
        Poll::Ready(Some(next))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && !self.break_at_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_every_byte_in_order() {
        let bytes = Bytes::from_static(b"0123456789abcdefghijklmnopqrstuvwxyz");
        for pieces in [1, 3, 20, 36, 100] {
            let chunks = split(bytes.clone(), pieces);
            assert!(chunks.len() <= pieces.max(1), "{pieces}");
            let joined: Vec<u8> = chunks.iter().flatten().copied().collect();
            assert_eq!(joined, bytes.to_vec(), "{pieces}");
        }
        assert_eq!(split(Bytes::new(), 20).len(), 1);
    }

    #[tokio::test]
    async fn an_unanswered_body_fails_before_its_first_byte() {
        let response = unanswered();
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        assert!(to_bytes(response.into_body(), usize::MAX).await.is_err());
    }

    #[tokio::test]
    async fn a_broken_body_yields_half_then_an_error() {
        let response = Response::new(Body::from("{\"resources\":[{\"id\":1}]}"));
        let response = deliver(response, None, true).await;
        assert_eq!(response.headers()[header::CONTENT_LENGTH], "24");
        assert!(to_bytes(response.into_body(), usize::MAX).await.is_err());
    }
}
