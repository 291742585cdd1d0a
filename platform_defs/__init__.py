"""Dagster definitions: the platform's tables as assets, its jobs as their materialisations."""
