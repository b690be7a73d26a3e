//! The descriptor plan: how the open-file limit is shared, at start, between the connections the
//! exporter serves (`--web.max-connections`), the calls it has in flight to the provider across
//! all tenants, and a reserve for everything else (the listener, config and certificate files,
//! logs, the runtime's own). A config whose tenants ask for more upstream calls at once than
//! fit is told once, at start and by `--config.check`; its calls beyond the plan wait for a turn
//! instead of taking the descriptors that `/metrics` and `/-/healthy` are answered with.

/// Descriptors kept out of the connection cap for upstream sockets, config and certificate
/// files, the listener and standard streams, so a full house of clients never starves them.
pub const FD_RESERVE: u64 = 128;

/// Upstream calls in flight the plan keeps room for at least (taken from the serving side when
/// the limit is that low), or all the config asks for, if fewer.
pub const MIN_UPSTREAM: usize = 16;

/// Idle upstream connections kept for the next calls, at most.
pub const MAX_IDLE: usize = 256;

/// Upstream connections being made at once, at most.
pub const MAX_CONNECTING: usize = 64;

/// How the descriptors are shared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The open-file limit planned for (`None`: no limit).
    pub limit: Option<u64>,
    /// Connections served at once, at most (`--web.max-connections`, lowered to fit).
    pub serving: usize,
    /// The upstream side (`None`: no limit; calls in flight are then capped by the transport's
    /// `MAX_CALLS` alone).
    pub upstream: Option<Upstream>,
    /// What was asked: `--web.max-connections`, and `api.concurrency` summed over the tenants.
    pub asked_serving: usize,
    pub asked_upstream: usize,
}

/// The descriptors of the upstream side: a socket is in use by a call, idle in the pool, or
/// being connected (two at once when a host has IPv4 and IPv6 addresses), so the sockets open
/// to the provider never exceed `calls + idle + 2 × connecting`. (Calls alone do not bound them:
/// the pool may hand a call an idle connection while the one it started connecting goes on.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Calls in flight across all tenants, at most.
    pub calls: usize,
    /// Idle connections kept, at most.
    pub idle: usize,
    /// Connections being made at once, at most.
    pub connecting: usize,
}

impl Upstream {
    /// The upstream side of `room` descriptors.
    pub fn within(room: usize) -> Upstream {
        let idle = (room / 4).min(MAX_IDLE);
        let connecting = (room / 16).clamp(1, MAX_CONNECTING);
        Upstream {
            calls: room.saturating_sub(idle + 2 * connecting).max(1),
            idle,
            connecting,
        }
    }

    /// Sockets open to the provider at most.
    pub fn sockets(&self) -> usize {
        self.calls + self.idle + 2 * self.connecting
    }
}

impl Plan {
    /// The plan for an open-file limit of `limit`.
    pub fn new(limit: Option<u64>, max_connections: usize, asked_upstream: usize) -> Plan {
        let asked_serving = max_connections.max(1);
        let Some(limit) = limit else {
            return Plan {
                limit,
                serving: asked_serving,
                upstream: None,
                asked_serving,
                asked_upstream,
            };
        };
        let room = usize::try_from(limit.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
        let floor = asked_upstream.clamp(1, MIN_UPSTREAM);
        let serving = asked_serving.min(room.saturating_sub(floor)).max(1);
        Plan {
            limit: Some(limit),
            serving,
            upstream: Some(Upstream::within(room.saturating_sub(serving).max(1))),
            asked_serving,
            asked_upstream,
        }
    }

    /// The plan for this process's open-file limit now (its soft limit: the exporter raises it
    /// to the hard one before it plans).
    pub fn now(max_connections: usize, asked_upstream: usize) -> Plan {
        Plan::new(nofile(|(soft, _)| soft), max_connections, asked_upstream)
    }

    /// The plan the exporter will make when it starts in this environment: with the soft limit
    /// raised to the hard one, as it does (for `--config.check`).
    pub fn at_start(max_connections: usize, asked_upstream: usize) -> Plan {
        Plan::new(nofile(|(_, hard)| hard), max_connections, asked_upstream)
    }

    /// What does not fit, the consequence and the fix; `None` when everything asked fits.
    pub fn shortfall(&self) -> Option<String> {
        let limit = self.limit?;
        let upstream = self.upstream.map_or(usize::MAX, |u| u.calls);
        if self.asked_upstream <= upstream && self.asked_serving <= self.serving {
            return None;
        }
        // The calls asked for, with the idle and connecting sockets the plan adds to them.
        let overhead = MAX_IDLE + 2 * MAX_CONNECTING;
        let need = (self.asked_upstream as u64)
            .saturating_add(overhead as u64)
            .saturating_add(self.asked_serving as u64)
            .saturating_add(FD_RESERVE);
        Some(format!(
            "the open-file limit ({limit}) leaves room for {upstream} upstream calls at once across all tenants (the config's api.concurrency adds up to {}) and {} served connections (--web.max-connections is {}), with {FD_RESERVE} descriptors kept for the rest and some for idle connections; calls beyond wait for a turn and connections beyond wait to be accepted. Raise the limit to at least {need} (ulimit -n, LimitNOFILE= in a systemd unit, --ulimit nofile= for docker) or lower api.concurrency",
            self.asked_upstream, self.serving, self.asked_serving
        ))
    }
}

/// The open-file limit `pick` takes of (soft, hard); `None` when there is none.
fn nofile(pick: fn((u64, u64)) -> u64) -> Option<u64> {
    let limit = rlimit::getrlimit(rlimit::Resource::NOFILE).ok().map(pick);
    limit.filter(|l| *l != rlimit::INFINITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_shared_between_serving_upstream_and_a_reserve() {
        // 300 tenants of concurrency 8 under a limit of 1024.
        let p = Plan::new(Some(1024), 512, 2400);
        assert_eq!(p.serving, 512);
        let up = p.upstream.unwrap();
        assert_eq!(up.sockets(), 1024 - 128 - 512);
        assert_eq!((up.calls, up.idle, up.connecting), (240, 96, 24));
        let told = p.shortfall().unwrap();
        assert!(
            told.contains("(1024)") && told.contains("240 upstream calls"),
            "{told}"
        );
        assert!(told.contains("at least 3424"), "{told}");
        // Everything fits: nothing to say, and upstream takes the rest.
        let p = Plan::new(Some(65_536), 512, 2400);
        let up = p.upstream.unwrap();
        assert_eq!(up.sockets(), 65_536 - 128 - 512);
        assert_eq!((up.idle, up.connecting), (MAX_IDLE, MAX_CONNECTING));
        assert_eq!(p.shortfall(), None);
        // No limit: no plan (the transport's MAX_CALLS still caps calls in flight).
        let p = Plan::new(None, 512, 2400);
        assert_eq!((p.serving, p.upstream, p.shortfall()), (512, None, None));
    }

    #[test]
    fn a_tiny_limit_still_leaves_room_to_call_and_to_serve() {
        let p = Plan::new(Some(200), 512, 64);
        assert_eq!(p.upstream.unwrap().sockets(), MIN_UPSTREAM);
        assert_eq!(p.serving, 200 - 128 - MIN_UPSTREAM);
        assert!(p.shortfall().is_some());
        for limit in [0, 1, 127, 128, 129, 144] {
            let p = Plan::new(Some(limit), 512, 64);
            let up = p.upstream.unwrap();
            assert!(
                p.serving >= 1 && up.calls >= 1 && up.connecting >= 1,
                "{limit}: {p:?}"
            );
        }
        // A config asking for fewer calls than the floor keeps the rest for serving.
        let p = Plan::new(Some(200), 512, 2);
        assert_eq!(p.serving, 200 - 128 - 2);
        // Every room is shared without going past it (but for the one call and one connection
        // always left).
        for room in 1..2000 {
            let up = Upstream::within(room);
            assert!(up.sockets() <= room.max(3), "{room}: {up:?}");
        }
    }
}
