//! The simulator through its public API: router tests through `tower::ServiceExt::oneshot`, and
//! loopback servers where only a socket shows the behaviour. One module per area.

// The test fleet, routers and loopback servers over it, request builders, answer readers.
mod helpers;

// Management API authentication, identifiers, and JSON errors for unknown paths and methods.
mod auth;
// Delivery account records and updates, API tokens, suppression entries.
mod accounts;
// The Send API: tokens, allow-lists, quota, suppression, size limits.
mod send;
// Sending statistics: outcomes per recipient, local days, retention.
mod statistics;
// Mail tracing: the dashboard and the daily statistics.
mod tracemail;
// Migration statistics.
mod migrations;
// Email account (mailbox) records.
mod mailboxes;
// Team members: records, the password and permission update, scope, faults and rate limits.
mod team_members;
// Injected faults on the wire, route by route.
mod faults;
// The faults a table-driven exporter test injects: bodies, 429 variants, statuses, only_ids.
mod fault_table;
// An unwell provider: requests never answered, outage windows, faults on every route.
mod outages;
// The `/_sim/` control plane.
mod control_plane;
// Rate limits of the Management API, per token and per route: buckets, 429s, headers, the
// control endpoints.
mod rate_limit;
// Configurations the simulator refuses.
mod config;
// The demo fleet and demo traffic over a real server.
mod demo;
// The `mailhost_sim` binary's flags, through the binary itself.
mod cli;
