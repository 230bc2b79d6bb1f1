"""Benchmarks: each compares offlow with its peer and ceiling measured in the same run."""
