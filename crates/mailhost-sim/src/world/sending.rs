//! The Send API's rules on the world: who may send from where, which sender domains an account
//! owns, and what sending does (suppression, quota consumption, one outcome per recipient in the
//! statistics, bounces suppressed afterwards).

use std::net::IpAddr;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::World;
use super::accounts::{SuppressionReason, nets_allow};
use super::codes::domain_of;
use super::stats::{self, Outcome};

/// Recipients on this domain are accepted, then "bounce": each is added to the sending account's
/// suppression list, so later sends to it are rejected. This gives the demo a realistic trickle
/// of suppressed recipients.
pub const BOUNCE_DOMAIN: &str = "bounces.invalid";

/// Why the world refuses a send; the `api` module turns each into its HTTP answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SendRefusal {
    /// The send token is unknown, or its account is gone.
    UnknownToken,
    /// Known credentials that may not send this (allow-lists, a disabled account, a foreign
    /// sender domain); the message says which.
    NotAllowed(String),
    /// The accepted recipients outnumber the messages the account has left; nothing was sent.
    QuotaExhausted { requested: i64, remaining: i64 },
}

impl World {
    /// The account that send token `presented` belongs to, if it may send from `ip`. Checks run
    /// in this order: token, the token's allow-list, account enabled, the account's allow-list.
    /// A token that passes its own allow-list counts as used at `now`.
    pub(crate) fn send_account(
        &mut self,
        presented: &str,
        ip: IpAddr,
        now: Timestamp,
    ) -> Result<i32, SendRefusal> {
        let (account_id, token_id) = *self
            .send_tokens
            .get(presented)
            .ok_or(SendRefusal::UnknownToken)?;
        let account = self
            .accounts
            .get_mut(&account_id)
            .ok_or(SendRefusal::UnknownToken)?;
        let token = account
            .api_tokens
            .iter_mut()
            .find(|token| token.id == token_id && token.matches(presented))
            .ok_or(SendRefusal::UnknownToken)?;
        if !nets_allow(&token.allow_nets, ip) {
            return Err(SendRefusal::NotAllowed(format!(
                "source address {ip} is not in this token's allow-list"
            )));
        }
        token.last_used_at = Some(now);
        if !account.enabled {
            return Err(SendRefusal::NotAllowed(format!(
                "Delivery account {account_id} is disabled"
            )));
        }
        if !nets_allow(&account.allow_nets, ip) {
            return Err(SendRefusal::NotAllowed(format!(
                "source address {ip} is not in the allow-list of Delivery account {account_id}"
            )));
        }
        Ok(account_id)
    }

    /// The account's own spelling of the domain of sender address `from`, under which the
    /// statistics are kept; refused when the account does not own that domain.
    pub(crate) fn sending_domain(
        &self,
        account_id: i32,
        from: &str,
    ) -> Result<String, SendRefusal> {
        let account = self
            .accounts
            .get(&account_id)
            .ok_or(SendRefusal::UnknownToken)?;
        let domain = domain_of(from);
        account
            .domains
            .iter()
            .find(|own| own.eq_ignore_ascii_case(domain))
            .cloned()
            .ok_or_else(|| {
                SendRefusal::NotAllowed(format!(
                    "sender domain {domain:?} is not a sending domain of Delivery account {account_id}"
                ))
            })
    }

    /// Sends one message per `(sending domain, recipient)` pair, all or nothing: suppressed
    /// recipients are rejected (unless the account ignores the list), the others must fit in the
    /// account's remaining messages. Returns the body of the Send API's answer.
    pub(crate) fn send(
        &mut self,
        account_id: i32,
        recipients: &[(String, &str)],
        now: Timestamp,
    ) -> Result<Value, SendRefusal> {
        let account = self
            .accounts
            .get(&account_id)
            .ok_or(SendRefusal::UnknownToken)?;
        let outcomes =
            self.screen_recipients(account_id, account.ignore_suppression_list, recipients);
        let accepted = outcomes.iter().filter(|(_, _, s)| s.is_none()).count();
        let accepted_i64 = i64::try_from(accepted).unwrap_or(i64::MAX);
        let account = self
            .accounts
            .get_mut(&account_id)
            .ok_or(SendRefusal::UnknownToken)?;
        let remaining = account.remaining_messages();
        if accepted_i64 > remaining {
            return Err(SendRefusal::QuotaExhausted {
                requested: accepted_i64,
                remaining,
            });
        }
        account.consume(accepted_i64);

        let results: Vec<Value> = outcomes
            .into_iter()
            .map(|(recipient, domain, suppressed)| {
                self.deliver(account_id, recipient, domain, suppressed, now)
            })
            .collect();
        self.stats.prune(now);
        Ok(json!({
            "accepted": accepted,
            "rejected": results.len() - accepted,
            "messages": results,
        }))
    }

    /// Each `(sending domain, recipient)` pair as `(recipient, domain, suppression)`: the reason
    /// the recipient is on account `account_id`'s suppression list, none when it is not or
    /// when the account ignores the list (`ignore_suppression`).
    fn screen_recipients<'r>(
        &self,
        account_id: i32,
        ignore_suppression: bool,
        recipients: &'r [(String, &'r str)],
    ) -> Vec<(&'r str, &'r str, Option<SuppressionReason>)> {
        recipients
            .iter()
            .map(|(domain, recipient)| {
                let suppressed = if ignore_suppression {
                    None
                } else {
                    self.suppression_for(recipient, account_id)
                };
                (*recipient, domain.as_str(), suppressed)
            })
            .collect()
    }

    /// Sends one message of account `account_id` from `domain` to `recipient`: records its
    /// outcome in the statistics (rolled for an accepted recipient not on the bounce domain),
    /// suppresses a bounced recipient, and returns the message's entry in the answer.
    fn deliver(
        &mut self,
        account_id: i32,
        recipient: &str,
        domain: &str,
        suppressed: Option<SuppressionReason>,
        now: Timestamp,
    ) -> Value {
        let outcome = match suppressed {
            None if domain_of(recipient).eq_ignore_ascii_case(BOUNCE_DOMAIN) => Outcome::Bounced,
            None => stats::roll_accepted(&mut self.outcome_rng),
            Some(_) => Outcome::Rejected,
        };
        self.stats.record(account_id, domain, now, outcome, 1);
        match suppressed {
            None => {
                self.messages_accepted += 1;
                let result = json!({
                    "id": format!("sim-{account_id}-{:012}", self.messages_accepted),
                    "to": recipient,
                    "status": "accepted",
                    "reason": Value::Null,
                    "suppression_reason": Value::Null,
                });
                if domain_of(recipient).eq_ignore_ascii_case(BOUNCE_DOMAIN) {
                    self.suppress(
                        recipient,
                        SuppressionReason::Bounce,
                        Some(vec![account_id.to_string()]),
                        now,
                    );
                }
                result
            }
            Some(reason) => json!({
                "id": Value::Null,
                "to": recipient,
                "status": "rejected",
                "reason": "suppressed",
                "suppression_reason": reason.as_str(),
            }),
        }
    }
}
