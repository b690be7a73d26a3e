//! Attribution: what an answer teaches, and whose a 429 was. A success lifts what it may (a
//! tentative pause, an undecided 429 of its target, now known shared); a 429 is its target's own,
//! undecided, or shared ([`super::shape`] decides), and a shared one is charged to its endpoint's
//! pace, or to the token's when the token's other endpoints are refused too within
//! [`TOKEN_SPAN`] and none is free ([`FREE_SPAN`]); an unanswered call counts towards an outage
//! ([`super::outage`]). These are [`State`]'s moves, driven by the instants passed in: no clock,
//! no lock, no I/O. The shell ([`super::Pacer::observe`]) logs what they say.

use std::time::Duration;

use tokio::time::Instant;

use super::admission::Sent;
use super::control::Event;
use super::headers::QuotaInfo;
use super::outage::{self, Change};
use super::shape::{self, Scope};
use super::state::{State, TargetKey};
use crate::upstream::endpoint::Endpoint;

/// What showed a 429 to be shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    /// Many calls refused at once: a spent limit.
    Burst,
    /// The target's retry went through: the limit's, not the target's.
    Retried,
    /// The target refused again, not (yet) known as its own.
    Lone,
}

/// Bursts of 429s on two endpoints of a token within this of each other are the token's limit,
/// not each endpoint's, unless another of its endpoints is known to be free ([`FREE_SPAN`]).
pub const TOKEN_SPAN: Duration = Duration::from_secs(2);
/// An endpoint that succeeded within this and met no burst of 429s within it is free: while one
/// is, bursts elsewhere are those endpoints' own (two endpoints behind one limited route are
/// refused together while the free one, whose runs may come at other times, goes on).
pub const FREE_SPAN: Duration = Duration::from_secs(60);

/// A lone 429, not known yet to be shared, cuts the slow-start window ([`super::slow_start`]) when
/// half or more of the last this many answers were refused: a limit spent at a cold start
/// refuses that many at once (four of the first eight calls past a bucket of five), a tenth of a
/// fleet refused on its own does so by chance about once in 250 answers.
const COLD_CUT_ANSWERS: u32 = 8;

/// How an admitted call ended, as the pacer learns from it.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    Success,
    /// HTTP 429, with the `Retry-After` it carried.
    Throttled(Option<Duration>),
    /// Another answer (a 4xx, a body that cannot be read): the provider answers.
    Answered,
    /// No answer: a 5xx without `Retry-After`, a timeout, a refused or broken connection. What
    /// an outage is made of ([`outage`]).
    Unanswered,
    /// Cut by the caller's deadline before an answer came: no sign either way.
    Cut,
}

/// Whose a 429 was, as the pacer took it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charged {
    /// Not a 429.
    Nothing,
    /// The target's own: it backs off alone until this instant; no one else's pace moved.
    Target(Instant),
    /// Not known yet whose: the target's next answer decides; no pace is cut yet (its
    /// `Retry-After` may pause the endpoint until a call of it succeeds).
    Undecided,
    /// The endpoint's pace.
    Endpoint,
    /// The token's pace.
    Token,
}

/// A pace moved by a shared 429.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cut {
    pub(super) event: Event,
    /// The pace's rate before (`None`: it was not limited).
    pub(super) was: Option<f64>,
    /// The pause the 429 asked for, if charged in full.
    pub(super) pause: Option<Duration>,
    pub(super) charged: Charged,
}

/// What an answer taught.
#[derive(Debug)]
pub(super) struct Learned {
    pub(super) charged: Charged,
    pub(super) cut: Option<Cut>,
    /// Whether the endpoint went out of service or came back, and how it stands now.
    pub(super) service: (Change, Option<outage::Down>),
    /// Whether waiting calls may have a turn they had not: wake them.
    pub(super) changed: bool,
}

/// One answer as attribution reads it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Answer<'a> {
    pub(super) target: &'a TargetKey,
    pub(super) outcome: Outcome,
    pub(super) quota: &'a QuotaInfo,
    /// How long the target's values live: its own back-off never outlasts them.
    pub(super) hold: Duration,
}

impl State {
    /// Learns from the answer to the admitted call `sent`, come at `now`.
    pub(super) fn answered(&mut self, sent: &Sent, answer: Answer<'_>, now: Instant) -> Learned {
        self.tick(now);
        let endpoint = sent.endpoint;
        let mut learned = Learned {
            charged: Charged::Nothing,
            cut: None,
            service: (Change::None, None),
            changed: false,
        };
        let was_asking = self.asking(endpoint);
        self.token.answered(sent.seq);
        self.way(endpoint, now).control.answered(sent.seq);
        // The call asking after a pause was answered: the others may go.
        learned.changed = was_asking && !self.asking(endpoint);
        if !matches!(answer.outcome, Outcome::Unanswered | Outcome::Cut) {
            let w = self.way(endpoint, now);
            if w.outage.answered(now) == Change::Lifted {
                w.slow_start.restart();
                learned.service.0 = Change::Lifted;
                learned.changed = true;
            }
        }
        if !answer.quota.is_empty() {
            let sent_after = self.seq.saturating_sub(sent.seq);
            learned.changed |=
                self.way(endpoint, now)
                    .control
                    .quota(now, answer.quota, sent.seq, sent_after);
        }
        match answer.outcome {
            Outcome::Success => self.succeeded(sent, answer.target, now, &mut learned),
            Outcome::Throttled(retry_after) => {
                self.throttled(sent, answer, retry_after, now, &mut learned);
            }
            Outcome::Answered | Outcome::Cut => self.way(endpoint, now).history.success(),
            Outcome::Unanswered => {
                let cap = self.cooldown_cap();
                let w = self.way(endpoint, now);
                w.history.success();
                let change = w.outage.failed(
                    now,
                    sent.at,
                    hash_of(answer.target),
                    sent.standing,
                    sent.seq,
                    cap,
                );
                if change != Change::None {
                    learned.service.0 = change;
                    learned.changed = true;
                }
            }
        }
        learned.service.1 = self.down(endpoint);
        learned
    }

    /// A success: the paces and the window grow, a tentative pause lifts, and an undecided 429
    /// of this target was the shared limit's: cut now, as for the call that was refused.
    fn succeeded(&mut self, sent: &Sent, target: &TargetKey, now: Instant, learned: &mut Learned) {
        let endpoint = sent.endpoint;
        let slots = self.concurrency;
        self.token.succeeded(now);
        let w = self.way(endpoint, now);
        w.slow_start.succeeded(slots);
        w.control.succeeded(now);
        learned.changed |= w.control.lift(now);
        w.history.success();
        w.last_success = Some(now);
        if let Some(refused_at) = self.targets.succeeded(target) {
            learned.changed = true;
            self.way(endpoint, now).slow_start.refused(now, refused_at);
            learned.cut = Some(self.charge(endpoint, refused_at, now, None, Shown::Retried));
        }
        self.took(now.saturating_duration_since(sent.at));
    }

    /// A 429: whose it is ([`shape`]), and what it slows.
    fn throttled(
        &mut self,
        sent: &Sent,
        answer: Answer<'_>,
        retry_after: Option<Duration>,
        now: Instant,
        learned: &mut Learned,
    ) {
        let endpoint = sent.endpoint;
        // A 429 that names no wait but says the quota is used up waits for its reset.
        let wait = retry_after.or(match (answer.quota.remaining, answer.quota.reset) {
            (Some(0), Some(reset)) => Some(reset),
            _ => None,
        });
        let history = self.way(endpoint, now).history;
        let scope =
            self.targets
                .throttled(answer.target, &history, now, sent.at, wait, answer.hold);
        learned.charged = match scope {
            Scope::Target(until) => Charged::Target(until),
            Scope::Undecided => {
                self.undecided(sent, wait, now, learned);
                Charged::Undecided
            }
            Scope::Shared {
                pause,
                burst,
                first,
                counted,
            } => {
                learned.changed = true;
                let w = self.way(endpoint, now);
                if counted {
                    w.history.throttled(first);
                }
                // A burst is a limit spent; a target refused again is not yet known to be
                // anyone's but its own.
                if burst {
                    w.slow_start.refused(now, sent.at);
                }
                let shown = if burst { Shown::Burst } else { Shown::Lone };
                let cut = self.charge(endpoint, sent.at, now, pause, shown);
                learned.cut = Some(cut);
                cut.charged
            }
        };
    }

    /// A lone 429 of a target not known either way. Its `Retry-After` pauses the endpoint
    /// briefly, until a call of it succeeds (a broken target's neighbours on their way lift it
    /// within an answer; a paused endpoint refuses them too), and not at all once targets there
    /// are known to be refused on their own. On an endpoint whose calls have been going
    /// through, one call goes at its pace to ask, lest none be on its way.
    fn undecided(
        &mut self,
        sent: &Sent,
        wait: Option<Duration>,
        now: Instant,
        learned: &mut Learned,
    ) {
        let endpoint = sent.endpoint;
        let known_own = self.targets.own(endpoint) > 0;
        let w = self.way(endpoint, now);
        w.history.throttled(true);
        // A cold start's first refusals cut its window at once when they are many (a shared
        // limit spent); a tenth of a fleet refused on its own is not.
        if w.history.mostly_refused(COLD_CUT_ANSWERS) {
            learned.changed |= w.slow_start.refused(now, sent.at);
        }
        if let Some(wait) = wait.filter(|_| !known_own) {
            let probe = w.history.steady();
            w.control
                .pause_tentatively(now, wait.min(shape::MAX_LONE_PAUSE), probe);
            learned.changed = true;
        }
        // A pace still doubling from a cold start's thin estimate has found the limit at its
        // first refusal, whoever it belongs to: it is cut at once, as TCP's slow start ends at
        // the first loss, rather than a round trip later while it doubles on.
        let doubling =
            self.token.cold_doubling() || self.way(endpoint, now).control.cold_doubling();
        if doubling && !known_own {
            learned.cut = Some(self.charge(endpoint, sent.at, now, None, Shown::Lone));
        }
    }

    /// A 429 taken as shared: the token's when its other endpoints were refused too within
    /// [`TOKEN_SPAN`] and none of them succeeded meanwhile without a 429 (two endpoints behind
    /// one limited route are refused together while a free one goes on), else its endpoint's;
    /// that scope pauses for `pause`. A scope never limited before is first slowed by a burst
    /// of 429s, or a lone one its target's retry showed shared (a broken target's retry never
    /// goes through), not by a lone one refused again. `sent_at` is when the refused call
    /// went out.
    fn charge(
        &mut self,
        endpoint: Endpoint,
        sent_at: Instant,
        now: Instant,
        pause: Option<Duration>,
        shown: Shown,
    ) -> Cut {
        let burst = shown == Shown::Burst;
        let within = |at: Option<Instant>, span: Duration| {
            at.is_some_and(|at| now.saturating_duration_since(at) <= span)
        };
        let others = || {
            self.ways
                .iter()
                .filter(|(e, _)| **e != endpoint)
                .map(|(_, w)| w)
        };
        // Refused in bursts there too, and no endpoint known to go on freely (a lone 429 there
        // is a broken target's, or bad luck).
        let refused_elsewhere = others().any(|w| within(w.last_burst, TOKEN_SPAN));
        // Free: it succeeded within the last minute and met no burst in it, or (at a cold
        // start, before anything is known) it succeeds right now without a burst of its own.
        let free_elsewhere = others().any(|w| {
            (within(w.last_success, FREE_SPAN) && !within(w.last_burst, FREE_SPAN))
                || (within(w.last_success, TOKEN_SPAN) && !within(w.last_burst, TOKEN_SPAN))
        });
        let token_wide = burst && refused_elsewhere && !free_elsewhere;
        let w = self.way(endpoint, now);
        if burst {
            w.last_burst = Some(now);
        }
        let ramping = w.slow_start.window().is_some() && std::mem::take(&mut w.window_held);
        let (control, charged) = if token_wide {
            (&mut self.token, Charged::Token)
        } else {
            (&mut w.control, Charged::Endpoint)
        };
        let was = control.rate();
        if shown == Shown::Lone && !control.learned() {
            if let Some(wait) = pause {
                control.pause(now, wait);
            }
            return Cut {
                event: Event::Absorbed,
                was,
                pause,
                charged,
            };
        }
        let e = control.throttled(now, sent_at, pause, ramping);
        if control.settled() {
            // The pace learned from the refusals holds calls back from now on: the cold
            // start's window has done its part.
            self.way(endpoint, now).slow_start.open();
        }
        Cut {
            event: e,
            was,
            pause,
            charged,
        }
    }
}

/// A target's key as a number, for the outage's count of distinct targets.
fn hash_of(target: &TargetKey) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    target.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    //! Attribution as moves of the state at chosen instants: no runtime, no clock.

    use std::collections::BTreeMap;

    use super::*;
    use crate::upstream::pacer::admission::{Call, Entry};
    use crate::upstream::pacer::outage::Standing;

    const E: Endpoint = Endpoint::new("delivery_account");
    const F: Endpoint = Endpoint::new("delivery_statistics");
    const G: Endpoint = Endpoint::new("mailbox_list");
    const HOLD: Duration = Duration::from_secs(300);

    fn state(now: Instant) -> State {
        let mut s = State::new(now, 16, None, BTreeMap::new());
        s.slow_start = false;
        s
    }

    /// Admits a call of `target` at `now`, of `standing`.
    fn send(s: &mut State, target: &TargetKey, standing: Standing, now: Instant) -> Sent {
        let call = Call {
            standing,
            ..Call::of(target)
        };
        match s.enter(&call, now) {
            Entry::Granted(g) => g.sent,
            Entry::Queued { .. } => panic!("nothing holds a call back here"),
        }
    }

    fn answer<'a>(target: &'a TargetKey, outcome: Outcome, quota: &'a QuotaInfo) -> Answer<'a> {
        Answer {
            target,
            outcome,
            quota,
            hold: HOLD,
        }
    }

    #[test]
    fn a_lone_429_is_undecided_until_its_target_succeeds_then_the_endpoint_s_pace_is_cut() {
        let t0 = Instant::now();
        let mut s = state(t0);
        let quota = QuotaInfo::default();
        let t = (E, "a".to_owned());
        let sent = send(&mut s, &t, Standing::Unknown, t0);
        let learned = s.answered(&sent, answer(&t, Outcome::Throttled(None), &quota), t0);
        assert_eq!(learned.charged, Charged::Undecided);
        assert!(learned.cut.is_none() && s.ways[&E].control.rate().is_none());
        s.release(&sent, t0);
        let t1 = t0 + Duration::from_millis(200);
        let retry = send(&mut s, &t, Standing::Unknown, t1);
        let learned = s.answered(&retry, answer(&t, Outcome::Success, &quota), t1);
        assert_eq!(learned.charged, Charged::Nothing);
        let cut = learned
            .cut
            .expect("its retry went through: the limit was shared");
        assert_eq!(cut.charged, Charged::Endpoint);
        assert!(s.ways[&E].control.rate().is_some(), "the endpoint is paced");
        assert!(s.token.rate().is_none(), "the token is not");
    }

    #[test]
    fn bursts_on_two_endpoints_within_the_token_span_are_the_token_s_unless_one_is_free() {
        let t0 = Instant::now();
        // A burst on E, then one on F: the token's within the span; with a third endpoint
        // going on freely, those endpoints' own; past the span, F's again.
        for (free, at, charged) in [
            (false, t0 + TOKEN_SPAN / 2, Charged::Token),
            (true, t0 + TOKEN_SPAN / 2, Charged::Endpoint),
            (false, t0 + TOKEN_SPAN * 2, Charged::Endpoint),
        ] {
            let mut s = state(t0);
            s.way(E, t0);
            s.way(F, t0);
            if free {
                s.way(G, t0).last_success = Some(t0);
            }
            let first = s.charge(E, t0, t0, None, Shown::Burst);
            assert_eq!(first.charged, Charged::Endpoint);
            let then = s.charge(F, at, at, None, Shown::Burst);
            assert_eq!(then.charged, charged, "free: {free}, at {:?}", at - t0);
        }
    }

    #[test]
    fn good_targets_failing_unanswered_put_the_endpoint_out_and_an_answer_brings_it_back() {
        let t0 = Instant::now();
        let mut s = state(t0);
        let quota = QuotaInfo::default();
        let targets: Vec<TargetKey> = (0..3).map(|i| (E, format!("t{i}"))).collect();
        let sent: Vec<Sent> = targets
            .iter()
            .map(|t| send(&mut s, t, Standing::Good, t0))
            .collect();
        let t1 = t0 + Duration::from_millis(50);
        let mut last = None;
        for (t, c) in targets.iter().zip(&sent) {
            last = Some(s.answered(c, answer(t, Outcome::Unanswered, &quota), t1));
            s.release(c, t1);
        }
        let learned = last.unwrap();
        assert_eq!(learned.service.0, Change::Entered);
        let down = learned.service.1.expect("out of service");
        assert!(learned.changed);
        // A failing target's call is not even queued while the endpoint is out.
        let bad = Call {
            standing: Standing::Bad,
            behind: true,
            ..Call::of(&targets[0])
        };
        let refused = s
            .before_queue(&bad, t1)
            .expect_err("refused before it queues");
        assert_eq!(refused.outage, Some(down));
        // Any answer lifts it.
        let probe = send(&mut s, &targets[1], Standing::Good, down.next_probe());
        let learned = s.answered(
            &probe,
            answer(&targets[1], Outcome::Answered, &quota),
            down.next_probe(),
        );
        assert_eq!(learned.service, (Change::Lifted, None));
    }
}
