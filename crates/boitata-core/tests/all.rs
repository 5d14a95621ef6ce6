//! boitata-core's integration tests, compiled as one binary (see `suite/`).

mod suite;
