"""Process functions as a user writes them (docs/process-functions.md): each a subclass of
:class:`operators.process_function.KeyedProcessFunction`, named by a pipeline of the demo's
stream (``pipelines/daily_totals.yaml``, ``pipelines/spend_spike.yaml``)."""
