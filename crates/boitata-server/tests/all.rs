//! The server's integration tests, compiled as one binary: real HTTP on port-0
//! listeners, a real SQLite store in temp dirs, host-only blueprints.
mod suite;
