//! Tests of `arrow-dlpack-c` through its public API, on structs built by hand as a C producer
//! builds them, whose release callbacks count their calls.

mod device;
mod hand_built;
mod import;
mod streams;
