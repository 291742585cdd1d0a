"""The error every check of a setting, argument or description raises: one line naming it.

Its own module, below everything: the settings, the registry of pipelines and streams, and the
checks all raise it, and none of them need to import another for it."""


class SettingsError(ValueError):
    """A setting, argument or description is wrong; the message names it (the command line
    prints it as one line and exits with status 2)."""
