"""Ray actors of logan-ray (partitions, router, cleaner, gateway). Shipped as ``logan_ray.actors``."""
