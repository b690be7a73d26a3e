//! When a collector runs: the schedule keys every `collectors.<collector>` block shares
//! (`enabled`, `interval`, `deadline`, `max_age`), written once here and added to each collector's
//! block by [`collector_block!`], and their validation.

use std::time::Duration;

use super::error::{ConfigError, invalid};
use super::fields::within;
use super::{defaults, limits};

/// When a collector runs and how long its values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub interval: Duration,
    /// The whole run must finish within this; shorter than `interval`, so runs never pile up.
    pub deadline: Duration,
    /// A failing target keeps its last good values this long, then its series are dropped.
    pub max_age: Duration,
}

/// The schedule keys of a `collectors.<collector>` block as written.
#[derive(Debug, Clone, Copy)]
pub struct RawSchedule {
    pub enabled: bool,
    pub interval: Option<Duration>,
    pub deadline: Option<Duration>,
    pub max_age: Option<Duration>,
}

/// A `collectors.<collector>` block as written: the shared schedule keys, then the collector's own.
pub trait CollectorBlock {
    fn schedule_keys(&self) -> RawSchedule;
    /// Switches the block on or off over its `enabled` (`--collector.NAME`,
    /// `--no-collector.NAME`).
    fn set_enabled(&mut self, on: bool);
}

/// A target list as the config writes it: its key and its items (account ids, codes,
/// `{domain, mailbox}` pairs), in a `collectors.<collector>` block or a tenant's.
pub trait Listing {
    /// One target as written.
    type Item: std::fmt::Debug;
    /// The key of the list, for messages: `accounts`, `migrations`, ...
    const KEY: &'static str;
    fn items(&self) -> &[Self::Item];
}

/// What every target's fetch of a collector uses, read from its `collectors.<collector>` block `B`
/// at `field`. A collector without settings has `()`, which reads nothing.
pub trait FromBlock<B>: Sized {
    fn from_block(raw: &B, field: &str) -> Result<Self, ConfigError>;
}

impl<B> FromBlock<B> for () {
    fn from_block(_raw: &B, _field: &str) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// Declares a collector's `collectors.<collector>` block: the schedule keys every block has (in
/// this order, which messages about unknown keys list), then the fields given, then the target list
/// (`list KEY: ITEM`); and the tenant's block of the collector (`tenant NAME`), which holds the
/// list alone. Strict: serde cannot `flatten` a shared struct into one that denies unknown keys,
/// and unknown keys must be refused. A block whose fields begin with `day;` has the keys of the day
/// it asks about first (`timezone`, `date_format`; read with
/// [`crate::settings::fields::Day::from_keys`]).
macro_rules! collector_block {
    (
        $(#[$meta:meta])* pub struct $name:ident { day; $($fields:tt)* }
        $($rest:tt)*
    ) => {
        crate::settings::schedule::collector_block! {
            $(#[$meta])*
            pub struct $name {
                pub timezone: Option<String>,
                pub date_format: Option<String>,
                $($fields)*
            }
            $($rest)*
        }
    };
    (
        $(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }
        $(#[$tenant_meta:meta])* list $list:ident: $item:ty, tenant $tenant:ident;
    ) => {
        $(#[$meta])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            #[serde(default = "crate::settings::schedule::enabled_by_default")]
            pub enabled: bool,
            #[serde(default, with = "humantime_serde")]
            pub interval: Option<std::time::Duration>,
            #[serde(default, with = "humantime_serde")]
            pub deadline: Option<std::time::Duration>,
            #[serde(default, with = "humantime_serde")]
            pub max_age: Option<std::time::Duration>,
            $($(#[$field_meta])* pub $field: $ty,)*
            #[serde(default)]
            pub $list: Vec<$item>,
        }

        impl crate::settings::schedule::CollectorBlock for $name {
            fn schedule_keys(&self) -> crate::settings::schedule::RawSchedule {
                crate::settings::schedule::RawSchedule {
                    enabled: self.enabled,
                    interval: self.interval,
                    deadline: self.deadline,
                    max_age: self.max_age,
                }
            }

            fn set_enabled(&mut self, on: bool) {
                self.enabled = on;
            }
        }

        $(#[$tenant_meta])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $tenant {
            #[serde(default)]
            pub $list: Vec<$item>,
        }

        crate::settings::schedule::collector_block!(@listing $name, $tenant; $list: $item);
    };
    // The target list of the collector's block and of the tenant's block.
    (@listing $($block:ident),+; $list:ident: $item:ty) => {
        $(impl crate::settings::schedule::Listing for $block {
            type Item = $item;
            const KEY: &'static str = stringify!($list);
            fn items(&self) -> &[$item] {
                &self.$list
            }
        })+
    };
}
pub(crate) use collector_block;

/// A collector named in the config runs unless `enabled: false`.
pub fn enabled_by_default() -> bool {
    true
}

/// The validated schedule of the block at `field`.
pub fn from_keys(field: &str, keys: RawSchedule) -> Result<Schedule, ConfigError> {
    let interval = keys.interval.unwrap_or(defaults::INTERVAL);
    within(
        &format!("{field}.interval"),
        interval,
        limits::MIN_INTERVAL,
        limits::MAX_INTERVAL,
        "60s",
    )?;
    // Default deadline: 80% of the interval, so a slow run ends before the next one is due.
    // The interval is bounded above, so neither product can overflow.
    let deadline = keys.deadline.unwrap_or(interval / 5 * 4);
    if deadline.is_zero() || deadline >= interval {
        return Err(invalid(
            format!("{field}.deadline"),
            format!(
                "{} must be shorter than the interval ({}); a run may not overlap the next",
                humantime::format_duration(deadline),
                humantime::format_duration(interval)
            ),
        ));
    }
    let max_age = keys
        .max_age
        .unwrap_or(interval.saturating_mul(defaults::MAX_AGE_INTERVALS));
    if max_age > limits::MAX_AGE {
        return Err(invalid(
            format!("{field}.max_age"),
            format!(
                "{} is out of range: use at most {}; values older than that are of no use",
                humantime::format_duration(max_age),
                humantime::format_duration(limits::MAX_AGE)
            ),
        ));
    }
    if max_age < interval {
        return Err(invalid(
            format!("{field}.max_age"),
            format!(
                "{} is shorter than the interval ({}); values would vanish between runs",
                humantime::format_duration(max_age),
                humantime::format_duration(interval)
            ),
        ));
    }
    Ok(Schedule {
        interval,
        deadline,
        max_age,
    })
}
