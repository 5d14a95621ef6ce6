//! Integration tests of boitata-orchestrator, compiled as one binary.
mod suite;
