"""What the platform is told: its settings, the streams and pipelines described in two folders,
and the one error every check of them raises.

Nothing here runs Spark or reads data: :mod:`jobs.config.settings` reads the ``PLATFORM_*``
variables into one typed model, :mod:`jobs.config.streams` and :mod:`jobs.config.registry`
read the descriptions, and every wrong value is one :class:`jobs.config.errors.SettingsError`
naming it, before anything is written.
"""
