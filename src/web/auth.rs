//! HTTP basic auth against bcrypt hashes. bcrypt is slow on purpose, so both outcomes are
//! cached (as the exporter toolkit does) and the checks that do run take turns per client
//! address, so that a flood of wrong passwords from one place cannot delay a scraper's login.
//! Passwords and hashes never reach a log line, an error or a response.

use std::collections::hash_map::{Entry, RandomState};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::BuildHasher as _;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use secrecy::zeroize::Zeroize as _;
use secrecy::{ExposeSecret as _, SecretSlice};
use subtle::ConstantTimeEq as _;
use tokio::sync::oneshot;

/// The realm sent with a 401.
pub const REALM: &str = "mailhost_exporter";

/// Successful checks kept; the cache is emptied when it is full, which is cheap and bounded.
/// Only right passwords get in, so a flood cannot empty it.
const CACHE_CAPACITY: usize = 1024;

/// Failed checks kept (a keyed 64-bit digest each, no password); emptied when full. A client
/// that repeats one wrong password (a scraper with a stale secret) costs one bcrypt.
pub const FAILURE_CACHE_CAPACITY: usize = 4096;

/// bcrypt runs this many at a time, so that a flood of bad credentials costs at most that
/// many cores (the exporter toolkit runs one at a time).
pub const CONCURRENT_BCRYPT: usize = 2;

/// Checks waiting for bcrypt from one client address (an IPv6 /64 counts as one) at most;
/// more are answered 429 at once. Waiting checks take turns between addresses.
pub const MAX_WAITING_PER_CLIENT: usize = 8;

/// Client addresses with checks waiting at most; a check from yet another one gets a 429.
pub const MAX_WAITING_CLIENTS: usize = 1024;

/// Users and their bcrypt hashes. Cloning is cheap; clones share the caches and the gate.
#[derive(Clone, Default)]
pub struct Users {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    hashes: BTreeMap<String, String>,
    cache: Mutex<HashMap<CacheKey, SecretSlice<u8>>>,
    /// Digests of (user, hash, password) that failed; see [`FAILURE_CACHE_CAPACITY`].
    failures: Mutex<HashSet<u64>>,
    /// Per-process random key for the password digests.
    keys: RandomState,
    bcrypt: Option<Arc<Gate>>,
    /// A hash of a random password, checked for unknown users so that they take as long as
    /// the dearest known one and user names cannot be found by timing.
    decoy: OnceLock<String>,
}

/// A successful check: user, stored hash and a keyed digest of the password. The entry's value
/// is the password itself, compared in full on a hit, so a digest collision cannot let a wrong
/// password in.
#[derive(PartialEq, Eq, Hash)]
struct CacheKey {
    user: String,
    hash: String,
    digest: u64,
}

/// The outcome of a credentials check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Too many checks from this client are waiting already; nothing was checked.
    Busy,
}

impl fmt::Debug for Users {
    // Names only: a hash must not reach a log line through Debug.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Users")
            .field("names", &self.inner.hashes.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether `hash` is a bcrypt hash that can be checked: `$2a$`, `$2b$`, `$2x$` or `$2y$`, a
/// cost from 4 to 31, and 53 characters of salt and hash. The reason never quotes the hash.
pub fn check_hash(hash: &str) -> Result<(), &'static str> {
    if hash.is_empty() {
        return Err("is empty, not a bcrypt hash");
    }
    let parts: bcrypt::HashParts = hash
        .parse()
        .map_err(|_| "is not a bcrypt hash ($2y$, a cost, then 53 characters of salt and hash)")?;
    if !(4..=31).contains(&parts.get_cost()) {
        return Err("is not a usable bcrypt hash: its cost is outside 4 to 31");
    }
    Ok(())
}

impl Users {
    /// Users from user -> bcrypt hash, each already passed by [`check_hash`].
    pub(crate) fn from_checked(hashes: BTreeMap<String, String>) -> Users {
        let bcrypt = (!hashes.is_empty()).then(|| Arc::new(Gate::new(CONCURRENT_BCRYPT)));
        Users {
            inner: Arc::new(Inner {
                hashes,
                bcrypt,
                ..Inner::default()
            }),
        }
    }

    /// The same users, taking turns in `other`'s bcrypt queue, so that a reload does not open
    /// a second set of bcrypt slots next to the one a flood is still using.
    pub(crate) fn sharing_gate_of(mut self, other: &Users) -> Users {
        if let (Some(inner), Some(gate)) = (Arc::get_mut(&mut self.inner), &other.inner.bcrypt)
            && inner.bcrypt.is_some()
        {
            inner.bcrypt = Some(gate.clone());
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.inner.hashes.is_empty()
    }

    pub fn len(&self) -> usize {
        self.inner.hashes.len()
    }

    /// Whether `password` is right for `user`, for a client at an unknown address; see
    /// [`Users::check`].
    pub async fn verify(&self, user: &str, password: SecretSlice<u8>) -> bool {
        self.check(user, password, None).await == Verdict::Allowed
    }

    /// Whether `password` is right for `user`. Slow (bcrypt) unless the same user, hash and
    /// password were checked before; checks that need bcrypt wait their turn behind those of
    /// other client addresses, and past [`MAX_WAITING_PER_CLIENT`] are not made at all.
    pub async fn check(
        &self,
        user: &str,
        password: SecretSlice<u8>,
        client: Option<IpAddr>,
    ) -> Verdict {
        let inner = &self.inner;
        let known = inner.hashes.get(user);
        let digest = inner.keys.hash_one((
            user,
            known.map_or("", String::as_str),
            password.expose_secret(),
        ));
        if let Some(hash) = known {
            let key = self.key(user, hash, password.expose_secret());
            let cache = inner.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cached) = cache.get(&key)
                // Constant time, so the time taken does not tell how much of a guess was
                // right (the length still shows).
                && bool::from(cached.expose_secret().ct_eq(password.expose_secret()))
            {
                return Verdict::Allowed;
            }
        }
        if inner
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&digest)
        {
            return Verdict::Denied;
        }
        let Some(gate) = &inner.bcrypt else {
            return Verdict::Denied;
        };
        let Some(permit) = gate.enter(client_key(client)).await else {
            return Verdict::Busy;
        };
        let hash = known.cloned();
        let decoy_cost = self.dearest_cost();
        let this = self.clone();
        // The permit goes with the work: a client that hangs up does not free a bcrypt slot
        // while its check still runs.
        let checked = tokio::task::spawn_blocking(move || {
            let ok = match &hash {
                Some(hash) => bcrypt::verify(password.expose_secret(), hash).unwrap_or(false),
                None => {
                    let decoy = this.inner.decoy.get_or_init(|| decoy_hash(decoy_cost));
                    let _ = bcrypt::verify(password.expose_secret(), decoy);
                    false
                }
            };
            drop(permit);
            (ok, password)
        })
        .await;
        let Ok((ok, password)) = checked else {
            return Verdict::Denied;
        };
        match known {
            Some(hash) if ok => {
                let key = self.key(user, hash, password.expose_secret());
                let mut cache = inner.cache.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() >= CACHE_CAPACITY {
                    cache.clear();
                }
                cache.insert(key, password);
                Verdict::Allowed
            }
            _ => {
                let mut failures = inner.failures.lock().unwrap_or_else(|e| e.into_inner());
                if failures.len() >= FAILURE_CACHE_CAPACITY {
                    failures.clear();
                }
                failures.insert(digest);
                Verdict::Denied
            }
        }
    }

    /// The highest cost among the configured hashes: an unknown user must not be cheaper to
    /// try than any known one.
    fn dearest_cost(&self) -> u32 {
        self.inner
            .hashes
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST)
    }

    fn key(&self, user: &str, hash: &str, password: &[u8]) -> CacheKey {
        CacheKey {
            user: user.to_owned(),
            hash: hash.to_owned(),
            digest: self.inner.keys.hash_one((user, hash, password)),
        }
    }

    #[cfg(test)]
    fn cached(&self) -> usize {
        self.inner.cache.lock().unwrap().len()
    }

    #[cfg(test)]
    fn failures_cached(&self) -> usize {
        self.inner.failures.lock().unwrap().len()
    }
}

/// Whose turn a check waits in: an IPv4 address, or the /64 of an IPv6 one (one host usually
/// holds a whole /64). IPv4-mapped IPv6 addresses count as IPv4.
fn client_key(client: Option<IpAddr>) -> IpAddr {
    match client {
        None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        Some(IpAddr::V4(v4)) => IpAddr::V4(v4),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// bcrypt slots handed out in turns: one waiting check per client address in round robin, so
/// a flood from one address waits behind itself only.
struct Gate {
    slots: usize,
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    running: usize,
    waiting: HashMap<IpAddr, VecDeque<oneshot::Sender<Permit>>>,
    /// Every address with waiting checks, once, in the order of their next turn.
    turns: VecDeque<IpAddr>,
}

/// A bcrypt slot; dropping it hands the slot to the next waiting check.
struct Permit {
    gate: Option<Arc<Gate>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.release();
        }
    }
}

impl Gate {
    fn new(slots: usize) -> Gate {
        Gate {
            slots,
            state: Mutex::default(),
        }
    }

    /// A slot, at once or in turn; `None` when this client has too many checks waiting.
    async fn enter(self: &Arc<Self>, client: IpAddr) -> Option<Permit> {
        let turn = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.running < self.slots && state.turns.is_empty() {
                state.running += 1;
                return Some(Permit {
                    gate: Some(self.clone()),
                });
            }
            let clients = state.waiting.len();
            let (tx, rx) = oneshot::channel();
            match state.waiting.entry(client) {
                Entry::Occupied(mut queue) => {
                    if queue.get().len() >= MAX_WAITING_PER_CLIENT {
                        return None;
                    }
                    queue.get_mut().push_back(tx);
                }
                Entry::Vacant(slot) => {
                    if clients >= MAX_WAITING_CLIENTS {
                        return None;
                    }
                    slot.insert(VecDeque::from([tx]));
                    state.turns.push_back(client);
                }
            }
            rx
        };
        turn.await.ok()
    }

    /// Hands a freed slot to the next client in turn (skipping checks whose client hung up).
    fn release(self: &Arc<Self>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(client) = state.turns.pop_front() {
            let Some(queue) = state.waiting.get_mut(&client) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                state.waiting.remove(&client);
            } else {
                state.turns.push_back(client);
            }
            let Some(next) = next else {
                continue;
            };
            let permit = Permit {
                gate: Some(self.clone()),
            };
            match next.send(permit) {
                Ok(()) => return,
                // Nobody to take it: pass it on without running this release again.
                Err(mut unused) => unused.gate = None,
            }
        }
        state.running = state.running.saturating_sub(1);
    }
}

/// A hash of a random password nobody knows, of the given cost.
fn decoy_hash(cost: u32) -> String {
    let seed = format!(
        "{:x}{:x}",
        RandomState::new().hash_one(1u8),
        RandomState::new().hash_one(2u8)
    );
    bcrypt::hash(seed, cost).unwrap_or_default()
}

/// Checks the request's basic auth credentials against `users` (nothing to check when there
/// are none); the refusal is a 401 with the challenge, or a 429 when this client has too many
/// checks waiting already.
/// The future holds no part of the request, so the request can move on once it resolves.
pub fn authorize(
    users: &Users,
    request: &Request,
) -> impl Future<Output = Result<(), Response>> + Send + 'static {
    let users = users.clone();
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let credentials = (!users.is_empty())
        .then(|| credentials(request.headers()))
        .flatten();
    async move {
        if users.is_empty() {
            return Ok(());
        }
        let verdict = match credentials {
            Some((user, password)) => users.check(&user, password, client).await,
            None => Verdict::Denied,
        };
        match verdict {
            Verdict::Allowed => Ok(()),
            Verdict::Denied => Err(unauthorized()),
            Verdict::Busy => Err((
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                "Too many password checks from your address are waiting; retry in a moment\n",
            )
                .into_response()),
        }
    }
}

fn unauthorized() -> Response {
    let challenge = format!("Basic realm=\"{REALM}\"");
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_str(&challenge).expect("the realm is a valid header value"),
        )],
        "Unauthorized\n",
    )
        .into_response()
}

/// The user and password of an `Authorization: Basic` header, if there is a well-formed one.
fn credentials(headers: &HeaderMap) -> Option<(String, SecretSlice<u8>)> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, encoded) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let mut decoded = base64_decode(encoded.trim_ascii())?;
    let parsed = decoded.iter().position(|&b| b == b':').and_then(|colon| {
        let user = std::str::from_utf8(&decoded[..colon]).ok()?.to_owned();
        Some((user, SecretSlice::from(decoded[colon + 1..].to_vec())))
    });
    decoded.zeroize();
    parsed
}

/// Standard base64, padded or not, as browsers and HTTP clients send it. Loose trailing bits
/// are let through (as Go's decoder does by default), so a client that was let in before is
/// still let in.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes the header's credentials. The header is already bounded by the server's head limit
/// ([`MAX_HEADER_BYTES`](crate::web::serve::MAX_HEADER_BYTES)), so the buffer is too.
fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    // Padding, when present, must complete the last group of four: the engine would also
    // take a partial one, which was refused before it came in.
    if input.last() == Some(&b'=') && !input.len().is_multiple_of(4) {
        return None;
    }
    BASE64.decode(input).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(pairs: &[(&str, &str)]) -> Users {
        Users::from_checked(
            pairs
                .iter()
                .map(|(u, p)| ((*u).to_owned(), bcrypt::hash(p, 4).unwrap()))
                .collect(),
        )
    }

    fn secret(s: &str) -> SecretSlice<u8> {
        SecretSlice::from(s.as_bytes().to_vec())
    }

    #[test]
    fn base64_decodes_padded_and_unpadded_input() {
        assert_eq!(base64_decode(b"YWxpY2U6cHc=").unwrap(), b"alice:pw");
        assert_eq!(base64_decode(b"YWxpY2U6cHc").unwrap(), b"alice:pw");
        assert_eq!(base64_decode(b"YTpiYw==").unwrap(), b"a:bc");
        assert_eq!(base64_decode(b"").unwrap(), b"");
        assert!(base64_decode(b"YWxp!2U6").is_none());
        assert!(base64_decode(b"Y").is_none());
    }

    #[test]
    fn base64_refuses_incomplete_padding_and_lets_loose_trailing_bits_through() {
        assert!(base64_decode(b"YQ=").is_none());
        assert!(base64_decode(b"YWJj=").is_none());
        assert!(base64_decode(b"YQ===").is_none());
        assert!(base64_decode(b"A===").is_none());
        assert!(base64_decode(b"YWJj YQ==").is_none());
        assert_eq!(base64_decode(b"YR==").unwrap(), b"a");
        assert_eq!(base64_decode(b"YR").unwrap(), b"a");
    }

    #[test]
    fn credentials_need_the_basic_scheme_and_a_colon() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "basic YTpiOmM=".parse().unwrap());
        let (user, pw) = credentials(&h).unwrap();
        assert_eq!((user.as_str(), pw.expose_secret()), ("a", &b"b:c"[..]));
        h.insert(header::AUTHORIZATION, "Bearer YTpiOmM=".parse().unwrap());
        assert!(credentials(&h).is_none());
        h.insert(header::AUTHORIZATION, "Basic YWJj".parse().unwrap());
        assert!(credentials(&h).is_none());
    }

    #[test]
    fn hashes_that_are_not_bcrypt_are_refused_without_being_quoted() {
        for bad in [
            "",
            "plain",
            "$2y$03$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi",
        ] {
            let e = check_hash(bad).unwrap_err();
            assert!(bad.is_empty() || !e.contains(bad));
        }
        assert!(check_hash("$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi").is_ok());
    }

    #[test]
    fn debug_shows_names_but_no_hash() {
        let u = users(&[("alice", "pw")]);
        let shown = format!("{u:?}");
        assert!(shown.contains("alice") && !shown.contains("$2"));
    }

    #[tokio::test]
    async fn a_cached_password_lets_no_other_in() {
        let u = users(&[("alice", "right"), ("bob", "other")]);
        assert!(!u.verify("alice", secret("wrong")).await);
        assert_eq!(u.cached(), 0);
        assert!(u.verify("alice", secret("right")).await);
        assert_eq!(u.cached(), 1);
        assert!(u.verify("alice", secret("right")).await);
        assert!(!u.verify("alice", secret("wrong")).await);
        assert!(!u.verify("alice", secret("righ")).await);
        assert!(!u.verify("bob", secret("right")).await);
        assert!(!u.verify("carol", secret("right")).await);
        assert_eq!(u.cached(), 1);
    }

    #[tokio::test]
    async fn a_repeated_wrong_password_costs_one_check_and_the_failure_cache_stays_bounded() {
        let u = users(&[("alice", "right")]);
        assert!(!u.verify("alice", secret("stale")).await);
        assert!(!u.verify("nobody", secret("stale")).await);
        assert_eq!(u.failures_cached(), 2);
        // Answered from the cache: no bcrypt slot is taken even when none is free.
        let gate = u.inner.bcrypt.clone().unwrap();
        let mut held = Vec::new();
        for _ in 0..CONCURRENT_BCRYPT {
            held.push(gate.enter(client_key(None)).await.unwrap());
        }
        assert!(!u.verify("alice", secret("stale")).await);
        drop(held);
        assert!(u.verify("alice", secret("right")).await);
        {
            let mut failures = u.inner.failures.lock().unwrap();
            failures.extend(0..FAILURE_CACHE_CAPACITY as u64);
        }
        assert!(!u.verify("alice", secret("another")).await);
        assert_eq!(u.failures_cached(), 1);
    }

    #[tokio::test]
    async fn waiting_checks_take_turns_by_address_and_one_address_waits_at_most_a_few() {
        let gate = Arc::new(Gate::new(1));
        let flood: IpAddr = "127.0.0.2".parse().unwrap();
        let good: IpAddr = "127.0.0.1".parse().unwrap();
        let running = gate.enter(flood).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..MAX_WAITING_PER_CLIENT {
            let (gate, order) = (gate.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let permit = gate.enter(flood).await;
                order.lock().unwrap().push(format!("flood{i}"));
                drop(permit);
            }));
            tokio::task::yield_now().await;
        }
        // Let every flood check queue up before the good one arrives.
        while gate
            .state
            .lock()
            .unwrap()
            .waiting
            .get(&flood)
            .map_or(0, VecDeque::len)
            < MAX_WAITING_PER_CLIENT
        {
            tokio::task::yield_now().await;
        }
        assert!(gate.enter(flood).await.is_none(), "one too many waits");
        let good_turn = {
            let (gate, order) = (gate.clone(), order.clone());
            tokio::spawn(async move {
                let permit = gate.enter(good).await;
                order.lock().unwrap().push("good".to_owned());
                drop(permit);
            })
        };
        while !gate.state.lock().unwrap().waiting.contains_key(&good) {
            tokio::task::yield_now().await;
        }
        drop(running);
        good_turn.await.unwrap();
        for w in waiting {
            w.await.unwrap();
        }
        let order = order.lock().unwrap();
        let good_at = order.iter().position(|o| o == "good").unwrap();
        assert!(
            good_at <= 1,
            "the good check waited behind the flood: {order:?}"
        );
        assert_eq!(gate.state.lock().unwrap().running, 0);
    }

    #[test]
    fn ipv6_clients_take_turns_by_their_64_prefix() {
        let a = client_key(Some("2001:db8::1".parse().unwrap()));
        let b = client_key(Some("2001:db8::ffff:1".parse().unwrap()));
        let c = client_key(Some("2001:db8:0:1::1".parse().unwrap()));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            client_key(Some("::ffff:10.0.0.1".parse().unwrap())),
            "10.0.0.1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn unknown_users_cost_as_much_as_the_dearest_known_one() {
        let u = Users::from_checked(
            [
                ("cheap".to_owned(), bcrypt::hash("a", 4).unwrap()),
                ("dear".to_owned(), bcrypt::hash("b", 6).unwrap()),
            ]
            .into(),
        );
        assert_eq!(u.dearest_cost(), 6);
    }

    #[tokio::test]
    async fn the_cache_stays_bounded() {
        let u = users(&[("alice", "right")]);
        let hash = u.inner.hashes["alice"].clone();
        {
            let mut cache = u.inner.cache.lock().unwrap();
            for i in 0..CACHE_CAPACITY {
                let pw = format!("filler{i}");
                cache.insert(u.key("alice", &hash, pw.as_bytes()), secret(&pw));
            }
        }
        assert!(u.verify("alice", secret("right")).await);
        assert_eq!(u.cached(), 1);
    }
}
