//! boitata-blueprint
