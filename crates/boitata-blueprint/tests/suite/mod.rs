mod support;

mod agent;
mod handlers;
mod host_exec;
mod routing;
mod validate;
