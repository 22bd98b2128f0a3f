"""logan-ray: a Kafka-compatible streaming log built on Ray.

Heavy imports (Ray) are deferred until first use so that ``logan_ray.storage``
and ``logan_ray.protocol`` stay importable, and fast, without a Ray runtime.
"""
from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "connect": ("logan_ray.client", "connect"),
    "Client": ("logan_ray.client", "Client"),
    "Producer": ("logan_ray.producer", "Producer"),
    "Consumer": ("logan_ray.consumer", "Consumer"),
    "RecordMetadata": ("logan_ray.producer", "RecordMetadata"),
    "ConsumerRecord": ("logan_ray.consumer", "ConsumerRecord"),
}


def __getattr__(name: str):
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'logan_ray' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


__all__ = ["__version__", *_LAZY]
