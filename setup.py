"""Builds the compiled record codec; everything else is configured in pyproject.toml.

The extension is required for speed, not for correctness: storage/records.py
falls back to its pure-Python codec (identical results) when it is missing.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("logan_ray.storage._codec", ["storage/_codec.c"], extra_compile_args=["-O3"])])
