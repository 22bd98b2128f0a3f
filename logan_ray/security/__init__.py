"""Listener security of the Kafka gateway: listeners, TLS, SASL and ACL authorization.

Pure pieces (parsing, SASL state machines, SCRAM math, ACL matching) live here apart
from the gateway's I/O; the gateway calls them through small hooks (see
``logan_ray/gateway/server.py`` and ``connection.py``) and the router keeps what
must survive a restart (SCRAM credentials, ACLs) in its durable cluster metadata.
"""
