"""Builds the compiled record codec; everything else is configured in pyproject.toml.

The extensions are required for speed, not for correctness: storage/records.py
falls back to its pure-Python codec (identical results) when it is missing, and
logan_ray/producer.py to its Python ``send`` when logan_ray/_send_path.c was not built.
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("logan_ray.storage._codec", ["storage/_codec.c"], depends=["storage/murmur2.h"],
              extra_compile_args=["-O3"]),
    Extension("logan_ray._send_path", ["logan_ray/_send_path.c"], include_dirs=["storage"],
              depends=["storage/murmur2.h"], extra_compile_args=["-O3"]),
])
