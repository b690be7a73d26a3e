//! The floor the exporter's CPU per account refresh is measured against in `bench/cpu.py`: a
//! client doing only what one refresh of a Delivery account must do, the same `GET
//! /api/delivery/accounts/{id}` through the same HTTP stack (reqwest with rustls, keep-alive,
//! the token in `X-Api-Token`) and the same decode of its body into a JSON value, with nothing
//! of the exporter around it: no pacer, no circuit, no store, no rendering. Loopback only.
//!
//! Usage: `cargo run --release --example minimal_client -- BASE_URL TOKEN_FILE FIRST_ID
//! ACCOUNTS CALLS CONCURRENCY [RATE]`: `CALLS` calls over the accounts `FIRST_ID ..
//! FIRST_ID + ACCOUNTS` in turn, `CONCURRENCY` at once, at most `RATE` a second when given (the
//! exporter's own rate, so that both wait alike between calls). Prints one line of JSON: the
//! calls, the failures, the seconds taken and the process's CPU seconds (user and system) over
//! the calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// User plus system CPU seconds of this process, from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: f64 = fields
        .get(11..13)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// `Some(value)` of the `n`-th argument, parsed.
fn arg<T: std::str::FromStr>(args: &[String], n: usize) -> Option<T> {
    args.get(n).and_then(|a| a.parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: minimal_client BASE_URL TOKEN_FILE FIRST_ID ACCOUNTS CALLS CONCURRENCY [RATE]";
    let (Some(base), Some(token_file)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let (Some(first), Some(accounts), Some(calls), Some(concurrency)) = (
        arg::<u64>(&args, 2),
        arg::<u64>(&args, 3).filter(|n| *n > 0),
        arg::<u64>(&args, 4).filter(|n| *n <= 10_000_000),
        arg::<usize>(&args, 5).filter(|n| (1..=256).contains(n)),
    ) else {
        return Err(usage.into());
    };
    let rate = arg::<f64>(&args, 6).filter(|r| *r > 0.0);
    let token = std::fs::read_to_string(token_file)?.trim_end().to_owned();
    // The exporter's runtime: tokio's multi-threaded scheduler, one worker per core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(256)
        .build()?;
    let base = base.trim_end_matches('/').to_owned();
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let (cpu0, took) = runtime.block_on(async {
        let cpu0 = cpu_seconds();
        let start = Instant::now();
        let mut workers = Vec::with_capacity(concurrency);
        for _ in 0..concurrency {
            let (client, base, token) = (client.clone(), base.clone(), token.clone());
            let (next, failed) = (next.clone(), failed.clone());
            workers.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        break;
                    }
                    if let Some(rate) = rate {
                        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate))
                            .await;
                    }
                    let url = format!("{base}/api/delivery/accounts/{}", first + i % accounts);
                    let ok = match client.get(&url).header("X-Api-Token", &token).send().await {
                        Ok(answer) if answer.status().is_success() => answer
                            .bytes()
                            .await
                            .ok()
                            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                            .and_then(|v| v.get("resources")?.get(0).cloned())
                            .is_some(),
                        _ => false,
                    };
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for w in workers {
            let _ = w.await;
        }
        (cpu0, start.elapsed())
    });
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{{\"calls\": {calls}, \"failed\": {}, \"seconds\": {:.3}, \"cpu_seconds\": {cpu:.3}}}",
        failed.load(Ordering::Relaxed),
        took.as_secs_f64()
    );
    Ok(())
}
