"""The kubetwin command line."""
