//! Router tests of the simulator, through `tower::ServiceExt::oneshot` and a real loopback server.
