"""``dg scaffold defs ... EventTimePipeline``'s options: an option that does not belong to the
window kind, or one the kind needs, is refused by name; nothing is dropped or filled in (the
scaffold's run through ``dg``: tests/dagster/test_dg.py)."""

from __future__ import annotations

import pytest
import yaml

from platform_defs.components.scaffold import PipelineOptions, check_options, pipeline_text


@pytest.mark.parametrize(("options", "named"), [
    ({"window": "tumbling"}, "--size: a tumbling window needs it"),
    ({"window": "tumbling", "size": "1h", "gap": "5m"}, "--gap: a tumbling window has no gap"),
    ({"window": "tumbling", "size": "1h", "slide": "5m"}, "--slide: a tumbling window has no"),
    ({"window": "sliding", "size": "1h"}, "--slide: a sliding window needs it"),
    ({"window": "session"}, "--gap: a session window needs it"),
    ({"window": "session", "gap": "5m", "size": "1h"}, "--size: a session window has no size"),
])
def test_an_option_that_does_not_fit_the_window_is_refused_by_name(options, named):
    with pytest.raises(ValueError, match=named):
        check_options(PipelineOptions(**options))


@pytest.mark.parametrize("options", [
    {"window": "tumbling", "size": "1h"},
    {"window": "sliding", "size": "1h", "slide": "10m"},
    {"window": "session", "gap": "4m", "allowed_lateness": "30s"},
])
def test_the_options_given_are_the_window_written(options):
    given = PipelineOptions(**options)
    check_options(given)
    window = yaml.safe_load(pipeline_text(given, "events"))["window"]
    assert window == {k: v for k, v in {"type": given.window, "size": given.size,
                                        "slide": given.slide, "gap": given.gap}.items() if v}
