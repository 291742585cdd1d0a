"""A pipeline's life after its first run: its versions and which one readers see, rolling a
changed description out, ``effective_from``, and where each pipeline stands."""
