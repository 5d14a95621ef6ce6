//! The integration tests of boitata-blueprint, as one binary.
mod suite;
