//! Management API authentication and identifiers, and the JSON errors of unknown paths, methods
//! and axum's own rejections.

use crate::helpers::*;

#[tokio::test]
async fn management_calls_without_a_token_answer_401_with_a_json_message() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        request(Method::GET, "/api/delivery/accounts/1", None, None),
    )
    .await;
    assert!(
        answer
            .error(StatusCode::UNAUTHORIZED)
            .contains("X-Api-Token")
    );
}

#[tokio::test]
async fn a_wrong_management_token_answers_401() {
    let app = loopback_app(&sim());
    let answer = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", "nope", None),
    )
    .await;
    answer.error(StatusCode::UNAUTHORIZED);
    // A send token is not a management token.
    let answer = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", SEND_1, None),
    )
    .await;
    answer.error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_scoped_token_sees_its_accounts_and_gets_403_for_the_others() {
    let app = loopback_app(&sim());
    let own = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/2", SCOPED, None),
    )
    .await;
    assert_eq!(own.record()["id"], 2);
    let other = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", SCOPED, None),
    )
    .await;
    other.error(StatusCode::FORBIDDEN);
    // Scope is checked before existence, so a scoped token cannot probe for ids.
    let missing = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/999", SCOPED, None),
    )
    .await;
    missing.error(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn ids_that_are_not_int32_answer_400_naming_the_parameter() {
    let app = loopback_app(&sim());
    for id in ["2147483648", "abc", "-", "1.5", "-2147483649"] {
        let message = call(&app, get_account(id))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains("`id`"), "{id}: {message}");
    }
    let message = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/api_tokens/99999999999",
            TOKEN,
            Some(json!({"allow_nets": []})),
        ),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
    assert!(message.contains("`token_id`"), "{message}");
}

#[tokio::test]
async fn an_unknown_account_answers_404_and_extreme_int32_ids_are_valid() {
    let app = loopback_app(&sim());
    for id in ["999", "2147483647", "-2147483648"] {
        call(&app, get_account(id))
            .await
            .error(StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn a_removed_account_answers_404_and_its_send_token_401() {
    let sim = sim();
    let app = loopback_app(&sim);
    assert!(sim.remove_account(1));
    assert!(!sim.remove_account(1));
    call(&app, get_account("1"))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json_errors() {
    let app = loopback_app(&sim());
    call(&app, request(Method::GET, "/api/nothing/here", None, None))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        mgmt(Method::DELETE, "/api/delivery/accounts/1", TOKEN, None),
    )
    .await
    .error(StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn axum_rejections_come_out_as_json_errors() {
    let app = loopback_app(&sim());
    // Not UTF-8 once percent-decoded: rejected by axum's path extractor.
    call(&app, get_account("%FF"))
        .await
        .error(StatusCode::BAD_REQUEST);
    // Over axum's default body limit.
    let huge = format!("{{\"description\":\"{}\"}}", "x".repeat(3 * 1024 * 1024));
    let answer = call(
        &app,
        request(
            Method::PUT,
            "/api/delivery/accounts/1",
            Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned())),
            Some(&huge),
        ),
    )
    .await;
    answer.error(StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn every_route_is_served_on_its_own_method() {
    let app = loopback_app(&sim());
    for route in Route::ALL {
        let path = route
            .path()
            .replace("{id}", "1")
            .replace("{token_id}", "11")
            .replace("{account}", "1")
            .replace("{migration_code}", "MG00000001")
            .replace("{domain_code}", "D000000901")
            .replace("{email_account_code}", "EA00000001")
            .replace("{team_member_code}", "T000000001");
        let answer = call(&app, request(route.method(), &path, None, None)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{route}");
    }
}
