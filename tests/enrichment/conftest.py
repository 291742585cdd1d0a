"""The enrichment suite runs against a real service on a loopback port; nothing is mocked."""
