//! boitata CLI
fn main() {}
