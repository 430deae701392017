from pathlib import Path

import pytest

from autoscaler.errors import InputError
from autoscaler.topology import Operator, Topology, read_topology_csv
from tests.conftest import TOPOLOGY_CSV


def test_reads_the_wordcount_topology():
    topo = read_topology_csv(TOPOLOGY_CSV)
    assert topo.order == ("Source: Custom Source", "Splitter FlatMap", "Count -> Latency Sink")
    assert topo.sources == ("Source: Custom Source",)
    assert topo.operators["Splitter FlatMap"].parallelism == 2
    assert topo.upstream("Count -> Latency Sink") == ("Splitter FlatMap",)


def test_diamond_order_puts_every_operator_after_its_inputs():
    topo = Topology.from_edges([Operator(x, x, 1) for x in "dcba"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    position = {op: i for i, op in enumerate(topo.order)}
    for up, down in topo.edges:
        assert position[up] < position[down]
    assert topo.sources == ("a",)


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topo.csv"
    path.write_text(text)
    return path


def test_skips_blank_and_comment_lines_and_trims(tmp_path):
    topo = read_topology_csv(_csv(tmp_path, "# header\n\n  s , S , 1 , m , M , 3 \n"))
    assert topo.operators["m"] == Operator("m", "M", 3, False)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("s,S,1,m,M,2\nm,M,2,s,S,1\n", None, "cycle through operators ['m', 's']"),
        ("s,S,1,s,S,1\n", None, "edge to itself"),
        ("s,S,1,m,M,2\nm,Mx,2,k,K,1\n", 2, "named 'Mx' here but 'M' on line 1"),
        ("s,S,1,m,M,2\nm,M,3,k,K,1\n", 2, "has 3 instances here but 2 on line 1"),
        ("s,S,1,m,M\n", 1, "expected 6 comma-separated fields"),
        ("s,S,one,m,M,2\n", 1, "instance count 'one' is not an integer"),
        ("s,S,0,m,M,2\n", 1, "instance count 0 must be >= 1"),
        ("# nothing\n", None, "has no operators"),
    ],
)
def test_bad_topologies_name_file_line_and_problem(tmp_path, text, line, message):
    path = _csv(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_topology_csv(path)
    assert err.value.source == str(path)
    assert err.value.line == line
    assert message in str(err.value)


def test_dangling_edge_names_the_unknown_operator():
    with pytest.raises(InputError, match="names unknown operator 'x'"):
        Topology.from_edges([Operator("a", "A", 1)], [("a", "x")])


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read topology file"):
        read_topology_csv(tmp_path / "nope.csv")


def test_resolve_accepts_ids_and_names_and_rejects_unknown():
    topo = read_topology_csv(TOPOLOGY_CSV)
    assert topo.resolve("Splitter FlatMap", "x") == "Splitter FlatMap"
    with pytest.raises(InputError, match="unknown operator 'Nope'"):
        topo.resolve("Nope", "--min-parallelism")


def test_a_job_of_one_vertex_round_trips_as_a_lone_operator(tmp_path):
    """A SQL query whose source, filter and sink are chained into one task has no edge."""
    from autoscaler.topology import Operator, Topology, write_topology_csv

    lone = Topology.from_edges([Operator("v1", "Source: bid -> Calc -> q2_sink: Writer", 2)], [])
    back = read_topology_csv(write_topology_csv(lone, tmp_path / "t.csv"))
    assert back.operators == lone.operators and back.edges == () and back.sources == ("v1",)
    mixed = read_topology_csv(_csv(tmp_path, "s,S,1,m,M,2\nx,X,3\n"))
    assert set(mixed.operators) == {"s", "m", "x"} and mixed.edges == (("s", "m"),)
