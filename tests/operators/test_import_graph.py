"""The modules of ``operators`` import each other without a circle (tests.import_graph reads
every import, lazy ones too), and the replay command sits above its library."""

from __future__ import annotations

from tests.import_graph import circles, import_graph, strongly_connected_components


def test_the_components_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert sorted(strongly_connected_components(graph)) == [["a", "b", "c"], ["d"]]


def test_operators_modules_import_each_other_without_a_circle() -> None:
    graph = import_graph(["operators"])
    assert len(graph) > 20 and "operators.window_operator" in graph
    found = circles(graph)
    assert not found, f"import circles among operators modules: {found}"


def test_the_replay_library_imports_neither_its_command_nor_the_transcripts() -> None:
    """The command sits on top: it imports the library and the transcripts, which import the
    library, which imports neither (the circle there before ran through ``main``)."""
    graph = import_graph(["operators"])
    assert {"operators.replay", "operators.transcript"} <= graph["operators.replay_cli"]
    assert "operators.replay" in graph["operators.transcript"]
    assert "operators.replay_cli" not in graph["operators.transcript"]
    assert not {"operators.replay_cli", "operators.transcript"} & graph["operators.replay"]
    assert not any("operators.replay_cli" in imported for imported in graph.values())
