//! Demo traffic: sends mail through the simulated Send API so quotas, counters and suppression
//! rejections move while someone watches the exporter.

use std::ops::RangeInclusive;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::config::SendIdentity;
use super::fleet::{DEMO_BUSY, DEMO_DISABLED, DEMO_EXPIRING, DEMO_NEARLY_EXHAUSTED};
use super::send::BOUNCE_DOMAIN;

/// How one account sends: `requests` requests of `recipients` recipients every `every` ticks.
struct Profile {
    every: u64,
    requests: u32,
    recipients: RangeInclusive<usize>,
}

/// Rates per demo account, chosen for a one-second tick.
fn profile(account_id: i32) -> Profile {
    match account_id {
        // About six messages a second: its counters move every scrape.
        DEMO_BUSY => Profile {
            every: 1,
            requests: 2,
            recipients: 1..=5,
        },
        // 1.5 messages every 4 s, less the suppressed ones: the 500 messages it has left last
        // about 25 minutes, so it sits near exhaustion for a whole demo without running out early.
        DEMO_NEARLY_EXHAUSTED => Profile {
            every: 4,
            requests: 1,
            recipients: 1..=2,
        },
        DEMO_EXPIRING => Profile {
            every: 2,
            requests: 1,
            recipients: 1..=3,
        },
        // Refused (the account is disabled); kept rare so the logs stay readable.
        DEMO_DISABLED => Profile {
            every: 5,
            requests: 1,
            recipients: 1..=1,
        },
        _ => Profile {
            every: 1,
            requests: 1,
            recipients: 1..=5,
        },
    }
}

/// Share of recipients drawn from a handful of bouncing addresses: each bounces once per account
/// and is suppressed afterwards, so rejections show up too.
const BOUNCE_SHARE: f64 = 0.1;
const BOUNCE_ADDRESSES: u32 = 5;

fn recipient(rng: &mut StdRng) -> String {
    if rng.random_bool(BOUNCE_SHARE) {
        format!(
            "bounce-{}@{BOUNCE_DOMAIN}",
            rng.random_range(0..BOUNCE_ADDRESSES)
        )
    } else {
        format!("user{}@example.net", rng.random_range(0..100_000u32))
    }
}

fn request_body(
    rng: &mut StdRng,
    identity: &SendIdentity,
    recipients: &RangeInclusive<usize>,
) -> Value {
    let count = rng.random_range(recipients.clone());
    let to: Vec<String> = (0..count).map(|_| recipient(rng)).collect();
    json!({
        "messages": [{
            "from": identity.from,
            "to": to,
            "subject": "Your order has shipped",
            "text_body": "Simulated demo traffic.",
        }]
    })
}

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
    let mut rng = StdRng::seed_from_u64(super::fleet::DEMO_SEED);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearly_exhausted_account_lasts_over_twenty_minutes_at_one_tick_a_second() {
        let p = profile(DEMO_NEARLY_EXHAUSTED);
        let per_tick = f64::from(p.requests) * (*p.recipients.start() + *p.recipients.end()) as f64
            / 2.0
            / p.every as f64;
        let seconds_left = 500.0 / per_tick;
        assert!(seconds_left > 20.0 * 60.0, "{seconds_left}");
        assert!(
            per_tick * 30.0 >= 5.0,
            "quota must move visibly within 30 s"
        );
    }

    #[test]
    fn recipients_are_addresses() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let address = recipient(&mut rng);
            assert_eq!(address.matches('@').count(), 1, "{address}");
        }
    }
}
