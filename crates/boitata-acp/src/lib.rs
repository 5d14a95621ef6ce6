//! boitata-acp
