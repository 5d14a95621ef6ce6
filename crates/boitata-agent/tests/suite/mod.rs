mod hardening;
mod interop;
mod startup;
mod stdio;
mod support;
mod tcp;
