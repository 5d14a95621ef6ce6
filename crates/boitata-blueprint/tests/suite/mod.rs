mod support;

mod validate;
