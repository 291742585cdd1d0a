"""Local stand-ins for the external services the platform talks to.

``enrichment_service`` is a real HTTP server (aiohttp) with a deterministic user catalogue and
injectable latency and faults, so async enrichment is tested and benchmarked over real sockets;
``enrichment_client`` is the call function the operator uses against it.
"""
