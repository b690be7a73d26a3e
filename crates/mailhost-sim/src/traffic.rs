//! Demo traffic: sends mail through the simulated Send API, following the traffic model of
//! `world::traffic`, so quotas, counters and suppression rejections move while someone watches
//! the exporter.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::world::config::SendIdentity;
use crate::world::fleet::DEMO_SEED;
use crate::world::traffic::{profile, request_body};

/// Sends through `POST {base_url}/v1/send` for each identity, a few messages per tick (a random
/// 1..=5 recipients, some on bouncing addresses that end up suppressed), every `tick`, until
/// `shutdown` is cancelled or `max_requests` requests were made (pass `u64::MAX` for no limit).
/// Never panics on errors: they are logged at debug level.
pub async fn run(
    base_url: String,
    identities: Vec<SendIdentity>,
    tick: Duration,
    max_requests: u64,
    shutdown: CancellationToken,
) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::debug!(error = %error.without_url(), "traffic generator: no HTTP client");
            return;
        }
    };
    let url = format!("{}/v1/send", base_url.trim_end_matches('/'));
    let mut rng = StdRng::seed_from_u64(DEMO_SEED);
    let mut interval = tokio::time::interval(tick.max(Duration::from_millis(1)));
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut made: u64 = 0;
    for tick_number in 0u64.. {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        for identity in &identities {
            let profile = profile(identity.account_id);
            if tick_number % profile.every != 0 {
                continue;
            }
            for _ in 0..profile.requests {
                if made >= max_requests {
                    return;
                }
                made += 1;
                let body = request_body(&mut rng, identity, &profile.recipients);
                let request = client
                    .post(&url)
                    .bearer_auth(&identity.token)
                    .json(&body)
                    .send();
                let response = tokio::select! {
                    () = shutdown.cancelled() => return,
                    response = request => response,
                };
                match response {
                    Ok(response) => {
                        let status = response.status();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        if status.is_success() {
                            tracing::debug!(
                                account = identity.account_id,
                                %status,
                                accepted = %body["accepted"],
                                rejected = %body["rejected"],
                                "traffic generator: send accepted"
                            );
                        } else {
                            tracing::debug!(
                                account = identity.account_id,
                                %status,
                                reason = %body["message"],
                                "traffic generator: send refused"
                            );
                        }
                    }
                    Err(error) => tracing::debug!(
                        account = identity.account_id,
                        error = %error.without_url(),
                        "traffic generator: send failed"
                    ),
                }
            }
        }
    }
}
