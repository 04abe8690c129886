"""Dynamic Resource Allocation: API conversion, the structured allocator, the NVIDIA DRA driver twin and the
ResourceClaim controller."""
