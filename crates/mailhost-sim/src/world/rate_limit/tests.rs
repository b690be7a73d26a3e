//! The rate limiter's tests: each shape of limit and what it answers.

use std::time::Duration;

use serde_json::json;

use super::*;

impl Bucket {
    fn try_take(&mut self, now: Instant) -> bool {
        let allowed = self.has_token(now);
        if allowed {
            self.take_one();
        }
        allowed
    }
}

fn limit(rate: f64, burst: Option<f64>) -> RateLimit {
    RateLimit {
        burst,
        ..RateLimit::per_second(rate)
    }
}

#[test]
fn a_new_bucket_is_full_and_refills_at_its_rate_up_to_its_burst() {
    let t0 = Instant::now();
    let mut bucket = Bucket::full(2.0, 3.0, t0);
    for _ in 0..3 {
        assert!(bucket.try_take(t0));
    }
    assert!(!bucket.try_take(t0), "three tokens, three requests");
    // Two tokens a second: one more after half a second, not before.
    assert!(!bucket.try_take(t0 + Duration::from_millis(499)));
    assert!(bucket.try_take(t0 + Duration::from_millis(500)));
    assert!(!bucket.try_take(t0 + Duration::from_millis(500)));
    // A long idle time fills the bucket to its burst, no further.
    let later = t0 + Duration::from_secs(3600);
    for _ in 0..3 {
        assert!(bucket.try_take(later));
    }
    assert!(!bucket.try_take(later));
}

#[test]
fn a_client_that_waits_exactly_as_told_is_let_through() {
    let t0 = Instant::now();
    let mut limited = Limited::new(limit(1.0, Some(1.0)), t0);
    assert!(limited.take(t0).allowed);
    // Ten refills of a tenth of a token add up to a hair under one in floating point.
    for tenth in 1..10 {
        let refused = limited.take(t0 + Duration::from_millis(100 * tenth));
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 1);
    }
    assert!(limited.take(t0 + Duration::from_secs(1)).allowed);
}

#[test]
fn a_refused_request_is_told_when_one_token_will_be_available() {
    let t0 = Instant::now();
    let mut limited = Limited::new(limit(0.25, Some(2.0)), t0);
    let first = limited.take(t0);
    assert_eq!(
        (
            first.allowed,
            first.limit,
            first.remaining,
            first.reset_secs
        ),
        (true, 2, 1, 4)
    );
    assert_eq!(first.window_secs, 8);
    limited.take(t0);
    let refused = limited.take(t0 + Duration::from_secs(1));
    // A quarter token earned: three quarters at 0.25/s are 3 s away.
    assert!(!refused.allowed);
    assert_eq!(refused.remaining, 0);
    assert_eq!(refused.retry_after_secs, 3);
    assert_eq!(refused.reset_secs, 7);
    let fixed = RateLimit {
        retry_after_secs: Some(30),
        ..limit(0.25, Some(2.0))
    };
    let mut limited = Limited::new(fixed, t0);
    limited.take(t0);
    limited.take(t0);
    assert_eq!(limited.take(t0).retry_after_secs, 30);
}

#[test]
fn retry_after_is_at_least_one_second_even_at_high_rates() {
    let t0 = Instant::now();
    let mut limited = Limited::new(limit(1000.0, Some(1.0)), t0);
    limited.take(t0);
    let refused = limited.take(t0);
    assert_eq!((refused.allowed, refused.retry_after_secs), (false, 1));
    assert_eq!(refused.window_secs, 1);
}

#[test]
fn a_changed_limit_keeps_the_tokens_left_clamped_to_the_new_burst() {
    let t0 = Instant::now();
    let mut bucket = Bucket::full(1.0, 10.0, t0);
    for _ in 0..4 {
        bucket.try_take(t0);
    }
    bucket.reconfigure(1.0, 4.0, t0);
    assert_eq!(bucket.tokens(), 4.0, "six left, clamped to four");
    bucket.reconfigure(1.0, 100.0, t0);
    assert_eq!(bucket.tokens(), 4.0, "a larger burst does not add tokens");
    // Tokens earned at the old rate are kept; the new rate applies from the change on.
    bucket.reconfigure(0.5, 100.0, t0 + Duration::from_secs(2));
    assert_eq!(bucket.tokens(), 6.0);
    bucket.refill(t0 + Duration::from_secs(4));
    assert_eq!(bucket.tokens(), 7.0);
}

#[test]
fn the_default_burst_is_the_rate_but_at_least_one() {
    assert_eq!(limit(0.5, None).effective_burst(), 1.0);
    assert_eq!(limit(20.0, None).effective_burst(), 20.0);
    assert_eq!(limit(20.0, Some(3.0)).effective_burst(), 3.0);
}

#[test]
fn out_of_range_limits_are_refused_with_a_message_naming_the_member() {
    let cases = [
        (
            limit(0.0, None),
            "`rate` must be a number of requests per second from 0.01",
        ),
        (limit(f64::NAN, None), "got NaN"),
        (limit(f64::INFINITY, None), "`rate`"),
        (limit(100_001.0, None), "to 100000, got 100001"),
        (
            limit(1.0, Some(0.5)),
            "`burst` must be a number of requests from 1",
        ),
        (limit(1.0, Some(f64::INFINITY)), "`burst`"),
        (limit(1.0, Some(10_000_001.0)), "got 10000001; omit it"),
        (
            RateLimit {
                retry_after_secs: Some(86_401),
                ..limit(1.0, None)
            },
            "`retry_after_secs` must be at most 86400",
        ),
        (
            RateLimit {
                retry_after_secs: Some(5),
                retry_after: RetryAfterStyle::None,
                ..limit(1.0, None)
            },
            "set `retry_after` to \"seconds\" or \"http_date\", or drop `retry_after_secs`",
        ),
        (
            RateLimit {
                status: 500,
                ..limit(1.0, None)
            },
            "`status` must be one of 429, 503, 502, 504, 403, got 500",
        ),
        (
            RateLimit {
                status: 200,
                ..limit(1.0, None)
            },
            "`status` must be one of 429, 503, 502, 504, 403, got 200",
        ),
    ];
    for (bad, expected) in cases {
        let message = bad.validate().expect_err("refused");
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }
    for good in [
        limit(0.01, None),
        limit(100_000.0, Some(10_000_000.0)),
        limit(1.0, Some(1.0)),
        RateLimit {
            retry_after_secs: Some(86_400),
            retry_after: RetryAfterStyle::HttpDate,
            ..limit(1.0, None)
        },
        RateLimit {
            status: 503,
            ..limit(1.0, None)
        },
        RateLimit {
            status: 403,
            ..limit(1.0, None)
        },
    ] {
        assert_eq!(good.validate(), Ok(()), "{good:?}");
    }
}

#[test]
fn limits_are_written_in_snake_case_and_unknown_members_are_refused() {
    let read: RateLimit = serde_json::from_value(json!({
        "rate": 5, "retry_after": "http_date", "headers": "x_ratelimit"
    }))
    .expect("limit");
    assert_eq!(
        read,
        RateLimit {
            retry_after: RetryAfterStyle::HttpDate,
            headers: RateLimitHeaders::XRateLimit,
            ..RateLimit::per_second(5.0)
        }
    );
    assert_eq!(
        serde_json::to_value(&read).expect("json"),
        json!({"rate": 5.0, "burst": null, "retry_after": "http_date",
               "retry_after_secs": null, "headers": "x_ratelimit", "status": 429})
    );
    let slow_down: RateLimit =
        serde_json::from_value(json!({"rate": 1, "status": 503})).expect("limit");
    assert_eq!(slow_down.status, 503);
    assert!(serde_json::from_value::<RateLimit>(json!({"rate": 1, "status": "503"})).is_err());
    for (name, style) in [
        ("none", RateLimitHeaders::None),
        ("both", RateLimitHeaders::Both),
    ] {
        let read: RateLimit =
            serde_json::from_value(json!({"rate": 1, "headers": name})).expect("limit");
        assert_eq!(read.headers, style);
    }
    assert!(serde_json::from_value::<RateLimit>(json!({"rate": 1, "brust": 2})).is_err());
    assert!(serde_json::from_value::<RateLimit>(json!({"burst": 2})).is_err());
}

#[test]
fn only_known_management_tokens_can_be_limited() {
    let t0 = Instant::now();
    let limiter = RateLimiter::new(["alpha-token", "", "beta-token"]);
    let message = limiter
        .set(Some("made-up"), None, Some(limit(1.0, None)), t0)
        .expect_err("unknown token");
    assert!(
        message.contains("SimConfig::management_tokens"),
        "{message}"
    );
    assert!(
        !message.contains("made-up"),
        "never echo a token: {message}"
    );
    assert!(
        limiter
            .set(Some(""), None, Some(limit(1.0, None)), t0)
            .is_err(),
        "an empty token authenticates nobody"
    );
    assert_eq!(limiter.take("made-up", Route::DeliveryAccountGet, t0), None);
    assert_eq!(
        limiter.take("alpha-token", Route::DeliveryAccountGet, t0),
        None,
        "known but not limited"
    );
    limiter
        .set(Some("beta-token"), None, Some(limit(1.0, None)), t0)
        .expect("known token");
    assert!(
        limiter
            .take("beta-token", Route::DeliveryAccountGet, t0)
            .is_some_and(|d| d.allowed)
    );
    assert_eq!(limiter.slots().len(), 2);
}

#[test]
fn every_token_gets_its_own_bucket_and_lifting_forgets_it() {
    let t0 = Instant::now();
    let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
    limiter
        .set(None, None, Some(limit(1.0, None)), t0)
        .expect("valid");
    assert!(
        limiter
            .take("alpha-token", Route::DeliveryAccountGet, t0)
            .is_some_and(|d| d.allowed)
    );
    assert!(
        limiter
            .take("alpha-token", Route::DeliveryAccountGet, t0)
            .is_some_and(|d| !d.allowed)
    );
    assert!(
        limiter
            .take("beta-token", Route::DeliveryAccountGet, t0)
            .is_some_and(|d| d.allowed)
    );
    let listed = limiter.list();
    assert_eq!(
        listed.iter().map(|l| l.token.as_str()).collect::<Vec<_>>(),
        ["alph…", "beta…"]
    );
    assert_eq!((listed[0].allowed, listed[0].limited), (1, 1));
    limiter
        .set(Some("alpha-token"), None, None, t0)
        .expect("lift");
    assert_eq!(
        limiter.take("alpha-token", Route::DeliveryAccountGet, t0),
        None
    );
    assert_eq!(limiter.stats("alpha-token", None), None);
    assert_eq!(limiter.list().len(), 1);
}

#[test]
fn a_request_is_let_through_only_when_its_route_and_its_token_both_have_a_token() {
    let t0 = Instant::now();
    let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
    let daily = Route::TracemailDaily;
    let account = Route::DeliveryAccountGet;
    limiter
        .set(Some("alpha-token"), None, Some(limit(1.0, Some(3.0))), t0)
        .expect("valid");
    limiter
        .set(
            Some("alpha-token"),
            Some(daily),
            Some(limit(1.0, Some(1.0))),
            t0,
        )
        .expect("valid");
    let verdicts = |route| {
        (0..4)
            .map(|_| limiter.take("alpha-token", route, t0).map(|d| d.allowed))
            .collect::<Vec<_>>()
    };
    // The route's one token, then its refusals: they take nothing from the token's three.
    let first = limiter.take("alpha-token", daily, t0).expect("limited");
    assert_eq!((first.allowed, first.limit, first.remaining), (true, 1, 0));
    assert_eq!(verdicts(daily), [Some(false); 4]);
    // The route's answer, its own numbers; the token's other routes only meet its bucket.
    assert_eq!(
        verdicts(account),
        [Some(true), Some(true), Some(false), Some(false)]
    );
    let stats = |route| {
        let s = limiter.stats("alpha-token", route).expect("limited");
        (s.allowed, s.limited)
    };
    assert_eq!(stats(Some(daily)), (1, 4));
    assert_eq!(
        stats(None),
        (3, 2),
        "the route's refusals are not the token's"
    );
    // A second later both buckets hold one token, but the token-wide one goes first on the
    // account route; the daily route then finds its own but not the token's, and keeps its.
    let t1 = t0 + Duration::from_secs(1);
    assert!(
        limiter
            .take("alpha-token", account, t1)
            .is_some_and(|d| d.allowed)
    );
    let refused = limiter.take("alpha-token", daily, t1).expect("limited");
    assert_eq!(
        (refused.allowed, refused.limit),
        (false, 3),
        "the token's refusal"
    );
    assert_eq!(stats(Some(daily)), (1, 4), "not counted by the route");
    let t2 = t0 + Duration::from_secs(2);
    let both = limiter.take("alpha-token", daily, t2).expect("limited");
    assert_eq!((both.allowed, both.limit), (true, 1), "the route's numbers");
    assert_eq!(stats(None), (5, 3));
    // The other token is free, even on the limited route.
    assert_eq!(limiter.take("beta-token", daily, t0), None);
}

#[test]
fn route_limits_are_bounded_listed_after_the_token_wide_ones_and_lifted_one_by_one() {
    let t0 = Instant::now();
    let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
    let message = limiter
        .set(None, Some(Route::Send), Some(limit(1.0, None)), t0)
        .expect_err("the Send API");
    assert!(
        message.contains("is not a Management API route"),
        "{message}"
    );
    for _ in 0..2 {
        for route in Route::management() {
            limiter
                .set(None, Some(route), Some(limit(1.0, None)), t0)
                .expect("valid");
        }
    }
    let routes = Route::management().count();
    assert_eq!(
        limiter.list().len(),
        2 * routes,
        "one bucket per (token, route)"
    );
    limiter
        .set(Some("beta-token"), None, Some(limit(2.0, None)), t0)
        .expect("valid");
    let listed = limiter.list();
    assert_eq!((listed[0].token.as_str(), listed[0].route), ("beta…", None));
    assert_eq!(
        (listed[1].token.as_str(), listed[1].route),
        ("alph…", Some(Route::DeliveryAccountGet))
    );
    assert_eq!(listed[routes + 1].token, "beta…");
    // Lifting the token-wide limit leaves the route limits; lifting one route, the others.
    limiter.set(None, None, None, t0).expect("lift");
    assert_eq!(limiter.list().len(), 2 * routes);
    limiter
        .set(Some("alpha-token"), Some(Route::TracemailDaily), None, t0)
        .expect("lift");
    assert_eq!(limiter.list().len(), 2 * routes - 1);
    assert_eq!(
        limiter.stats("alpha-token", Some(Route::TracemailDaily)),
        None
    );
    assert!(
        limiter
            .stats("beta-token", Some(Route::TracemailDaily))
            .is_some()
    );
    assert!(format!("{limiter:?}").contains("route_limits: Some(21)"));
}

#[test]
fn only_the_most_recent_requests_are_remembered() {
    let t0 = Instant::now();
    let mut limited = Limited::new(limit(1.0, Some(2.0)), t0);
    for _ in 0..RECENT_REQUESTS + 5 {
        limited.take(t0);
    }
    let stats = limited.stats();
    assert_eq!(
        (stats.allowed, stats.limited),
        (2, RECENT_REQUESTS as u64 + 3)
    );
    assert_eq!(stats.recent.len(), RECENT_REQUESTS);
    assert!(
        stats.recent.iter().all(|(_, allowed)| !allowed),
        "the two allowed were first"
    );
    assert!(stats.recent.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn previews_never_show_a_whole_token() {
    assert_eq!(preview("test-management-token"), "test…");
    assert_eq!(preview("abcdefgh"), "abcd…");
    assert_eq!(preview("abcd"), "ab…");
    assert_eq!(preview("a"), "…");
    assert_eq!(preview("ééééééééé"), "éééé…");
    let limiter = RateLimiter::new(["very-secret-management"]);
    limiter
        .set(None, None, Some(limit(1.0, None)), Instant::now())
        .expect("valid");
    assert!(!format!("{limiter:?}").contains("secret"));
}
