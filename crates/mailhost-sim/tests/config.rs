//! Configurations the simulator refuses, each with a reason.

use crate::helpers::*;

#[test]
fn invalid_configurations_are_refused_with_a_reason() {
    let mut duplicate = config();
    duplicate.accounts.push(duplicate.accounts[0].clone());
    assert!(matches!(
        Simulator::try_new(duplicate),
        Err(SimConfigError::DuplicateAccount(1))
    ));
    let mut bad_net = config();
    bad_net.accounts[0].allow_nets = vec!["10.0.0.0/99".into()];
    let error = Simulator::try_new(bad_net).err().map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains("10.0.0.0/99")));
    let mut shared_token = config();
    shared_token.accounts[1].send_tokens[0].token = SEND_1.to_owned();
    assert!(Simulator::try_new(shared_token).is_err());
}

#[test]
fn an_unknown_time_zone_is_a_configuration_error() {
    let mut bad = config();
    bad.accounts[1].timezone = "Europe/Atlantis".into();
    let error = Simulator::try_new(bad).err().map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains("Europe/Atlantis")));
    assert_eq!(AccountSeed::default().timezone, "UTC");
}

#[test]
fn bad_hosting_seeds_are_refused() {
    let mut duplicate = hosting_config();
    duplicate.mailboxes.push(duplicate.mailboxes[0].clone());
    assert!(Simulator::try_new(duplicate).is_err());
    let mut clash = hosting_config();
    clash.mailboxes[1].domain_name = "other.example".into();
    assert!(Simulator::try_new(clash).is_err(), "one code, two names");
    let mut sending = hosting_config();
    sending.mailboxes[0].domain_name = "shop.example".into();
    sending.mailboxes[1].domain_name = "shop.example".into();
    assert!(
        Simulator::try_new(sending).is_err(),
        "shop.example is D000000101"
    );
    let mut migration = hosting_config();
    migration.migrations.push(migration.migrations[0].clone());
    assert!(Simulator::try_new(migration).is_err());
}
