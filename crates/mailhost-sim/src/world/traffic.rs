//! The demo traffic model: how often each demo account sends, to how many recipients, and which
//! of them bounce. The driver that sends it over HTTP is `crate::traffic`.

use std::ops::RangeInclusive;

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::config::SendIdentity;
use super::fleet::{DEMO_BUSY, DEMO_DISABLED, DEMO_EXPIRING, DEMO_NEARLY_EXHAUSTED};
use super::sending::BOUNCE_DOMAIN;

/// How one account sends: `requests` requests of `recipients` recipients every `every` ticks.
pub(crate) struct Profile {
    pub every: u64,
    pub requests: u32,
    pub recipients: RangeInclusive<usize>,
}

/// Rates per demo account, chosen for a one-second tick.
pub(crate) fn profile(account_id: i32) -> Profile {
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

pub(crate) fn request_body(
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

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

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
