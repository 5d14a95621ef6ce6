//! boitata-server
fn main() {}
