//! boitata-test-support
pub mod docker;
