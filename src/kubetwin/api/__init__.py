"""Object models, manifest loading and validation."""
