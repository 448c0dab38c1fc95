"""The path of an op, as Python configures and reads it: which ops are native
(native_ops/), what ran where (tracking.py), the 64-bit rule (dtype_policy.py) and
the eager compile cache (compile_cache.py). The C++ side is csrc/aten/execution/."""
