"""Kafka wire-protocol gateway: existing Kafka clients talk to logan-ray unchanged.

One gateway per Ray node (:mod:`.actor`) listens for Kafka clients, decodes
requests with the sans-IO codec (:mod:`logan_ray.protocol`), calls the partition
actors and the router, and writes responses — Fetch record bytes straight from
the segment files with ``os.sendfile``.

A front end of the public face, like the Python client and the HTTP API: it is
hosted by a Ray actor but owns no state of the cluster, so it lives here and not
in ``logan_ray.actors``, which never imports it (docs/architecture.md).
"""
from __future__ import annotations

from .actor import NODE_IP, GatewayActor, free_port, gateway_name, start_gateways, stop_gateways, sync_gateways
from .cluster import broker_id
from .server import MAX_FRAME_BYTES, Gateway

__all__ = ["Gateway", "GatewayActor", "MAX_FRAME_BYTES", "NODE_IP", "broker_id", "free_port", "gateway_name",
           "start_gateways", "stop_gateways", "sync_gateways"]
