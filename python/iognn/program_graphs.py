"""Synthetic typed program graphs with a VarMisuse-shaped task (Allamanis et al., "Learning to
Represent Programs with Graphs", ICLR 2018), seeded and generated in pure Python.

Each graph is the syntax tree of a random program in a small typed language, with the edges of
Allamanis et al.'s program graphs on top. The program is a parameter list (one declaration per
parameter, every variable type present) followed by a block of statements, drawn until the graph
has the node count drawn for it in ``[min_nodes, max_nodes]``:

- ``x = Decl(Type_t, Ident[, expr_t])``, ``Assign(Ident, expr_t)``, ``If(expr_t, Block(...))``
  (its declarations go out of scope after the block), ``Call(Fn, expr, ...)``, ``Pass``;
- an expression of variable type ``t`` is a literal of type ``t``, a read of a variable of type
  ``t`` in scope (recently used variables preferred, as in real code), or ``Op_t(expr_t,
  expr_t)`` with one of the operators of type ``t``.

Nodes are numbered in pre-order (source order), so tree, token and most data-flow edges join
nearby ids: the band-ish adjacency of real ASTs.

Edge types: ``num_edge_types = P`` forward kinds, each with its reverse, so a graph holds ``2 P``
types: type ``r < P`` is a forward kind and ``r + P`` its reverse (every forward edge ``(s, d, r)``
comes with ``(d, s, r + P)``). The forward kinds are, in this order (``edge_type_names``):

- ``Child_0 .. Child_{C-2}``, ``Child_rest``: parent -> k-th child, split by child position
  (``C = max(1, P - 5)`` kinds; with ``C = 1`` one ``Child`` kind);
- ``NextToken`` (leaf -> next leaf in source order), ``LastUse`` (previous occurrence of the same
  variable -> this one), ``LastWrite`` (last write of the variable -> this read or write),
  ``ComputedFrom`` (each variable read on a right-hand side -> the written identifier),
  ``NextSibling`` (child k -> child k + 1): the first ``P - C`` of them.

The task (VarMisuse-shaped): one variable read, the *slot*, has its identifier replaced by the
``SLOT`` token and takes no part in the data flow (no LastUse / LastWrite / ComputedFrom edge in
or out, as in Allamanis et al.). The slot is always an operand of an ``Op_t`` node. ``K``
candidate variables are in scope there, each represented by the node of its last occurrence
before the slot (``candidate_index``): the variable read at the slot and ``K - 1`` recently used
variables of *other* types. ``y`` is the index of the right one among the candidates. Variable
names are random and say nothing of types, so the label is the candidate whose type (seen through
its declaration's ``Type_t`` token, its operator's ``Op_t``, or an assigned expression, along
typed Child / data-flow edges) matches the type the slot's operator requires (its parent,
one reversed ``Child`` edge away): a typed GNN can learn it, token features alone cannot.

Token ids (``x``, int64 ``[N]``) lie in ``[0, VOCAB_SIZE)``: syntax kinds, ``Type_t``, ``Op_t``
variants, ``Lit_t``, function names, then identifier names (see the constants below).
"""
from __future__ import annotations

import random
from typing import Dict, List, Optional, Tuple

import torch

# ---- vocabulary --------------------------------------------------------------------------------
SYNTAX = ("Module", "Block", "Decl", "Assign", "If", "Call", "Pass", "SLOT")
NUM_VAR_TYPES = 4
OPS_PER_TYPE = 3
NUM_FUNCTIONS = 16
NUM_NAMES = 96
_TYPE0 = len(SYNTAX)
_OP0 = _TYPE0 + NUM_VAR_TYPES
_LIT0 = _OP0 + NUM_VAR_TYPES * OPS_PER_TYPE
_FN0 = _LIT0 + NUM_VAR_TYPES
_NAME0 = _FN0 + NUM_FUNCTIONS
VOCAB_SIZE = _NAME0 + NUM_NAMES
_TOKEN = {name: i for i, name in enumerate(SYNTAX)}

_DATAFLOW_KINDS = ("NextToken", "LastUse", "LastWrite", "ComputedFrom", "NextSibling")
_MAX_EXPR_DEPTH = 3
_MAX_BLOCK_DEPTH = 3
_MAX_ATTEMPTS = 100


def edge_type_names(num_edge_types: int) -> List[str]:
    """The ``2 * num_edge_types`` type names, forward kinds first, then ``rev_`` + each."""
    children, flow = _kind_split(num_edge_types)
    if children == 1:
        forward = ["Child"]
    else:
        forward = [f"Child_{k}" for k in range(children - 1)] + ["Child_rest"]
    forward += list(_DATAFLOW_KINDS[:flow])
    return forward + ["rev_" + name for name in forward]


def _kind_split(num_edge_types: int) -> Tuple[int, int]:
    """(child-position kinds, data-flow kinds) of ``P`` forward kinds."""
    if not isinstance(num_edge_types, int) or num_edge_types < 1:
        raise ValueError(f"num_edge_types must be a positive int, got {num_edge_types!r}")
    children = max(1, num_edge_types - len(_DATAFLOW_KINDS))
    return children, num_edge_types - children


class _Variable:
    __slots__ = ("name", "type", "last", "last_write")

    def __init__(self, name: int, var_type: int):
        self.name, self.type = name, var_type
        self.last: Optional[int] = None        # node of the last occurrence
        self.last_write: Optional[int] = None  # node of the last write


class _Builder:
    """One program: nodes in pre-order, forward edges by kind, scopes and the slot."""

    def __init__(self, rng: random.Random, num_nodes: int, num_edge_types: int,
                 num_candidates: int):
        self.rng = rng
        self.target = num_nodes
        self.children_kinds, flow = _kind_split(num_edge_types)
        self.flow_kind = {name: self.children_kinds + i
                          for i, name in enumerate(_DATAFLOW_KINDS[:flow])}
        self.num_candidates = num_candidates
        self.tokens: List[int] = []
        self.src: List[int] = []
        self.dst: List[int] = []
        self.kind: List[int] = []
        self.child_count: List[int] = []
        self.last_child: List[Optional[int]] = []
        self.last_leaf: Optional[int] = None
        self.scopes: List[List[_Variable]] = [[]]
        self.recent: List[_Variable] = []  # in-scope variables, most recently used last
        self.slot_after = int(num_nodes * rng.uniform(0.3, 0.85))
        self.slot: Optional[int] = None
        self.candidates: List[int] = []
        self.label = -1

    # ---- nodes and edges
    @property
    def size(self) -> int:
        return len(self.tokens)

    def budget(self) -> int:
        return self.target - self.size

    def edge(self, kind: str, src: int, dst: int) -> None:
        code = self.flow_kind.get(kind)
        if code is not None:
            self.src.append(src)
            self.dst.append(dst)
            self.kind.append(code)

    def node(self, token: int, parent: Optional[int], leaf: bool = False) -> int:
        index = self.size
        self.tokens.append(token)
        self.child_count.append(0)
        self.last_child.append(None)
        if parent is not None:
            position = self.child_count[parent]
            self.src.append(parent)
            self.dst.append(index)
            self.kind.append(min(position, self.children_kinds - 1))
            if self.last_child[parent] is not None:
                self.edge("NextSibling", self.last_child[parent], index)
            self.child_count[parent] = position + 1
            self.last_child[parent] = index
        if leaf:
            if self.last_leaf is not None:
                self.edge("NextToken", self.last_leaf, index)
            self.last_leaf = index
        return index

    # ---- variables
    def declare(self, var: _Variable) -> None:
        self.scopes[-1].append(var)
        self.recent.append(var)

    def occurrence(self, var: _Variable, node: int, write: bool) -> None:
        """Data-flow edges into an identifier node, and the variable's state after it."""
        if var.last is not None:
            self.edge("LastUse", var.last, node)
        if var.last_write is not None:
            self.edge("LastWrite", var.last_write, node)
        var.last = node
        if write:
            var.last_write = node
        self.recent.remove(var)
        self.recent.append(var)

    def pick(self, var_type: Optional[int]) -> Optional[_Variable]:
        """A variable in scope (of ``var_type`` when given), the recently used ones preferred."""
        pool = [v for v in self.recent if var_type is None or v.type == var_type]
        if not pool:
            return None
        back = min(len(pool) - 1, int(self.rng.expovariate(0.5)))
        return pool[len(pool) - 1 - back]

    # ---- the program
    def program(self) -> None:
        root = self.node(_TOKEN["Module"], None)
        types = list(range(NUM_VAR_TYPES))
        self.rng.shuffle(types)
        for var_type in types + [self.rng.randrange(NUM_VAR_TYPES)
                                 for _ in range(self.num_candidates)]:
            self.declaration(root, var_type, with_value=False)
        body = self.node(_TOKEN["Block"], root)
        while self.budget() > 0:
            self.statement(body, depth=0)

    def statement(self, parent: int, depth: int) -> None:
        budget = self.budget()
        if budget < 4:
            self.node(_TOKEN["Pass"], parent, leaf=True)
            return
        roll = self.rng.random()
        var_type = self.rng.randrange(NUM_VAR_TYPES)
        if roll < 0.25:
            self.declaration(parent, var_type, with_value=budget >= 8)
        elif roll < 0.6:
            target = self.pick(var_type)
            if target is None:
                self.declaration(parent, var_type, with_value=budget >= 8)
            else:
                node = self.node(_TOKEN["Assign"], parent)
                ident = self.node(_NAME0 + target.name, node, leaf=True)
                reads = self.expression(node, var_type, self.expr_depth())
                self.assigned(target, ident, reads)
        elif roll < 0.75 and depth < _MAX_BLOCK_DEPTH and budget >= 16:
            node = self.node(_TOKEN["If"], parent)
            self.expression(node, var_type, self.expr_depth())
            block = self.node(_TOKEN["Block"], node)
            self.scopes.append([])
            for _ in range(self.rng.randint(1, 4)):
                if self.budget() <= 0:
                    break
                self.statement(block, depth + 1)
            for var in self.scopes.pop():
                self.recent.remove(var)
        elif roll < 0.95:
            node = self.node(_TOKEN["Call"], parent)
            self.node(_FN0 + self.rng.randrange(NUM_FUNCTIONS), node, leaf=True)
            for _ in range(self.rng.randint(1, 2)):
                if self.budget() <= 0:
                    break
                self.expression(node, self.rng.randrange(NUM_VAR_TYPES), self.expr_depth())
        else:
            self.node(_TOKEN["Pass"], parent, leaf=True)

    def expr_depth(self) -> int:
        """Expressions shrink as the node budget runs out: a statement never overshoots it."""
        budget = self.budget()
        depth = 0
        while depth < _MAX_EXPR_DEPTH and (2 << (depth + 1)) + 4 <= budget:
            depth += 1
        return self.rng.randint(0, depth)

    def declaration(self, parent: int, var_type: int, with_value: bool) -> None:
        var = _Variable(self.rng.randrange(NUM_NAMES), var_type)
        node = self.node(_TOKEN["Decl"], parent)
        self.node(_TYPE0 + var_type, node, leaf=True)
        ident = self.node(_NAME0 + var.name, node, leaf=True)
        reads = self.expression(node, var_type, self.expr_depth()) if with_value else []
        self.declare(var)
        self.assigned(var, ident, reads)

    def assigned(self, var: _Variable, ident: int, reads: List[int]) -> None:
        """The write of ``var`` at ``ident``, after its right-hand side's reads."""
        for read in reads:
            self.edge("ComputedFrom", read, ident)
        self.occurrence(var, ident, write=True)

    def expression(self, parent: int, var_type: int, depth: int,
                   operand: bool = False) -> List[int]:
        """An expression of ``var_type`` under ``parent``; returns its variable-read nodes."""
        if depth > 0:
            op = self.node(_OP0 + var_type * OPS_PER_TYPE + self.rng.randrange(OPS_PER_TYPE),
                           parent)
            return (self.expression(op, var_type, depth - 1, operand=True)
                    + self.expression(op, var_type, depth - 1, operand=True))
        var = self.pick(var_type) if self.rng.random() < 0.7 else None
        if var is None:
            self.node(_LIT0 + var_type, parent, leaf=True)
            return []
        if operand and self.slot is None and self.size >= self.slot_after and self.make_slot(
                parent, var):
            return []
        ident = self.node(_NAME0 + var.name, parent, leaf=True)
        self.occurrence(var, ident, write=False)
        return [ident]

    def make_slot(self, parent: int, var: _Variable) -> bool:
        """The read of ``var`` under ``parent`` becomes the slot when enough variables of other
        types are in scope to be the distractors."""
        others = [v for v in reversed(self.recent) if v.type != var.type]
        if len(others) < self.num_candidates - 1:
            return False
        window = others[:max(2 * (self.num_candidates - 1), 6)]
        chosen = self.rng.sample(window, self.num_candidates - 1) + [var]
        self.rng.shuffle(chosen)
        self.slot = self.node(_TOKEN["SLOT"], parent, leaf=True)
        self.candidates = [v.last for v in chosen]
        self.label = chosen.index(var)
        return True


def program_graph(num_nodes: int, num_edge_types: int = 10, num_candidates: int = 4,
                  seed=0):
    """One program graph of exactly ``num_nodes`` nodes (see the module docstring), or None when
    no slot could be placed (tiny programs)."""
    from torch_geometric.data import Data
    builder = _Builder(random.Random(seed), num_nodes, num_edge_types, num_candidates)
    builder.program()
    if builder.slot is None or builder.size != num_nodes:
        return None
    num_types = num_edge_types
    src = torch.tensor(builder.src, dtype=torch.long)
    dst = torch.tensor(builder.dst, dtype=torch.long)
    kind = torch.tensor(builder.kind, dtype=torch.long)
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    return Data(x=torch.tensor(builder.tokens, dtype=torch.long), edge_index=edge_index,
                edge_type=torch.cat([kind, kind + num_types]),
                y=torch.tensor([builder.label], dtype=torch.long),
                slot_index=torch.tensor([builder.slot], dtype=torch.long),
                candidate_index=torch.tensor(builder.candidates, dtype=torch.long),
                num_nodes=num_nodes)


def program_graphs(num_graphs: int, num_edge_types: int = 10, min_nodes: int = 200,
                   max_nodes: int = 2000, seed: int = 0, num_candidates: int = 4) -> list:
    """``num_graphs`` program graphs (PyG ``Data``), the same for the same arguments.

    Args:
        num_graphs: how many graphs.
        num_edge_types: ``P``, the forward edge kinds; every graph's ``edge_type`` lies in
            ``[0, 2 P)``, ``r + P`` being the reverse of ``r`` (names: :func:`edge_type_names`).
        min_nodes, max_nodes: each graph's node count is drawn uniformly in this range
            (``min_nodes >= min_program_nodes(num_candidates)``, 64 for ``K = 4``).
        seed: graph ``g`` is drawn from its own stream, seeded by ``(seed, g)``: a longer list
            starts with the shorter one.
        num_candidates: ``K``, the candidate variables of the slot (at least 2).

    Returns:
        A list of ``Data`` with ``x`` (int64 ``[N]`` token ids in ``[0, VOCAB_SIZE)``),
        ``edge_index`` ``[2, E]`` (forward edges, then their reverses), ``edge_type`` ``[E]``,
        ``slot_index`` ``[1]``, ``candidate_index`` ``[K]`` (node ids: PyG's batching offsets
        them), ``y`` ``[1]`` (the right candidate's position in ``candidate_index``).
    """
    if num_candidates < 2:
        raise ValueError(f"num_candidates must be at least 2, got {num_candidates}")
    least = min_program_nodes(num_candidates)
    if min_nodes < least or max_nodes < min_nodes:
        raise ValueError(f"need {least} <= min_nodes <= max_nodes (with num_candidates="
                         f"{num_candidates}), got min_nodes={min_nodes}, max_nodes={max_nodes}")
    _kind_split(num_edge_types)
    graphs = []
    for g in range(num_graphs):
        num_nodes = random.Random(f"{seed}/{g}/size").randint(min_nodes, max_nodes)
        # A program without a slot (rare) is drawn again from the next stream.
        for attempt in range(_MAX_ATTEMPTS):
            data = program_graph(num_nodes, num_edge_types, num_candidates,
                                 seed=f"{seed}/{g}/{attempt}")
            if data is not None:
                break
        else:
            raise RuntimeError(f"no slot could be placed in {_MAX_ATTEMPTS} programs of "
                               f"{num_nodes} nodes with num_candidates={num_candidates}")
        graphs.append(data)
    return graphs


def min_program_nodes(num_candidates: int) -> int:
    """The smallest ``min_nodes`` allowed: the parameter list (three nodes per declaration) and
    room for the statements that hold the slot."""
    return 3 * (NUM_VAR_TYPES + num_candidates) + 40


def statistics(graphs) -> Dict[str, float]:
    """Mean node and edge counts and the mean |src - dst| of the edges (the locality)."""
    nodes = sum(g.num_nodes for g in graphs) / max(len(graphs), 1)
    edges = sum(g.edge_index.size(1) for g in graphs) / max(len(graphs), 1)
    spans = [float((g.edge_index[0] - g.edge_index[1]).abs().float().mean()) for g in graphs
             if g.edge_index.numel()]
    return {"nodes": nodes, "edges": edges, "mean_span": sum(spans) / max(len(spans), 1)}
