//! The native module of the Python package `arrow_dlpack` (filled in by the Python wheel issue).
