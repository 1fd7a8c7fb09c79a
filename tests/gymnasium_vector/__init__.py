"""gymnasium 1.4.0's vector-env test suite, run against envhive pools (see README.md)."""
