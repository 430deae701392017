"""The logical dataflow: operators, edges and a topological order (a DAG is required)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autoscaler.errors import InputError
from autoscaler.store.files import as_store_path, write_text_atomic


@dataclass(frozen=True)
class Operator:
    """One logical operator. ``parallelism`` is its current number of instances."""

    id: str
    name: str
    parallelism: int
    is_source: bool = False


@dataclass(frozen=True)
class Topology:
    """Operators keyed by id and directed edges ``(upstream id, downstream id)``.

    Build it with :meth:`from_edges` (or :func:`read_topology_csv`), which checks that the
    graph is a DAG and that every edge names a known operator.
    """

    operators: Mapping[str, Operator]
    edges: tuple[tuple[str, str], ...]
    order: tuple[str, ...] = field(default=())

    @classmethod
    def from_edges(
        cls,
        operators: Iterable[Operator],
        edges: Iterable[tuple[str, str]],
        source: str = "topology",
    ) -> Topology:
        ops: dict[str, Operator] = {}
        for op in operators:
            if op.id in ops:
                raise InputError(source, f"operator {op.id!r} is defined twice")
            if op.parallelism < 1:
                raise InputError(source, f"operator {op.id!r} has parallelism {op.parallelism}; it must be >= 1")
            ops[op.id] = op
        edge_list = tuple(dict.fromkeys((str(a), str(b)) for a, b in edges))
        for up, down in edge_list:
            for end in (up, down):
                if end not in ops:
                    raise InputError(source, f"edge {up!r} -> {down!r} names unknown operator {end!r}")
            if up == down:
                raise InputError(source, f"operator {up!r} has an edge to itself (a cycle); DS2 needs a DAG")
        has_input = {down for _, down in edge_list}
        ops = {op_id: Operator(op.id, op.name, op.parallelism, is_source=op_id not in has_input) for op_id, op in ops.items()}
        order = _topological_order(list(ops), edge_list, source)
        return cls(operators=ops, edges=edge_list, order=order)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(op_id for op_id in self.order if self.operators[op_id].is_source)

    def upstream(self, op_id: str) -> tuple[str, ...]:
        return tuple(up for up, down in self.edges if down == op_id)

    def resolve(self, key: str, source: str) -> str:
        """Operator id for an id or a unique name; unknown keys are an :class:`InputError`."""
        if key in self.operators:
            return key
        matches = [op.id for op in self.operators.values() if op.name == key]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(repr(o) for o in self.order)
        raise InputError(source, f"unknown operator {key!r} (known: {known})")


def _topological_order(nodes: list[str], edges: tuple[tuple[str, str], ...], source: str) -> tuple[str, ...]:
    """Kahn's algorithm; stable (keeps first-seen order among ready operators)."""
    indegree = {n: 0 for n in nodes}
    downstream: dict[str, list[str]] = {n: [] for n in nodes}
    for up, down in edges:
        indegree[down] += 1
        downstream[up].append(down)
    ready = [n for n in nodes if indegree[n] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for nxt in downstream[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    if len(order) != len(nodes):
        cyclic = sorted(n for n in nodes if indegree[n] > 0)
        raise InputError(source, f"the dataflow has a cycle through operators {cyclic}; DS2 needs a DAG")
    return tuple(order)


def read_topology_csv(path: str | Path) -> Topology:
    """Read the DS2 topology CSV: one edge per line, ``id1,name1,instances1,id2,name2,instances2``.

    Fields are trimmed; blank lines and ``#`` lines are skipped. An operator's name and
    instance count must agree on every line that mentions it. A job of one vertex has no edge (a
    Flink SQL query whose source, filter and sink are chained into one task): DS2's format cannot say
    it, so a line of three fields, ``id,name,instances``, names an operator on its own.
    """
    path = as_store_path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(str(path), f"cannot read topology file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start})") from None
    seen: dict[str, tuple[str, int, int]] = {}  # id -> (name, instances, first line)
    edges: list[tuple[str, str]] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) not in (3, 6):
            raise InputError(
                str(path),
                f"expected 6 comma-separated fields (id1,name1,instances1,id2,name2,instances2), or 3 for an operator "
                f"with no edge, got {len(fields)}",
                line_no,
            )
        for op_id, name, count in (fields[0:3], fields[3:6])[: len(fields) // 3]:
            if not op_id:
                raise InputError(str(path), "empty operator id", line_no)
            try:
                instances = int(count)
            except ValueError:
                raise InputError(str(path), f"operator {op_id!r}: instance count {count!r} is not an integer", line_no) from None
            if instances < 1:
                raise InputError(str(path), f"operator {op_id!r}: instance count {instances} must be >= 1", line_no)
            if op_id in seen:
                prev_name, prev_instances, prev_line = seen[op_id]
                if prev_name != name:
                    raise InputError(
                        str(path), f"operator {op_id!r} is named {name!r} here but {prev_name!r} on line {prev_line}", line_no
                    )
                if prev_instances != instances:
                    raise InputError(
                        str(path),
                        f"operator {op_id!r} has {instances} instances here but {prev_instances} on line {prev_line}",
                        line_no,
                    )
            else:
                seen[op_id] = (name, instances, line_no)
        if len(fields) == 6:
            edges.append((fields[0], fields[3]))
    if not seen:
        raise InputError(str(path), "the topology has no operators")
    operators = [Operator(op_id, name, instances) for op_id, (name, instances, _) in seen.items()]
    return Topology.from_edges(operators, edges, source=str(path))


def write_topology_csv(topology: Topology, path: str | Path, source: str = "topology") -> Path:
    """Write the DS2 topology CSV (the inverse of :func:`read_topology_csv`) atomically; returns the path.

    A name with a comma or newline cannot be held by the format: :class:`InputError` naming ``source``.
    """
    path, ops = as_store_path(path), topology.operators
    for op in ops.values():
        if "," in op.name or "\n" in op.name:
            raise InputError(
                f"{source}: operator {op.id}",
                f"name {op.name!r} contains a comma or newline; the DS2 topology CSV cannot hold it",
            )
    header = "operator_id{0},operator_name{0},total_number_of_operator_instances{0}"
    lines = [f"# {header.format(1)},{header.format(2)}"]
    lines += [f"{a},{ops[a].name},{ops[a].parallelism},{b},{ops[b].name},{ops[b].parallelism}" for a, b in topology.edges]
    linked = {op for edge in topology.edges for op in edge}
    lines += [f"{op.id},{op.name},{op.parallelism}" for op in ops.values() if op.id not in linked]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path
