//! boitata-test-support
