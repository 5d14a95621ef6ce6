//! boitata-agent
fn main() {}
