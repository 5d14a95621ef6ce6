//! boitata-server
