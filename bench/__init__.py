"""Benchmarks: they measure and write reports; they are not tests and assert nothing."""
