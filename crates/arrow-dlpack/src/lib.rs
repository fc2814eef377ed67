//! Arrow arrays to and from DLPack tensors (filled in by the arrow-dlpack issue).
