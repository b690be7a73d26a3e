//! HTTP basic auth against bcrypt hashes, with a small cache of successful checks because
//! bcrypt is slow on purpose. Passwords and hashes never reach a log line, an error or a
//! response.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::zeroize::Zeroize as _;
use secrecy::{ExposeSecret as _, SecretSlice};
use tokio::sync::Semaphore;

/// The realm sent with a 401.
pub const REALM: &str = "mailhost_exporter";

/// Successful checks kept; the cache is emptied when it is full, which is cheap and bounded.
const CACHE_CAPACITY: usize = 1024;

/// bcrypt runs this many at a time, so that a flood of bad credentials costs at most that
/// many cores (the exporter toolkit runs one at a time).
const CONCURRENT_BCRYPT: usize = 2;

/// Users and their bcrypt hashes. Cloning is cheap; clones share the cache.
#[derive(Clone, Default)]
pub struct Users {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    hashes: BTreeMap<String, String>,
    cache: Mutex<HashMap<CacheKey, SecretSlice<u8>>>,
    /// Per-process random key for the password digest in [`CacheKey`].
    keys: RandomState,
    bcrypt: Option<Semaphore>,
    /// A hash of a random password, checked for unknown users so that they take as long as
    /// known ones and user names cannot be found by timing.
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
    /// Users from user -> bcrypt hash; refuses (naming the user) a hash that is not bcrypt.
    pub fn new(hashes: BTreeMap<String, String>) -> Result<Users, String> {
        for (user, hash) in &hashes {
            check_hash(hash).map_err(|problem| format!("{user}: {problem}"))?;
        }
        Ok(Users::from_checked(hashes))
    }

    pub(crate) fn from_checked(hashes: BTreeMap<String, String>) -> Users {
        let bcrypt = (!hashes.is_empty()).then(|| Semaphore::new(CONCURRENT_BCRYPT));
        Users {
            inner: Arc::new(Inner {
                hashes,
                cache: Mutex::default(),
                keys: RandomState::new(),
                bcrypt,
                decoy: OnceLock::new(),
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.inner.hashes.is_empty()
    }

    pub fn len(&self) -> usize {
        self.inner.hashes.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.hashes.keys().map(String::as_str)
    }

    /// Whether `password` is right for `user`. Slow (bcrypt) unless the same user, hash and
    /// password succeeded before; failures are never cached.
    pub async fn verify(&self, user: &str, password: SecretSlice<u8>) -> bool {
        let inner = &self.inner;
        let known = inner.hashes.get(user);
        if let Some(hash) = known {
            let key = self.key(user, hash, password.expose_secret());
            let cache = inner.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cached) = cache.get(&key)
                && constant_time_eq(cached.expose_secret(), password.expose_secret())
            {
                return true;
            }
        }
        let Some(gate) = &inner.bcrypt else {
            return false;
        };
        let Ok(_permit) = gate.acquire().await else {
            return false;
        };
        let hash = known.cloned();
        let decoy_cost = known
            .or_else(|| inner.hashes.values().next())
            .and_then(|h| h.parse::<bcrypt::HashParts>().ok())
            .map_or(bcrypt::DEFAULT_COST, |p| p.get_cost());
        let this = self.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let ok = match &hash {
                Some(hash) => bcrypt::verify(password.expose_secret(), hash).unwrap_or(false),
                None => {
                    let decoy = this.inner.decoy.get_or_init(|| decoy_hash(decoy_cost));
                    let _ = bcrypt::verify(password.expose_secret(), decoy);
                    false
                }
            };
            (ok, password)
        })
        .await;
        let Ok((true, password)) = checked else {
            return false;
        };
        let Some(hash) = known else {
            return false;
        };
        let key = self.key(user, hash, password.expose_secret());
        let mut cache = inner.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, password);
        true
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

/// Compares every byte whatever the first difference, so the time taken does not tell how
/// much of a guess was right (the length still shows).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Demands HTTP basic auth on every route of `router` (fallback included) when `users` is not
/// empty: a 401 with `WWW-Authenticate: Basic realm="mailhost_exporter"` otherwise.
pub fn require_basic_auth(router: Router, users: Users) -> Router {
    if users.is_empty() {
        return router;
    }
    router.layer(axum::middleware::from_fn_with_state(users, basic_auth))
}

async fn basic_auth(State(users): State<Users>, request: Request, next: Next) -> Response {
    let allowed = match credentials(request.headers()) {
        Some((user, password)) => users.verify(&user, password).await,
        None => false,
    };
    if allowed {
        next.run(request).await
    } else {
        unauthorized()
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

/// Standard base64 with optional padding, as browsers and HTTP clients send it.
fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let body = match input {
        [rest @ .., b'=', b'='] => rest,
        [rest @ .., b'='] => rest,
        all => all,
    };
    // Padding, when present, must complete the last group of four.
    if body.len() != input.len() && input.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
        n.zeroize();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt as _;

    fn users(pairs: &[(&str, &str)]) -> Users {
        Users::new(
            pairs
                .iter()
                .map(|(u, p)| ((*u).to_owned(), bcrypt::hash(p, 4).unwrap()))
                .collect(),
        )
        .unwrap()
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
    async fn only_successes_are_cached_and_a_cached_password_lets_no_other_in() {
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

    #[tokio::test]
    async fn every_route_and_the_fallback_demand_credentials() {
        let app = require_basic_auth(
            Router::new().route("/", get(|| async { "ok" })),
            users(&[("alice", "pw")]),
        );
        for path in ["/", "/nowhere"] {
            let r = app
                .clone()
                .oneshot(axum::http::Request::get(path).body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(
                r.headers()[header::WWW_AUTHENTICATE],
                "Basic realm=\"mailhost_exporter\""
            );
        }
        let r = app
            .oneshot(
                axum::http::Request::get("/")
                    .header(header::AUTHORIZATION, "Basic YWxpY2U6cHc=")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn no_users_means_no_auth() {
        let app = require_basic_auth(
            Router::new().route("/", get(|| async { "ok" })),
            Users::default(),
        );
        let r = app
            .oneshot(axum::http::Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}
