//! Rate limits of the Management API on the wire, per token and per route of a token: the bucket,
//! its 429s (or the status a limit refuses with instead) and headers, how a route's limit and its token's combine, runtime changes, isolation
//! between tokens, hit counts, the control plane and configuration.
//! Every test runs on paused tokio time, so a slow machine cannot refill a bucket behind its back.

use crate::helpers::*;

use tokio::time::advance;

/// The simulator clock every test here is frozen at, for exact HTTP dates.
const NOW: &str = "2026-11-22T10:00:00Z";

fn limit(rate: f64, burst: f64) -> RateLimit {
    RateLimit {
        burst: Some(burst),
        ..RateLimit::per_second(rate)
    }
}

/// The test fleet on a frozen clock with `limit` on the unrestricted token only.
fn limited(limit: RateLimit) -> (Simulator, Router) {
    let sim = frozen_sim(NOW);
    sim.set_rate_limit(Some(TOKEN), Some(limit))
        .expect("valid limit");
    let app = loopback_app(&sim);
    (sim, app)
}

/// The status of `n` requests for account 1 with the unrestricted token.
async fn statuses(app: &Router, n: usize) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(call(app, get_account("1")).await.status.as_u16());
    }
    out
}

fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer.headers.get(name).and_then(|v| v.to_str().ok())
}

/// The three `X-RateLimit-*` values of an answer: limit, remaining, reset.
fn x_ratelimit(answer: &Answer) -> (Option<&str>, Option<&str>, Option<&str>) {
    (
        header(answer, "x-ratelimit-limit"),
        header(answer, "x-ratelimit-remaining"),
        header(answer, "x-ratelimit-reset"),
    )
}

fn ietf(answer: &Answer) -> (Option<&str>, Option<&str>) {
    (
        header(answer, "ratelimit-policy"),
        header(answer, "ratelimit"),
    )
}

const NO_X_RATELIMIT: (Option<&str>, Option<&str>, Option<&str>) = (None, None, None);

#[tokio::test(start_paused = true)]
async fn the_bucket_refills_at_its_rate_and_caps_at_its_burst() {
    let (_sim, app) = limited(limit(2.0, 3.0));
    assert_eq!(statuses(&app, 4).await, [200, 200, 200, 429]);
    // Two tokens a second: one after half a second, not before.
    advance(Duration::from_millis(499)).await;
    assert_eq!(statuses(&app, 1).await, [429]);
    advance(Duration::from_millis(1)).await;
    assert_eq!(statuses(&app, 2).await, [200, 429]);
    // An hour idle fills the bucket to its burst and no further.
    advance(Duration::from_secs(3600)).await;
    assert_eq!(statuses(&app, 4).await, [200, 200, 200, 429]);
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_answered_429_with_retry_after_in_each_style() {
    let cases = [
        (RetryAfterStyle::Seconds, None, Some("2")),
        (
            RetryAfterStyle::HttpDate,
            None,
            Some("Sun, 22 Nov 2026 10:00:02 GMT"),
        ),
        (RetryAfterStyle::None, None, None),
        (RetryAfterStyle::Seconds, Some(30), Some("30")),
        (
            RetryAfterStyle::HttpDate,
            Some(30),
            Some("Sun, 22 Nov 2026 10:00:30 GMT"),
        ),
    ];
    for (style, fixed, expected) in cases {
        let (_sim, app) = limited(RateLimit {
            retry_after: style,
            retry_after_secs: fixed,
            ..limit(0.5, 2.0)
        });
        assert_eq!(statuses(&app, 2).await, [200, 200], "{style:?}");
        let refused = call(&app, get_account("1")).await;
        let message = refused.error(StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.json()["code"], "rate_limited");
        assert!(message.contains("rate limit exceeded"), "{message}");
        assert_eq!(
            header(&refused, "retry-after"),
            expected,
            "{style:?} {fixed:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_counts_the_seconds_until_the_next_token_rounded_up() {
    let (_sim, app) = limited(limit(0.5, 1.0));
    assert_eq!(statuses(&app, 1).await, [200]);
    let answer = call(&app, get_account("1")).await;
    assert_eq!(header(&answer, "retry-after"), Some("2"));
    advance(Duration::from_millis(1500)).await;
    // Three quarters of a token earned: half a second to go, told as one.
    let answer = call(&app, get_account("1")).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&answer, "retry-after"), Some("1"));
    advance(Duration::from_secs(1)).await;
    assert_eq!(statuses(&app, 1).await, [200]);
}

#[tokio::test(start_paused = true)]
async fn x_ratelimit_headers_give_the_limit_the_tokens_left_and_the_seconds_until_full() {
    let (_sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::XRateLimit,
        ..limit(0.5, 3.0)
    });
    for (remaining, reset) in [("2", "2"), ("1", "4"), ("0", "6")] {
        let answer = call(&app, get_account("1")).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(
            x_ratelimit(&answer),
            (Some("3"), Some(remaining), Some(reset))
        );
        assert_eq!(ietf(&answer), (None, None));
    }
    let refused = call(&app, get_account("1")).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(x_ratelimit(&refused), (Some("3"), Some("0"), Some("6")));
    advance(Duration::from_secs(1)).await;
    // Half a token earned: still refused, five seconds from full.
    let refused = call(&app, get_account("1")).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(x_ratelimit(&refused), (Some("3"), Some("0"), Some("5")));
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    advance(Duration::from_secs(60)).await;
    let full = call(&app, get_account("1")).await;
    assert_eq!(x_ratelimit(&full), (Some("3"), Some("2"), Some("2")));
}

#[tokio::test(start_paused = true)]
async fn ietf_headers_give_the_policy_and_the_tokens_left_as_structured_fields() {
    let (_sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::Ietf,
        ..limit(0.5, 3.0)
    });
    let policy = Some("\"default\";q=3;w=6");
    for state in [
        "\"default\";r=2;t=2",
        "\"default\";r=1;t=4",
        "\"default\";r=0;t=6",
    ] {
        let answer = call(&app, get_account("1")).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(ietf(&answer), (policy, Some(state)));
        assert_eq!(x_ratelimit(&answer), NO_X_RATELIMIT);
    }
    let refused = call(&app, get_account("1")).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(ietf(&refused), (policy, Some("\"default\";r=0;t=6")));
    // The window is at least a second, even when the burst refills faster.
    let (_sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::Ietf,
        ..limit(50.0, 10.0)
    });
    let answer = call(&app, get_account("1")).await;
    assert_eq!(
        ietf(&answer),
        (Some("\"default\";q=10;w=1"), Some("\"default\";r=9;t=1"))
    );
}

#[tokio::test(start_paused = true)]
async fn both_styles_together_give_all_five_headers_on_every_answer() {
    let (_sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::Both,
        ..limit(1.0, 2.0)
    });
    let ok = call(&app, get_account("1")).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(x_ratelimit(&ok), (Some("2"), Some("1"), Some("1")));
    assert_eq!(
        ietf(&ok),
        (Some("\"default\";q=2;w=2"), Some("\"default\";r=1;t=1"))
    );
    // The handler's own errors carry them too.
    let missing = call(&app, get_account("999")).await;
    missing.error(StatusCode::NOT_FOUND);
    assert_eq!(x_ratelimit(&missing), (Some("2"), Some("0"), Some("2")));
    assert_eq!(
        ietf(&missing),
        (Some("\"default\";q=2;w=2"), Some("\"default\";r=0;t=2"))
    );
    let refused = call(&app, get_account("1")).await;
    refused.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(x_ratelimit(&refused), (Some("2"), Some("0"), Some("2")));
    assert_eq!(ietf(&refused).1, Some("\"default\";r=0;t=2"));
    assert_eq!(header(&refused, "retry-after"), Some("1"));
}

#[tokio::test(start_paused = true)]
async fn without_a_header_style_answers_carry_no_rate_limit_headers() {
    let (_sim, app) = limited(limit(1.0, 1.0));
    for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let answer = call(&app, get_account("1")).await;
        assert_eq!(answer.status, expected);
        assert_eq!(x_ratelimit(&answer), NO_X_RATELIMIT);
        assert_eq!(ietf(&answer), (None, None));
    }
}

#[tokio::test(start_paused = true)]
async fn a_limit_changed_at_runtime_applies_at_once_with_the_tokens_clamped() {
    let (sim, app) = limited(limit(1.0, 10.0));
    assert_eq!(statuses(&app, 2).await, [200, 200]);
    // Eight tokens left; a burst of three clamps them to three.
    let smaller = RateLimit {
        headers: RateLimitHeaders::XRateLimit,
        ..limit(1.0, 3.0)
    };
    sim.set_rate_limit(Some(TOKEN), Some(smaller))
        .expect("valid");
    let answer = call(&app, get_account("1")).await;
    assert_eq!(x_ratelimit(&answer), (Some("3"), Some("2"), Some("1")));
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
    // A faster rate keeps the empty bucket empty, then refills at the new rate.
    sim.set_rate_limit(Some(TOKEN), Some(limit(1000.0, 3.0)))
        .expect("valid");
    assert_eq!(statuses(&app, 1).await, [429]);
    advance(Duration::from_millis(2)).await;
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
    let stats = sim.rate_limit_stats(TOKEN).expect("limited");
    assert_eq!(
        (stats.allowed, stats.limited),
        (7, 3),
        "counts survive a change"
    );
    // Lifted: nothing is limited or counted any more; set again, the bucket starts full.
    sim.set_rate_limit(Some(TOKEN), None).expect("lift");
    assert_eq!(statuses(&app, 20).await, [200; 20]);
    assert_eq!(sim.rate_limit_stats(TOKEN), None);
    sim.set_rate_limit(Some(TOKEN), Some(limit(1.0, 2.0)))
        .expect("valid");
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
}

#[tokio::test(start_paused = true)]
async fn limits_are_per_token_and_unknown_tokens_get_401_without_a_bucket() {
    let (sim, app) = limited(limit(1.0, 1.0));
    assert_eq!(statuses(&app, 2).await, [200, 429]);
    // The scoped token has no limit.
    for _ in 0..10 {
        assert_eq!(
            call(&app, get("/api/delivery/accounts/2", SCOPED))
                .await
                .status,
            StatusCode::OK
        );
    }
    for _ in 0..10 {
        call(&app, get("/api/delivery/accounts/1", "made-up-token"))
            .await
            .error(StatusCode::UNAUTHORIZED);
        call(
            &app,
            request(Method::GET, "/api/delivery/accounts/1", None, None),
        )
        .await
        .error(StatusCode::UNAUTHORIZED);
    }
    assert_eq!(sim.rate_limit_stats("made-up-token"), None);
    let message = sim
        .set_rate_limit(Some("made-up-token"), Some(limit(1.0, 1.0)))
        .expect_err("unknown token");
    assert!(
        message.contains("name one of `SimConfig::management_tokens`"),
        "{message}"
    );
    assert!(!message.contains("made-up-token"), "{message}");
    // Every token limited: each has its own bucket, the first keeping its empty one.
    sim.set_rate_limit(None, Some(limit(1.0, 1.0)))
        .expect("valid");
    assert_eq!(statuses(&app, 1).await, [429]);
    let scoped = |app: Router| async move {
        call(&app, get("/api/delivery/accounts/2", SCOPED))
            .await
            .status
            .as_u16()
    };
    assert_eq!(scoped(app.clone()).await, 200);
    assert_eq!(scoped(app.clone()).await, 429);
    advance(Duration::from_secs(1)).await;
    assert_eq!(statuses(&app, 1).await, [200]);
    assert_eq!(scoped(app.clone()).await, 200);
    assert_eq!(sim.rate_limit_stats(SCOPED).map(|s| s.allowed), Some(2));
}

#[tokio::test(start_paused = true)]
async fn the_send_api_and_the_control_plane_are_never_limited() {
    let (_sim, app) = limited(limit(1.0, 1.0));
    assert_eq!(statuses(&app, 2).await, [200, 429]);
    for _ in 0..3 {
        // Even with the limited management token beside the bearer token.
        let mut send = send_req(
            "/v1/send",
            SEND_1,
            mail("shop@shop.example", &["r@example.net"]),
        );
        send.headers_mut().insert(
            MANAGEMENT_TOKEN_HEADER,
            TOKEN.parse().expect("header value"),
        );
        let answer = call(&app, send).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
        assert_eq!(header(&answer, "x-ratelimit-limit"), None);
        let hits = call(&app, get("/_sim/hits", TOKEN)).await;
        assert_eq!(hits.status, StatusCode::OK);
    }
}

#[tokio::test(start_paused = true)]
async fn the_limiter_answers_before_authentication_and_before_faults() {
    let (sim, app) = limited(limit(1.0, 1.0));
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            ..FaultSpec::default()
        },
    );
    call(&app, get_account("1"))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    let refused = call(&app, get_account("1")).await;
    refused.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.json()["code"], "rate_limited");
    sim.clear_faults();
    // A scoped token asking for an account it may not see: 403 while it has tokens, then 429.
    sim.set_rate_limit(Some(SCOPED), Some(limit(1.0, 1.0)))
        .expect("valid");
    for expected in [StatusCode::FORBIDDEN, StatusCode::TOO_MANY_REQUESTS] {
        call(&app, get("/api/delivery/accounts/1", SCOPED))
            .await
            .error(expected);
    }
}

#[tokio::test(start_paused = true)]
async fn limited_requests_are_counted_in_hits_exactly_once() {
    let (sim, app) = limited(limit(1.0, 1.0));
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            numbers_as_strings: true,
            ..FaultSpec::default()
        },
    );
    assert_eq!(statuses(&app, 5).await, [200, 429, 429, 429, 429]);
    assert_eq!(sim.hits("/api/delivery/accounts/1"), 5);
    let hits = call(&app, get("/_sim/hits", TOKEN)).await.json();
    assert_eq!(hits["hits"]["/api/delivery/accounts/1"], 5);
    // Unlimited requests are still counted once each.
    call(&app, get("/api/delivery/accounts/2", SCOPED)).await;
    assert_eq!(sim.hits("/api/delivery/accounts/2"), 1);
    let stats = sim.rate_limit_stats(TOKEN).expect("limited");
    assert_eq!((stats.allowed, stats.limited), (1, 4));
    assert_eq!(
        stats
            .recent
            .iter()
            .map(|(_, allowed)| *allowed)
            .collect::<Vec<_>>(),
        [true, false, false, false, false]
    );
    assert!(stats.recent.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[tokio::test(start_paused = true)]
async fn the_control_plane_sets_lists_masked_and_lifts_rate_limits() {
    let sim = frozen_sim(NOW);
    let app = loopback_app(&sim);
    let put = |body: Value| mgmt(Method::PUT, "/_sim/rate_limit", TOKEN, Some(body));
    let answer = call(
        &app,
        put(json!({"token": TOKEN, "rate": 1, "burst": 2, "headers": "x_ratelimit"})),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
    assert_eq!(
        answer.json(),
        json!({"rate_limits": [{
            "token": "test…",
            "route": null,
            "limit": {"rate": 1.0, "burst": 2.0, "retry_after": "seconds",
                      "retry_after_secs": null, "headers": "x_ratelimit", "status": 429},
            "allowed": 0,
            "limited": 0,
        }]})
    );
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await;
    assert_eq!(listed.json()["rate_limits"][0]["allowed"], 2);
    assert_eq!(listed.json()["rate_limits"][0]["limited"], 1);

    // Without a token: every management token, each its own bucket.
    let answer = call(&app, put(json!({"rate": 5, "retry_after": "http_date"}))).await;
    assert_eq!(answer.status, StatusCode::OK);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await;
    let text = String::from_utf8_lossy(&listed.bytes).into_owned();
    assert!(!text.contains(TOKEN) && !text.contains(SCOPED), "{text}");
    let entries = listed.json()["rate_limits"].clone();
    let previews: Vec<&str> = entries
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|e| e["token"].as_str())
        .collect();
    assert_eq!(previews, ["test…", "scop…"]);
    assert_eq!(entries[0]["limit"]["retry_after"], "http_date");
    assert_eq!(
        entries[0]["allowed"], 2,
        "the counts of a changed limit stay"
    );
    assert_eq!(sim.rate_limit_stats(SCOPED).map(|s| s.allowed), Some(0));

    let delete = |body: Option<Value>| mgmt(Method::DELETE, "/_sim/rate_limit", TOKEN, body);
    let answer = call(&app, delete(Some(json!({"token": SCOPED})))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    assert_eq!(listed["rate_limits"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["rate_limits"][0]["token"], "test…");
    let answer = call(&app, delete(None)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    assert_eq!(listed, json!({"rate_limits": []}));
    assert_eq!(statuses(&app, 20).await, [200; 20]);
}

#[tokio::test(start_paused = true)]
async fn the_control_plane_refuses_bad_rate_limit_bodies_and_changes_nothing() {
    let sim = frozen_sim(NOW);
    let app = loopback_app(&sim);
    let cases = [
        (
            json!({"rate": 0}),
            "`rate` must be a number of requests per second",
        ),
        (json!({"rate": 1e6}), "to 100000, got 1000000"),
        (
            json!({"rate": 1, "burst": 0.5}),
            "`burst` must be a number of requests from 1",
        ),
        (
            json!({"rate": 1, "retry_after_secs": 86401}),
            "at most 86400",
        ),
        (
            json!({"rate": 1, "retry_after": "none", "retry_after_secs": 3}),
            "or drop `retry_after_secs`",
        ),
        (
            json!({"rate": 1, "token": "made-up-token"}),
            "not one of the simulator's management tokens",
        ),
        (json!({"rate": 1, "token": 5}), "`token` must be a string"),
        (json!({"rate": 1, "brust": 2}), "unknown field `brust`"),
        (json!({"burst": 2}), "missing field `rate`"),
        (
            json!({"rate": 1, "headers": "x-ratelimit"}),
            "unknown variant `x-ratelimit`",
        ),
        (json!({"rate": "fast"}), "invalid rate limit"),
        (
            json!({"rate": 1, "status": 500}),
            "`status` must be one of 429, 503, 502, 504, 403, got 500",
        ),
        (
            json!({"rate": 1, "status": 200}),
            "`status` must be one of 429, 503, 502, 504, 403, got 200",
        ),
        (json!({"rate": 1, "status": "503"}), "invalid rate limit"),
        (json!({"rate": 1, "status": 70000}), "invalid rate limit"),
    ];
    for (body, expected) in cases {
        let message = call(
            &app,
            mgmt(Method::PUT, "/_sim/rate_limit", TOKEN, Some(body.clone())),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{body}: {message:?}");
        assert!(!message.contains("made-up-token"), "{message}");
    }
    let empty = call(
        &app,
        request(
            Method::PUT,
            "/_sim/rate_limit",
            Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned())),
            None,
        ),
    )
    .await;
    empty.error(StatusCode::BAD_REQUEST);
    for body in [json!({"token": "made-up-token"}), json!({"tok": TOKEN})] {
        call(
            &app,
            mgmt(Method::DELETE, "/_sim/rate_limit", TOKEN, Some(body)),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
    }
    // Only an unrestricted management token may use it.
    let good = json!({"rate": 1});
    call(
        &app,
        mgmt(Method::PUT, "/_sim/rate_limit", SCOPED, Some(good.clone())),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    call(&app, get("/_sim/rate_limits", SCOPED))
        .await
        .error(StatusCode::FORBIDDEN);
    call(
        &app,
        request(Method::DELETE, "/_sim/rate_limit", None, None),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    assert_eq!(listed, json!({"rate_limits": []}));
    assert_eq!(statuses(&app, 20).await, [200; 20]);
}

#[tokio::test(start_paused = true)]
async fn rate_limits_of_the_configuration_apply_from_the_start() {
    let config = SimConfig {
        rate_limits: vec![TokenRateLimit {
            token: SCOPED.to_owned(),
            limit: limit(1.0, 2.0),
        }],
        ..config()
    };
    let sim = Simulator::try_new(config).expect("valid");
    let app = loopback_app(&sim);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            call(&app, get("/api/delivery/accounts/2", SCOPED))
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(seen, [200, 200, 429]);
    assert_eq!(statuses(&app, 5).await, [200; 5], "the other token is free");
}

#[test]
fn bad_rate_limits_in_the_configuration_are_refused_without_showing_the_token() {
    let with = |token: &str, limit: RateLimit| SimConfig {
        rate_limits: vec![
            TokenRateLimit {
                token: TOKEN.to_owned(),
                limit: RateLimit::per_second(1.0),
            },
            TokenRateLimit {
                token: token.to_owned(),
                limit,
            },
        ],
        ..config()
    };
    let error = Simulator::try_new(with("made-up-token", RateLimit::per_second(1.0)))
        .expect_err("unknown token");
    assert!(matches!(
        error,
        SimConfigError::BadRateLimit { index: 1, .. }
    ));
    let message = error.to_string();
    assert!(
        message.starts_with("rate_limits entry 1: `token` is not one"),
        "{message}"
    );
    assert!(!message.contains("made-up-token"), "{message}");
    let message = Simulator::try_new(with(SCOPED, RateLimit::per_second(-1.0)))
        .expect_err("bad rate")
        .to_string();
    assert!(message.contains("`rate` must be"), "{message}");
    let printed = format!("{:?}", with(SCOPED, RateLimit::per_second(1.0)));
    assert!(
        !printed.contains(TOKEN) && !printed.contains(SCOPED),
        "{printed}"
    );
}

const DAILY_1: &str = "/api/delivery/tracemail/daily/1";
const DAILY_2: &str = "/api/delivery/tracemail/daily/2";

/// The status of `n` requests to `path` with `token`.
async fn statuses_of(app: &Router, path: &str, token: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(call(app, get(path, token)).await.status.as_u16());
    }
    out
}

/// The allowed and limited counts of one limit, if it is set.
fn counts(stats: Option<RateLimitStats>) -> Option<(u64, u64)> {
    stats.map(|s| (s.allowed, s.limited))
}

#[tokio::test(start_paused = true)]
async fn a_route_limit_refuses_only_its_route_while_the_tokens_other_routes_stay_free() {
    let sim = frozen_sim(NOW);
    sim.set_route_rate_limit(Some(TOKEN), Route::TracemailDaily, Some(limit(1.0, 2.0)))
        .expect("valid limit");
    let app = loopback_app(&sim);
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 3).await, [200, 200, 429]);
    let refused = call(&app, get(DAILY_1, TOKEN)).await;
    refused.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    // The token's other routes, and the same route for another token, know no limit.
    assert_eq!(statuses(&app, 20).await, [200; 20]);
    assert_eq!(statuses_of(&app, DAILY_2, SCOPED, 5).await, [200; 5]);
    assert_eq!(
        counts(sim.route_rate_limit_stats(TOKEN, Route::TracemailDaily)),
        Some((2, 2))
    );
    assert_eq!(sim.rate_limit_stats(TOKEN), None, "no token-wide limit");
    assert_eq!(
        sim.route_rate_limit_stats(TOKEN, Route::DeliveryAccountGet),
        None
    );
    assert_eq!(
        sim.route_rate_limit_stats(SCOPED, Route::TracemailDaily),
        None
    );
    advance(Duration::from_secs(1)).await;
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 2).await, [200, 429]);
    // Lifted, the route is free again.
    sim.set_route_rate_limit(Some(TOKEN), Route::TracemailDaily, None)
        .expect("lift");
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 10).await, [200; 10]);
    assert_eq!(
        sim.route_rate_limit_stats(TOKEN, Route::TracemailDaily),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn both_limits_apply_together_and_a_refusal_spends_neither_bucket() {
    // The token refills fast, its daily route slowly (one token in ten seconds).
    let (sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::XRateLimit,
        ..limit(4.0, 3.0)
    });
    sim.set_route_rate_limit(
        Some(TOKEN),
        Route::TracemailDaily,
        Some(RateLimit {
            headers: RateLimitHeaders::XRateLimit,
            ..limit(0.1, 1.0)
        }),
    )
    .expect("valid limit");
    assert_eq!(
        statuses_of(&app, DAILY_1, TOKEN, 4).await,
        [200, 429, 429, 429]
    );
    // The route's three refusals took nothing from the token: two of its three are left.
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
    advance(Duration::from_secs(10)).await;
    assert_eq!(statuses(&app, 3).await, [200, 200, 200]);
    // Now the route has a token and the token none: refused by the token, with its numbers...
    let refused = call(&app, get(DAILY_1, TOKEN)).await;
    refused.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(x_ratelimit(&refused).0, Some("3"), "the token's burst");
    // ...and the route kept its token: a quarter second gives the token one, and both let it
    // through, the answer carrying the route's numbers.
    advance(Duration::from_millis(250)).await;
    let both = call(&app, get(DAILY_1, TOKEN)).await;
    assert_eq!(both.status, StatusCode::OK);
    assert_eq!(x_ratelimit(&both), (Some("1"), Some("0"), Some("10")));
    assert_eq!(
        counts(sim.route_rate_limit_stats(TOKEN, Route::TracemailDaily)),
        Some((2, 3)),
        "the token's refusal is not the route's"
    );
    assert_eq!(
        counts(sim.rate_limit_stats(TOKEN)),
        Some((7, 2)),
        "the route's refusals are not the token's"
    );
    // Lifting the token-wide limit leaves the route's.
    sim.set_rate_limit(Some(TOKEN), None).expect("lift");
    assert_eq!(statuses(&app, 10).await, [200; 10]);
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 1).await, [429]);
}

#[tokio::test(start_paused = true)]
async fn rate_limit_headers_are_the_routes_on_a_limited_route_and_the_tokens_elsewhere() {
    let (sim, app) = limited(RateLimit {
        headers: RateLimitHeaders::XRateLimit,
        ..limit(1.0, 10.0)
    });
    sim.set_route_rate_limit(
        Some(TOKEN),
        Route::TracemailDaily,
        Some(RateLimit {
            headers: RateLimitHeaders::Both,
            retry_after: RetryAfterStyle::HttpDate,
            ..limit(0.5, 2.0)
        }),
    )
    .expect("valid limit");
    let account = call(&app, get_account("1")).await;
    assert_eq!(x_ratelimit(&account), (Some("10"), Some("9"), Some("1")));
    assert_eq!(ietf(&account), (None, None));
    let daily = call(&app, get(DAILY_1, TOKEN)).await;
    assert_eq!(daily.status, StatusCode::OK);
    assert_eq!(x_ratelimit(&daily), (Some("2"), Some("1"), Some("2")));
    assert_eq!(
        ietf(&daily),
        (Some("\"default\";q=2;w=4"), Some("\"default\";r=1;t=2"))
    );
    assert_eq!(
        x_ratelimit(&call(&app, get(DAILY_1, TOKEN)).await),
        (Some("2"), Some("0"), Some("4"))
    );
    let refused = call(&app, get(DAILY_1, TOKEN)).await;
    refused.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(x_ratelimit(&refused), (Some("2"), Some("0"), Some("4")));
    assert_eq!(
        header(&refused, "retry-after"),
        Some("Sun, 22 Nov 2026 10:00:02 GMT"),
        "the route's Retry-After style"
    );
    // The token spent three (not four): the route's refusal took none of its tokens.
    let account = call(&app, get_account("1")).await;
    assert_eq!(x_ratelimit(&account), (Some("10"), Some("6"), Some("4")));
    // A route limit without headers governs its answers: none, though the token has some.
    sim.set_route_rate_limit(Some(TOKEN), Route::MigrationStats, Some(limit(5.0, 5.0)))
        .expect("valid limit");
    let migration = call(&app, get("/api/migrations/MG00000001/stats", TOKEN)).await;
    assert_eq!(x_ratelimit(&migration), NO_X_RATELIMIT);
}

#[tokio::test(start_paused = true)]
async fn the_control_plane_sets_lists_and_lifts_route_limits_scope_by_scope() {
    let sim = frozen_sim(NOW);
    let app = loopback_app(&sim);
    let put = |body: Value| mgmt(Method::PUT, "/_sim/rate_limit", TOKEN, Some(body));
    let delete = |body: Option<Value>| mgmt(Method::DELETE, "/_sim/rate_limit", TOKEN, body);
    let listing = |app: Router| async move {
        let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
        listed["rate_limits"]
            .as_array()
            .expect("list")
            .iter()
            .map(|e| (e["token"].clone(), e["route"].clone()))
            .collect::<Vec<_>>()
    };
    let answer = call(
        &app,
        put(json!({"token": TOKEN, "route": "tracemail_daily", "rate": 1, "burst": 1})),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
    assert_eq!(
        answer.json(),
        json!({"rate_limits": [{
            "token": "test…",
            "route": "tracemail_daily",
            "limit": {"rate": 1.0, "burst": 1.0, "retry_after": "seconds",
                      "retry_after_secs": null, "headers": "none", "status": 429},
            "allowed": 0,
            "limited": 0,
        }]})
    );
    // A token-wide limit, and one route of every token: token-wide limits come first.
    let answer = call(&app, put(json!({"token": TOKEN, "rate": 5}))).await;
    assert_eq!(answer.status, StatusCode::OK);
    let answer = call(
        &app,
        put(json!({"route": "delivery_account_get", "rate": 2})),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        listing(app.clone()).await,
        [
            (json!("test…"), json!(null)),
            (json!("test…"), json!("delivery_account_get")),
            (json!("test…"), json!("tracemail_daily")),
            (json!("scop…"), json!("delivery_account_get")),
        ]
    );
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 2).await, [200, 429]);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    let entries = &listed["rate_limits"];
    // Each limit its own counts; bench scripts read the token-wide one at [0].
    assert_eq!(
        (&entries[0]["allowed"], &entries[0]["limited"]),
        (&json!(1), &json!(0))
    );
    assert_eq!(
        (&entries[2]["allowed"], &entries[2]["limited"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        (&entries[3]["allowed"], &entries[3]["limited"]),
        (&json!(0), &json!(0))
    );
    assert_eq!(entries[3]["limit"]["rate"], 2.0);

    // Without a route: the token-wide limit only.
    let answer = call(&app, delete(Some(json!({"token": TOKEN})))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert_eq!(listing(app.clone()).await.len(), 3);
    assert_eq!(sim.rate_limit_stats(TOKEN), None);
    // With a token and a route: that one.
    let answer = call(
        &app,
        delete(Some(json!({"token": TOKEN, "route": "tracemail_daily"}))),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert_eq!(
        listing(app.clone()).await,
        [
            (json!("test…"), json!("delivery_account_get")),
            (json!("scop…"), json!("delivery_account_get")),
        ]
    );
    // No body: token-wide limits only, so the route limits stay.
    let answer = call(&app, delete(None)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert_eq!(listing(app.clone()).await.len(), 2);
    // A route without a token: that route of every token.
    let answer = call(&app, delete(Some(json!({"route": "delivery_account_get"})))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(listing(app.clone()).await.is_empty());
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 10).await, [200; 10]);
}

#[tokio::test(start_paused = true)]
async fn the_control_plane_refuses_a_route_that_is_not_a_management_route_naming_the_choices() {
    let sim = frozen_sim(NOW);
    let app = loopback_app(&sim);
    let refused = |method: Method, body: Value| {
        let app = app.clone();
        async move {
            call(&app, mgmt(method, "/_sim/rate_limit", TOKEN, Some(body)))
                .await
                .error(StatusCode::BAD_REQUEST)
        }
    };
    for (method, body) in [
        (Method::PUT, json!({"rate": 1, "route": "tracemail_weekly"})),
        (
            Method::DELETE,
            json!({"token": TOKEN, "route": "tracemail_weekly"}),
        ),
    ] {
        let message = refused(method, body).await;
        assert!(
            message.starts_with(
                "`route` \"tracemail_weekly\" is not a Management API route: name one of \
                 delivery_account_get, delivery_account_put,"
            ),
            "{message}"
        );
        assert!(message.contains("tracemail_daily"), "{message}");
    }
    // The Send API is never limited: its routes are refused, and not offered.
    for name in ["send", "send_bulk"] {
        let message = refused(Method::PUT, json!({"rate": 1, "route": name})).await;
        assert!(message.contains(&format!("{name:?} is not a")), "{message}");
        assert!(!message.contains("send_bulk,"), "{message}");
    }
    let message = refused(Method::PUT, json!({"rate": 1, "route": 5})).await;
    assert_eq!(message, "`route` must be a string");
    let message = sim
        .set_route_rate_limit(Some(TOKEN), Route::SendBulk, Some(limit(1.0, 1.0)))
        .expect_err("the Send API");
    assert!(
        message.contains("is not a Management API route"),
        "{message}"
    );
    // An unknown token with a route is refused as without one, never echoed.
    let message = refused(
        Method::PUT,
        json!({"rate": 1, "token": "made-up-token", "route": "tracemail_daily"}),
    )
    .await;
    assert!(
        message.contains("not one of the simulator's management tokens"),
        "{message}"
    );
    assert!(!message.contains("made-up-token"), "{message}");
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    assert_eq!(listed, json!({"rate_limits": []}), "nothing changed");
}

#[tokio::test(start_paused = true)]
async fn route_rate_limits_of_the_configuration_apply_from_the_start() {
    let config = SimConfig {
        route_rate_limits: vec![RouteRateLimit {
            token: SCOPED.to_owned(),
            route: Route::TracemailDaily,
            limit: limit(1.0, 2.0),
        }],
        ..config()
    };
    let sim = Simulator::try_new(config).expect("valid");
    let app = loopback_app(&sim);
    assert_eq!(statuses_of(&app, DAILY_2, SCOPED, 3).await, [200, 200, 429]);
    assert_eq!(
        statuses_of(&app, "/api/delivery/accounts/2", SCOPED, 5).await,
        [200; 5]
    );
    assert_eq!(statuses_of(&app, DAILY_2, TOKEN, 5).await, [200; 5]);
}

#[test]
fn bad_route_rate_limits_in_the_configuration_are_refused_without_showing_the_token() {
    let with = |token: &str, route: Route, limit: RateLimit| SimConfig {
        route_rate_limits: vec![
            RouteRateLimit {
                token: TOKEN.to_owned(),
                route: Route::TracemailDaily,
                limit: RateLimit::per_second(1.0),
            },
            RouteRateLimit {
                token: token.to_owned(),
                route,
                limit,
            },
        ],
        ..config()
    };
    let error = Simulator::try_new(with(
        "made-up-token",
        Route::TracemailDaily,
        RateLimit::per_second(1.0),
    ))
    .expect_err("unknown token");
    assert!(matches!(
        error,
        SimConfigError::BadRouteRateLimit { index: 1, .. }
    ));
    let message = error.to_string();
    assert!(
        message.starts_with("route_rate_limits entry 1: `token` is not one"),
        "{message}"
    );
    assert!(!message.contains("made-up-token"), "{message}");
    let message = Simulator::try_new(with(SCOPED, Route::Send, RateLimit::per_second(1.0)))
        .expect_err("the Send API")
        .to_string();
    assert!(
        message.starts_with("route_rate_limits entry 1: `route` \"send\" is not a Management"),
        "{message}"
    );
    let message = Simulator::try_new(with(
        SCOPED,
        Route::MigrationStats,
        RateLimit::per_second(0.0),
    ))
    .expect_err("bad rate")
    .to_string();
    assert!(message.contains("`rate` must be"), "{message}");
    let printed = format!(
        "{:?}",
        with(SCOPED, Route::MigrationStats, RateLimit::per_second(1.0))
    );
    assert!(
        !printed.contains(TOKEN) && !printed.contains(SCOPED),
        "{printed}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_limit_refusing_with_another_status_keeps_its_retry_after_headers_and_counts() {
    for status in [503, 502, 504, 403, 429] {
        let (sim, app) = limited(RateLimit {
            status,
            headers: RateLimitHeaders::Both,
            ..limit(0.5, 2.0)
        });
        assert_eq!(statuses(&app, 2).await, [200, 200], "{status}");
        let refused = call(&app, get_account("1")).await;
        let message = refused.error(StatusCode::from_u16(status).expect("status"));
        assert_eq!(refused.json()["code"], "rate_limited", "{status}");
        assert!(message.contains("rate limit exceeded"), "{message}");
        assert_eq!(header(&refused, "retry-after"), Some("2"), "{status}");
        assert_eq!(x_ratelimit(&refused), (Some("2"), Some("0"), Some("4")));
        assert_eq!(
            ietf(&refused),
            (Some("\"default\";q=2;w=4"), Some("\"default\";r=0;t=4"))
        );
        assert_eq!(statuses(&app, 2).await, [status; 2]);
        // Refusals count as refused whatever their status, and the bucket refills as ever.
        assert_eq!(
            counts(sim.rate_limit_stats(TOKEN)),
            Some((2, 3)),
            "{status}"
        );
        advance(Duration::from_secs(2)).await;
        assert_eq!(statuses(&app, 2).await, [200, status]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_503_throttle_says_when_to_come_back_in_each_retry_after_style() {
    let cases = [
        (RetryAfterStyle::Seconds, None, Some("2")),
        (RetryAfterStyle::Seconds, Some(30), Some("30")),
        (
            RetryAfterStyle::HttpDate,
            None,
            Some("Sun, 22 Nov 2026 10:00:02 GMT"),
        ),
        (RetryAfterStyle::None, None, None),
    ];
    for (style, fixed, expected) in cases {
        let (_sim, app) = limited(RateLimit {
            status: 503,
            retry_after: style,
            retry_after_secs: fixed,
            ..limit(0.5, 1.0)
        });
        assert_eq!(statuses(&app, 1).await, [200]);
        let refused = call(&app, get_account("1")).await;
        refused.error(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            header(&refused, "retry-after"),
            expected,
            "{style:?} {fixed:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_route_limit_and_the_control_plane_carry_the_refusal_status() {
    let sim = frozen_sim(NOW);
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/rate_limit",
            TOKEN,
            Some(json!({"token": TOKEN, "route": "tracemail_daily", "rate": 1, "status": 503})),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
    assert_eq!(answer.json()["rate_limits"][0]["limit"]["status"], 503);
    // A token-wide limit refusing with 429 beside it: each refusal carries its own limit's status.
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/rate_limit",
            TOKEN,
            Some(json!({"token": TOKEN, "rate": 1, "burst": 3})),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(statuses_of(&app, DAILY_1, TOKEN, 3).await, [200, 503, 503]);
    assert_eq!(statuses(&app, 3).await, [200, 200, 429]);
    let listed = call(&app, get("/_sim/rate_limits", TOKEN)).await.json();
    let entries = &listed["rate_limits"];
    assert_eq!(
        (&entries[0]["limit"]["status"], &entries[0]["limited"]),
        (&json!(429), &json!(1))
    );
    assert_eq!(
        (&entries[1]["limit"]["status"], &entries[1]["limited"]),
        (&json!(503), &json!(2))
    );
    assert_eq!(
        counts(sim.route_rate_limit_stats(TOKEN, Route::TracemailDaily)),
        Some((1, 2))
    );
    let message = sim
        .set_rate_limit(
            Some(TOKEN),
            Some(RateLimit {
                status: 500,
                ..limit(1.0, 1.0)
            }),
        )
        .expect_err("not a refusal status");
    assert_eq!(
        message,
        "`status` must be one of 429, 503, 502, 504, 403, got 500"
    );
}
