//! The CLI's integration tests, compiled as one binary.
mod suite;
