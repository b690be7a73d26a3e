//! What the pacer knows of a token's limit, as plain state driven by explicit instants: the rate
//! learned from 429s, the quota and pauses the provider states, the configured ceiling, and so
//! when the next call may go. No clock, no lock, no I/O: [`super::Pacer`] drives it.
//!
//! Learning follows TCP CUBIC, with calls for packets. Until the provider first answers 429 the
//! token is unlimited (or at its configured ceiling). A 429 is a congestion event: the rate
//! falls to [`BETA`] times an estimate of what the provider accepted since the last event (its
//! successes over the time there was demand, which for a token bucket is its refill rate), and
//! then grows again along a cubic curve: quickly back towards that estimate, flat around it,
//! and faster and faster past it, so a raised limit is found again. The curve's clock only runs
//! while calls wait for the pace, so an idle token does not drift upwards between runs. 429s of
//! calls sent before the last event belong to it and do not cut the rate again.
//!
//! The estimate is what was measured: successes per second of demand, never below the rate of
//! the last second of demand (not of a second that had not passed yet, which would read a
//! cold start's first 50 ms as a twentieth of its rate). An estimate resting on too few
//! successes (a storm of 429s, a `Retry-After` that was too short, a small burst at a cold
//! start) says little: such an event cuts the rate by half at most, and the rate known to work
//! before it is remembered. Below it, the rate doubles every second of waiting demand (TCP's
//! slow start) until it is back near that rate, and the cubic takes over from there: a token the
//! provider blocked for a minute is back at its pace within seconds of the block ending. At a
//! cold start nothing is known to work yet: a thin first estimate doubles until the next 429,
//! which then rests on a second of real traffic, but never past twice the most successes seen in
//! a second since ([`COLD_GROWTH`]): a provider that answers its refusals at once would
//! otherwise see a pace doubling on for seconds while every call is refused. A first event
//! also forgets the successes before it (a bucket's burst), and a cold start's first refusal
//! cuts the doubling pace at once (see the pacer).
//!
//! One [`Control`] paces a token, and one each of its endpoints: which of them a 429 is
//! charged to is [`super::shape`]'s business.

use std::time::Duration;

use tokio::time::Instant;

use crate::storage::pace::KeptCurve;
use crate::upstream::cooldown::{CoolDown, far};

pub use super::headers::MAX_PAUSE;
use super::headers::{QuotaInfo, either};

/// The lowest rate learned from 429s: one call every five seconds still notices a lifted limit.
pub const MIN_RATE: f64 = 0.2;
/// A learned rate that grows past this is dropped: the token counts as unlimited again.
pub const MAX_RATE: f64 = 10_000.0;
/// The share of the estimate the rate falls to at a congestion event.
pub const BETA: f64 = 0.9;
/// Seconds (of waiting demand) the cubic takes to climb from `BETA` times the estimate back to
/// it; the plateau around the estimate is about this wide on each side.
const PLATEAU_SECS: f64 = 8.0;
/// Nor fewer calls than this at an estimate resting on [`CONFIDENT_SUCCESSES`] or more: a
/// slow limit (a few calls a second) probed every eight seconds is refused once in every
/// twenty or so calls; with the plateau this many calls wide, once in a hundred or so, as a
/// fast one is. (A limit of 5/s: 20 s.) A thin estimate keeps the 8 s plateau: a pace cut again
/// and again while a neighbour on the same bucket took it (another exporter's cold start) must
/// climb back at the pace of the neighbour's, or it never gets its share back.
const PLATEAU_CALLS: f64 = 100.0;
/// A congestion event never cuts the rate by more than half: a 429 right after a pause (whose
/// `Retry-After` was too short) says little about the sustainable rate.
const MAX_CUT: f64 = 0.5;
/// Nor by more than a fifth when a third or more of the answers since the last one were
/// successes: a pace just over a small burst's limit is refused every other call, so its
/// successes read half the limit; the pace that was refused is the better reading then, as TCP
/// CUBIC takes its window at a loss.
const MAX_CUT_WITH_SUCCESSES: f64 = 0.8;

/// Gaps between paced calls shorter than this are within a few wake-ups of the timer (1 ms):
/// only there is a slot missed by a late wake-up caught up.
const TIMER_GRAIN: Duration = Duration::from_millis(2);
/// A 429 after at least this many successes in a row since the last one (or the last event)
/// and without `Retry-After` is noise, not an event: counted, not cut (a 429 that asks for a
/// pause is the provider's word, and the pause costs more than a cut). A provider whose bucket holds one call refuses now and then whatever the
/// pace near its limit (a call that reaches it a few milliseconds late, the next one early);
/// cutting at each such 429 kept the pace a third below the limit. A pace past the limit is
/// refused far more often than this and cut as before: noise costs at most one call in a
/// hundred.
const NOISE_SUCCESSES: u64 = 100;

/// A congestion event after at most one refused call in this many since the last takes the
/// refused pace as the limit's reading (see `Control::throttled`).
const SPARSE: u64 = 50;

/// An estimate resting on fewer successes than this is not trusted to say what works.
const CONFIDENT_SUCCESSES: u64 = 10;
/// A cold start's pace is at most this many times the successes of the last second.
const COLD_GROWTH: f64 = 2.0;
/// Seconds of waiting demand in which slow start doubles the rate.
const DOUBLING_SECS: f64 = 1.0;
/// The same at a cold start, when no rate is known to work yet: a thin first estimate (a
/// small burst spent at once, or 429s answered before any success) is far below the limit as
/// often as not, so the rate doubles four times a second until the next 429 says where it stops.
const COLD_DOUBLING_SECS: f64 = 0.25;

/// A refusal that asks for a pause costs every call of its scope that pause: past the estimate,
/// the curve probes so slowly that its refusals cost at most this share of the time (a pause
/// of 1 s: a plateau of 20 s), as a probe refused without a pause costs one call.
const PAUSE_PROBE_SHARE: f64 = 0.05;
/// The plateau a pause stretches is at most this many seconds of waiting demand, so that a
/// raised limit is still found again.
const MAX_PAUSE_PLATEAU_SECS: f64 = 300.0;

/// The cubic's constant for a plateau at `r_max`, from [`PLATEAU_SECS`] and, for a
/// `confident` estimate, [`PLATEAU_CALLS`]: r(t) = r_max (1 + C (t - K)^3).
fn growth_constant(r_max: f64, confident: bool) -> f64 {
    let calls = if confident {
        PLATEAU_CALLS / r_max.max(MIN_RATE)
    } else {
        0.0
    };
    let plateau = PLATEAU_SECS.max(calls);
    (1.0 - BETA) / plateau.powi(3)
}

/// The cubic's constant past `r_max` (t > K) after an event whose refusal asked for a pause of
/// `pause` seconds: the plateau on that side stretched by [`PAUSE_PROBE_SHARE`]; the climb back
/// to `r_max` is as quick as ever.
fn probe_constant(c: f64, pause: f64) -> f64 {
    let plateau = (pause / PAUSE_PROBE_SHARE).min(MAX_PAUSE_PLATEAU_SECS);
    if plateau > 0.0 {
        c.min((1.0 - BETA) / plateau.powi(3))
    } else {
        c
    }
}

/// Successes over the last second ([`super::window`]): what just went through.
#[derive(Clone, Debug)]
struct Successes {
    window: super::window::Window<1, 100>,
    /// Since when calls have been waiting or in flight without a break: a window younger than a
    /// second is read over the time it covers.
    demand_since: Option<Instant>,
}

impl Successes {
    fn new(origin: Instant) -> Self {
        Successes {
            window: super::window::Window::new(origin),
            demand_since: None,
        }
    }

    fn add(&mut self, now: Instant) {
        self.window.add(now, 0);
    }

    /// Forgets the successes counted so far (the demand goes on).
    fn forget(&mut self) {
        self.window.forget();
    }

    fn count(&self, now: Instant) -> u64 {
        u64::from(self.window.totals(now)[0])
    }

    /// Successes per second of demand over the last second: the count over the time there was
    /// demand within it (at least [`MIN_SPAN`]), so a window still filling is not read as empty.
    fn rate(&self, now: Instant) -> f64 {
        let span = self
            .demand_since
            .map_or(1.0, |since| {
                now.saturating_duration_since(since).as_secs_f64()
            })
            .clamp(MIN_SPAN, 1.0);
        self.count(now) as f64 / span
    }
}

/// The shortest time a success rate is read over: a bucket's burst answered within a few
/// milliseconds of a run's start would otherwise read as hundreds per second.
const MIN_SPAN: f64 = 0.5;
/// 429s of calls sent within this of the last congestion event belong to it: a fleet of broken
/// targets answering their first 429s one after another must not compound cut upon cut before
/// the new pace has been seen to hold or fail.
const MIN_EVENT_GAP: Duration = Duration::from_millis(250);

/// The recovery from the last congestion event: the rate learned at it, and the curve back to it.
#[derive(Clone, Debug)]
struct Recovery {
    /// The estimate at the event: the plateau of the curve.
    r_max: f64,
    /// The rate right after the event.
    r0: f64,
    /// The last rate known to work: slow start climbs back towards it.
    recall: f64,
    /// Seconds of waiting demand the curve takes to climb back to `r_max`.
    k: f64,
    /// The curve restarted from the rate known to work, slow start done ([`Recovery::reanchor`]):
    /// a thin event on it says that rate does not work now.
    recalled: bool,
    /// The cubic's constant, [`growth_constant`] of `r_max` and the event's confidence.
    c: f64,
    /// The constant past `r_max`, [`probe_constant`].
    c_past: f64,
    /// Seconds of pause the event's refusal asked for (0 without `Retry-After`).
    pause: f64,
    at: Instant,
    /// Successes since the event.
    successes: u64,
    /// 429s since the event.
    refused: u64,
    /// Successes since the last 429 (or the event).
    clean: u64,
    /// Seconds since the event with calls waiting or in flight (a pause included): what the
    /// successes were spread over.
    active: f64,
    /// Seconds since the event with calls waiting for the pace, outside pauses: the curve's
    /// clock.
    growth: f64,
    /// The most successes a second seen since the event, while nothing is known to work: a
    /// cold start's pace grows from it ([`COLD_GROWTH`]).
    shown: f64,
    /// The estimate rested on [`CONFIDENT_SUCCESSES`] or more: the plateau is also
    /// [`PLATEAU_CALLS`] wide.
    confident: bool,
}

impl Recovery {
    fn new(r_max: f64, r0: f64, recall: f64, at: Instant, confident: bool, pause: f64) -> Self {
        let c = growth_constant(r_max, confident);
        let k = ((1.0 - r0 / r_max).max(0.0) / c).cbrt();
        Recovery {
            r_max,
            r0,
            recall,
            k,
            recalled: false,
            c,
            c_past: probe_constant(c, pause),
            pause,
            at,
            successes: 0,
            refused: 0,
            clean: 0,
            active: 0.0,
            growth: 0.0,
            shown: 0.0,
            confident,
        }
    }

    /// Where slow start stops: just below the rate known to work.
    fn slow_start_cap(&self) -> f64 {
        BETA * self.recall
    }

    fn slow_starting(&self) -> bool {
        self.r0 < self.slow_start_cap()
    }

    fn rate(&self) -> f64 {
        let t = self.growth - self.k;
        let c = if t > 0.0 { self.c_past } else { self.c };
        let cubic = self.r_max * (1.0 + c * t * t * t);
        let rate = if self.slow_starting() {
            let doubling = if self.recall >= MAX_RATE {
                COLD_DOUBLING_SECS
            } else {
                DOUBLING_SECS
            };
            let doubled = self.r0 * (self.growth / doubling).min(64.0).exp2();
            cubic.max(doubled.min(self.slow_start_cap()))
        } else {
            cubic
        };
        rate.max(MIN_RATE)
    }

    /// Slow start done: the cubic starts again from the rate known to work, the event and its
    /// counts kept.
    fn reanchor(&mut self) {
        let recall = self.recall;
        *self = Recovery {
            successes: self.successes,
            refused: self.refused,
            active: self.active,
            recalled: true,
            ..Recovery::new(
                recall,
                self.slow_start_cap(),
                recall,
                self.at,
                false,
                self.pause,
            )
        };
    }
}

/// The provider's quota as the latest answers state it.
#[derive(Clone, Copy, Debug)]
struct Budget {
    /// Requests left, less the calls sent since the answer that said so.
    remaining: i64,
    reset_at: Instant,
    /// The call whose answer set it: an older answer arriving late does not overwrite it.
    seq: u64,
}

/// What a 429 did to the learned rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// The 429 belonged to a congestion event already reacted to.
    Absorbed,
    /// A new congestion event: the rate fell to this many requests per second.
    Cut(f64),
}

#[derive(Clone, Debug)]
pub struct Control {
    /// `rate_limit` of the config, requests per second.
    ceiling: Option<f64>,
    /// Boxed: a token's pace and each endpoint's have one only once a 429 taught it, and ten
    /// thousand tenants that are never refused would carry its room (about 200 bytes) twice
    /// each.
    learned: Option<Box<Recovery>>,
    /// The rate the provider's headers state (`RateLimit-Policy`, or `X-RateLimit-Limit` over
    /// the longest reset seen): shown and compared with the fleet's needs, never paced at (the
    /// quota itself is followed call by call).
    stated: Option<f64>,
    /// `X-RateLimit-Limit` and the longest reset seen with it: the window, for `stated`.
    limit_window: Option<(u64, Duration)>,
    /// The pause the provider asked for ([`crate::upstream::cooldown`]). Asked in full (a
    /// `Retry-After` charged here), one call asks once it ends and the others wait for its
    /// answer: a provider still unwell answers it with another pause, so the scope costs one
    /// call per `Retry-After`, as the header asks. A lone 429's is tentative: a success lifts it
    /// (a paused scope refuses every call, those already on their way too), and one call may go
    /// during it at its pace, whose answer says whose the pause is (an endpoint whose calls
    /// have gone through for a while, answering at once, has no other call on its way to say
    /// it).
    pause: Option<CoolDown>,
    /// The pause's end is a lone 429's, tentative.
    tentative: bool,
    budget: Option<Budget>,
    /// When the next paced call may go.
    next_slot: Option<Instant>,
    window: Successes,
    last_tick: Instant,
    active: bool,
    saturated: bool,
}

impl Control {
    pub fn new(now: Instant, ceiling: Option<f64>) -> Self {
        Control {
            ceiling,
            learned: None,
            stated: None,
            limit_window: None,
            pause: None,
            tentative: false,
            budget: None,
            next_slot: None,
            window: Successes::new(now),
            last_tick: now,
            active: false,
            saturated: false,
        }
    }

    pub fn set_ceiling(&mut self, ceiling: Option<f64>) {
        self.ceiling = ceiling;
    }

    /// Moves the clocks on to `now`; `active` and `saturated` describe the gate from now on
    /// (calls waiting or in flight; calls waiting for the pace).
    pub fn tick(&mut self, now: Instant, active: bool, saturated: bool) {
        let dt = now.saturating_duration_since(self.last_tick).as_secs_f64();
        let paused = self.paused(self.last_tick);
        // A cold start's pace held by what has succeeded ([`Control::rate`]) does not climb
        // meanwhile: it doubles from where successes let it, not from where its clock got.
        let cold = self.cold_doubling();
        let recent = self.window.rate(now);
        if let Some(l) = &mut self.learned {
            if cold {
                l.shown = l.shown.max(recent);
            }
            let cold_cap = cold.then_some(COLD_GROWTH * l.shown);
            if self.active {
                l.active += dt;
            }
            let before = l.growth;
            if self.saturated && !paused {
                l.growth += dt;
            }
            if let Some(cap) = cold_cap {
                // Never past twice what succeeded, but never back either: a second without a
                // success (a pace still slow) keeps what the earlier ones allowed.
                let most = COLD_DOUBLING_SECS * (cap.max(l.r0) / l.r0.max(MIN_RATE)).log2();
                l.growth = l.growth.min(most.max(before));
            }
            if l.slow_starting() && l.rate() >= l.slow_start_cap() {
                l.reanchor();
            }
            if l.rate() >= MAX_RATE {
                tracing::debug!(
                    "the learned rate passed its maximum: the token counts as unlimited again"
                );
                self.learned = None;
            }
        }
        self.last_tick = self.last_tick.max(now);
        if active && !self.active {
            self.window.demand_since = Some(now);
        } else if !active {
            self.window.demand_since = None;
        }
        self.active = active;
        self.saturated = saturated;
    }

    /// Whether 429s have taught a rate (as opposed to none, or only a ceiling).
    pub fn learned(&self) -> bool {
        self.learned.is_some()
    }

    /// Whether the pace is doubling from a cold start's thin estimate (nothing known to work yet).
    pub fn cold_doubling(&self) -> bool {
        self.learned
            .as_ref()
            .is_some_and(|l| l.slow_starting() && l.recall >= MAX_RATE)
    }

    /// Whether the rate learned rests on what went through (past a cold start's slow start):
    /// the pace alone then holds calls back well.
    pub fn settled(&self) -> bool {
        self.learned.as_ref().is_some_and(|l| !l.slow_starting())
    }

    /// The rate calls are paced at, requests per second; `None` when unlimited.
    pub fn rate(&self) -> Option<f64> {
        either(self.learned_rate(), self.ceiling, f64::min)
    }

    /// The rate 429s have taught, the ceiling left aside.
    fn learned_rate(&self) -> Option<f64> {
        self.learned.as_ref().map(|l| {
            let rate = l.rate();
            if self.cold_doubling() {
                // Nothing is known to work yet: the pace grows from what has succeeded, at
                // most twice the successes of the last second (never below the event's own
                // rate), so that a pace refused at once (a provider answering its 429s at
                // once, a bucket of one) does not double on for seconds while every call is
                // refused.
                rate.min((COLD_GROWTH * l.shown).max(l.r0)).max(MIN_RATE)
            } else {
                rate
            }
        })
    }

    /// What 429s have taught, to keep across a restart; `None` while nothing was learned.
    pub fn curve(&self) -> Option<KeptCurve> {
        let l = self.learned.as_ref()?;
        Some(KeptCurve {
            rate: self.learned_rate()?,
            estimate: l.r_max,
            known: l.recall,
            confident: l.confident,
            pause_seconds: l.pause,
        })
    }

    /// When the pause the provider asked for in full ends (a `Retry-After` charged here, not
    /// a lone 429's tentative one), or its stated quota's reset while none is left, if either
    /// runs at `now`: what a restart must still honour.
    pub fn held_until(&self, now: Instant) -> Option<Instant> {
        let pause = self
            .pause
            .filter(|p| p.cooling(now) && !self.tentative)
            .map(|p| p.ends_at());
        let quota = self
            .budget
            .filter(|b| b.remaining <= 0 && b.reset_at > now)
            .map(|b| b.reset_at);
        pause.max(quota)
    }

    /// Takes back what an earlier process learned (`curve`, read back by [`Control::curve`])
    /// and the pause it still had to honour, `held_until` (at most [`MAX_PAUSE`] away), on a
    /// pace that has learned nothing yet. The pace starts at the kept rate, no higher: the
    /// curve climbs from it towards the kept estimate (or doubles back towards the rate known
    /// to work, as it would have), never from a cold start. Values out of range (not finite,
    /// an unlimited rate) are dropped, the pause kept. Says whether a rate was taken.
    pub fn resume(
        &mut self,
        curve: Option<KeptCurve>,
        held_until: Option<Instant>,
        now: Instant,
    ) -> bool {
        if let Some(until) = held_until.filter(|u| *u > now) {
            self.pause(now, until.saturating_duration_since(now));
        }
        let Some(c) = curve.filter(|c| {
            [c.rate, c.estimate, c.known, c.pause_seconds]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0)
                && c.rate < MAX_RATE
        }) else {
            return false;
        };
        if self.learned.is_some() {
            return false;
        }
        let rate = c.rate.max(MIN_RATE);
        let estimate = c.estimate.clamp(rate, MAX_RATE);
        let known = c.known.clamp(MIN_RATE, MAX_RATE);
        let pause = c.pause_seconds.min(MAX_PAUSE.as_secs_f64());
        self.learned = Some(Box::new(Recovery::new(
            estimate,
            rate,
            known,
            now,
            c.confident,
            pause,
        )));
        true
    }

    /// The rate the provider allows as far as the pacer knows: learned, stated or configured.
    pub fn allowed(&self) -> Option<f64> {
        either(self.rate(), self.stated, f64::min)
    }

    /// Whether the provider has asked for a pause that is still running at `now`: a
    /// `Retry-After`, or a quota used up until its reset.
    pub fn paused(&self, now: Instant) -> bool {
        self.pause.is_some_and(|p| p.cooling(now))
            || self
                .budget
                .is_some_and(|b| b.remaining <= 0 && b.reset_at > now)
    }

    /// Whether the pacer holds calls back at all (a rate, a pause or a used-up quota).
    pub fn limiting(&self, now: Instant) -> bool {
        self.rate().is_some() || self.paused(now)
    }

    /// Whether the call asking after a pause is on its way: the others wait for its answer.
    pub fn asking(&self) -> bool {
        self.pause.is_some_and(|p| p.asking())
    }

    /// Call `seq` was answered, whatever the answer (or ended without one): if it was the call
    /// asking after a pause, the others may go (a new pause, if the answer asked for one, is
    /// already in force).
    pub fn answered(&mut self, seq: u64) {
        if let Some(p) = &mut self.pause {
            p.answered(seq);
        }
    }

    /// The earliest instant the next call may go.
    pub fn ready_at(&self, now: Instant) -> Instant {
        let mut at = now;
        // Until the call asking after a pause is answered (its answer wakes the others), or
        // the pause's end unless one call may go during it.
        if let Some(until) = self.pause.and_then(|p| p.ready_at(far(now))) {
            at = at.max(until);
        }
        if let Some(b) = self.budget
            && b.remaining <= 0
        {
            at = at.max(b.reset_at);
        }
        if self.rate().is_some()
            && let Some(slot) = self.next_slot
        {
            at = at.max(slot);
        }
        at
    }

    /// Call `seq` goes now.
    pub fn admitted(&mut self, now: Instant, seq: u64) {
        let spent = self
            .budget
            .is_some_and(|b| b.remaining <= 0 && b.reset_at > now);
        if let Some(p) = &mut self.pause {
            if spent {
                p.skip_early();
            } else {
                p.ask(now, seq);
            }
        }
        if let Some(r) = self.rate() {
            let gap = Duration::from_secs_f64(1.0 / r.max(MIN_RATE));
            // A slot missed by a late wake-up is caught up (one at most, so that no burst
            // follows an idle time) only where the timer's grain is a good part of the gap:
            // otherwise the call after a late one would go less than a gap after it, which a
            // provider whose bucket holds one call refuses.
            let catch_up = if gap < TIMER_GRAIN {
                gap
            } else {
                Duration::ZERO
            };
            let from = self
                .next_slot
                .map_or(now, |s| s.max(now.checked_sub(catch_up).unwrap_or(now)));
            self.next_slot = from.checked_add(gap).or(Some(now));
        } else {
            self.next_slot = None;
        }
        if let Some(b) = &mut self.budget {
            if b.reset_at <= now {
                self.budget = None;
            } else {
                b.remaining -= 1;
            }
        }
    }

    /// A call answered successfully.
    pub fn succeeded(&mut self, now: Instant) {
        self.window.add(now);
        if let Some(l) = &mut self.learned {
            l.successes = l.successes.saturating_add(1);
            l.clean = l.clean.saturating_add(1);
        }
    }

    /// A call was answered 429. `sent_at` is when it went out, `retry_after` what the answer
    /// asked for.
    ///
    /// `ramping` says the calls were still held by a cold start's slow-start window
    /// ([`super::slow_start`]): what went through then measured the window, not the limit, so a
    /// first event's estimate is thin however many successes it rests on.
    pub fn throttled(
        &mut self,
        now: Instant,
        sent_at: Instant,
        retry_after: Option<Duration>,
        ramping: bool,
    ) -> Event {
        if let Some(wait) = retry_after {
            self.pause(now, wait);
        }
        let current = self.rate().unwrap_or(f64::INFINITY);
        if self.absorbed(sent_at, retry_after) {
            return Event::Absorbed;
        }
        let (r_max, successes) = self.estimate(now, current, ramping);
        let r0 = (BETA * r_max).max(MIN_RATE.min(r_max));
        let recall = self.recall(r_max, current, successes, ramping);
        let first = self.learned.is_none();
        let confident = successes >= CONFIDENT_SUCCESSES && !(ramping && first);
        let pause = retry_after.map_or(0.0, |w| w.min(MAX_PAUSE).as_secs_f64());
        self.learned = Some(Box::new(Recovery::new(
            r_max, r0, recall, now, confident, pause,
        )));
        if first {
            // What went through before the first refusal was the bucket's burst as much as
            // its rate: the next events read the last second without it, or a large burst
            // would hold the estimate at twice the rate for a second of refusals.
            self.window.forget();
        }
        Event::Cut(self.rate().unwrap_or(r0))
    }

    /// Whether a 429 of a call sent at `sent_at` belongs to the last event (sent before it had
    /// its effect) or is noise on a pace that works (a lone one among many clean successes,
    /// asking for no pause): it is counted, and cuts nothing.
    fn absorbed(&mut self, sent_at: Instant, retry_after: Option<Duration>) -> bool {
        let Some(l) = &mut self.learned else {
            return false;
        };
        l.refused = l.refused.saturating_add(1);
        let clean = std::mem::take(&mut l.clean);
        sent_at < l.at.checked_add(MIN_EVENT_GAP).unwrap_or(l.at)
            || (clean >= NOISE_SUCCESSES && retry_after.is_none() && !l.slow_starting())
    }

    /// The rate the limit is estimated at, at an event at `now` with the pace at `current`
    /// (infinite: none), and the successes the estimate rests on.
    fn estimate(&self, now: Instant, current: f64, ramping: bool) -> (f64, u64) {
        // What went through in the last second of demand: never less than that.
        let recent = self.window.rate(now);
        let (estimate, successes) = match &self.learned {
            Some(l) if l.active > 0.0 => ((l.successes as f64 / l.active).max(recent), l.successes),
            Some(l) => (recent, l.successes),
            None => (recent, self.window.count(now)),
        };
        // The pace worked in part (a third of its answers or more were successes): it was
        // just over the limit.
        let cut = if self
            .learned
            .as_ref()
            .is_some_and(|l| l.successes > 0 && l.successes.saturating_mul(2) >= l.refused)
        {
            MAX_CUT_WITH_SUCCESSES
        } else {
            MAX_CUT
        };
        let floor = if current.is_finite() {
            current * cut
        } else {
            0.0
        };
        // A cold start's slow start doubles the pace faster than successes can show it: the
        // pace it was refused at is the better reading of the limit, as TCP takes its window at
        // a loss. (Climbing back towards a rate known to work, the estimate stands.)
        // (Not while a slow-start window held the calls: the window was refused, not the pace.)
        let climbing = !ramping
            && self
                .learned
                .as_ref()
                .is_some_and(|l| l.slow_starting() && l.recall >= MAX_RATE && current.is_finite());
        // Nor does an average of successes say more than the refused pace when nearly every
        // call since the last event went through (at most one in [`SPARSE`] refused): the pace
        // climbed all along and met the limit only now. Read from the average, each event
        // would start the next curve from less than the last one reached.
        let sparse = self.learned.as_ref().is_some_and(|l| {
            l.successes >= CONFIDENT_SUCCESSES && l.refused.saturating_mul(SPARSE) <= l.successes
        });
        let estimate = if climbing || sparse {
            estimate.max(current)
        } else {
            estimate
        };
        let r_max = current.min(estimate.max(floor)).clamp(MIN_RATE, MAX_RATE);
        (r_max, successes)
    }

    /// The rate to remember as known to work after an event estimating `r_max`.
    fn recall(&self, r_max: f64, current: f64, successes: u64, ramping: bool) -> f64 {
        // A well-founded estimate is what works now; a thin one keeps the memory of the last,
        // and the first event remembers the busiest second before it.
        match &self.learned {
            // A slow start refused past the last estimate, on its way back up, while calls do
            // go through: what it remembered does not work now (a limit lowered for good, not a
            // storm that refuses everything for a while), and it ends, as TCP lowers its
            // threshold at a loss in slow start. Without this, the thin estimates of a
            // persistently low limit climb back again and again.
            Some(l)
                if l.slow_starting()
                    && l.successes > 0
                    && current.is_finite()
                    && current > l.r_max =>
            {
                r_max
            }
            // Nor does a thin event keep the memory when it came on the curve restarted from
            // it, slow start done, while calls went through: the remembered rate was tried
            // and refused (a limit lowered below it, met again and again). A cut before the
            // curve got back there (cut after cut while a neighbour on the same bucket took
            // it) keeps it.
            Some(l) if l.recalled && successes < CONFIDENT_SUCCESSES && l.successes > 0 => r_max,
            Some(l) if successes < CONFIDENT_SUCCESSES => l.recall.max(r_max),
            Some(_) => r_max,
            // A cold start whose first estimate is thin (a small burst, spent at once): nothing
            // is known to work yet, so the rate doubles until the next 429 says where it stops.
            None if successes < CONFIDENT_SUCCESSES || ramping => MAX_RATE,
            None => r_max,
        }
    }

    /// Pauses the token until `now + wait` (at most [`MAX_PAUSE`]), or longer if already paused;
    /// when it ends, one call asks before the others go.
    pub fn pause(&mut self, now: Instant, wait: Duration) {
        let mut pause = CoolDown::new(now, wait.min(MAX_PAUSE), true);
        if let Some(p) = self.pause {
            pause.extend(p.ends_at());
        }
        self.pause = Some(pause);
        self.tentative = false;
    }

    /// Pauses until `now + wait` unless already paused as long, tentatively: the next success
    /// lifts it ([`Control::lift`]). For a lone 429's `Retry-After`, which is the provider's
    /// pause of the scope or one target's own: the scope's calls still on their way answer
    /// which, and with `probe` one more call goes at its pace to answer it.
    pub fn pause_tentatively(&mut self, now: Instant, wait: Duration, probe: bool) {
        let fresh = CoolDown::new(now, wait.min(MAX_PAUSE), false);
        let mut pause = match self.pause {
            Some(p) if p.ends_at() >= fresh.ends_at() => return,
            // A pause asked in full that ran shorter still has its call ask after it.
            Some(mut p) => {
                p.extend(fresh.ends_at());
                p
            }
            None => fresh,
        };
        pause.allow_early(probe);
        self.pause = Some(pause);
        self.tentative = true;
    }

    /// A call succeeded: a tentative pause ends (the scope is not paused). Says whether a
    /// pause ended.
    pub fn lift(&mut self, now: Instant) -> bool {
        let Some(p) = &mut self.pause else {
            return false;
        };
        p.allow_early(false);
        if !std::mem::take(&mut self.tentative) {
            return false;
        }
        p.lift(now);
        true
    }

    /// The quota fields of the answer to call `seq`, `sent_after` calls having gone out since.
    /// Returns whether the stated rate changed.
    pub fn quota(&mut self, now: Instant, info: &QuotaInfo, seq: u64, sent_after: u64) -> bool {
        if let (Some(remaining), Some(reset)) = (info.remaining, info.reset)
            && self.budget.is_none_or(|b| b.seq <= seq)
        {
            let left = i64::try_from(remaining)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(sent_after).unwrap_or(i64::MAX));
            self.budget = Some(Budget {
                remaining: left,
                reset_at: now.checked_add(reset.min(MAX_PAUSE)).unwrap_or(now),
                seq,
            });
        }
        if let (Some(limit), Some(reset)) = (info.limit, info.reset) {
            let window = match self.limit_window {
                Some((l, w)) if l == limit => w.max(reset),
                _ => reset,
            };
            self.limit_window = Some((limit, window));
        }
        let stated = match (info.policy, self.limit_window) {
            (Some(p), _) => Some(p.rate()),
            (None, Some((limit, window))) if !window.is_zero() => {
                Some(limit as f64 / window.as_secs_f64().max(1.0))
            }
            _ => self.stated,
        };
        let changed = stated != self.stated;
        self.stated = stated;
        changed
    }

    /// When the running pause ends, if one runs at `now`.
    pub fn resumes_at(&self, now: Instant) -> Option<Instant> {
        self.paused(now).then(|| self.ready_at(now))
    }
}

#[cfg(test)]
pub(super) mod tests;
