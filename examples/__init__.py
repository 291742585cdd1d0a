"""The project's examples: a pipeline and events for the replay command (docs/replay.md), and
user code the demo's pipelines name (``examples.process``)."""
