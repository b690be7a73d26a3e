//! A bare axum handler that answers every GET with the bytes of one file, read once into
//! memory: the ceiling the exporter's `/metrics` is measured against in
//! `bench/scrape_bench.py`. Loopback only.
//!
//! Usage: `cargo run --release --example bare_axum -- FILE PORT`

use axum::Router;
use axum::http::header;
use axum::routing::get;
use bytes::Bytes;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(port)) = (args.next(), args.next()) else {
        return Err("usage: bare_axum FILE PORT".into());
    };
    let body = Bytes::from(std::fs::read(&file)?);
    let port: u16 = port.parse()?;
    let app = Router::new().fallback(get(move || {
        let body = body.clone();
        async move {
            (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                body,
            )
        }
    }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("bare_axum listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
