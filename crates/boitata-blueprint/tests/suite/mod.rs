mod support;

mod agent;
mod fuzz;
mod graph_and_load;
mod handlers;
mod host_exec;
mod routing;
mod validate;
