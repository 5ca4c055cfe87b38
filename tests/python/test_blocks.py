"""iognn.blocks: the per-layer blocks of a hop-ordered sampled batch."""
import pytest
import torch

from iognn import Graph, SelfLoops
from iognn.blocks import BlockSize, block_graphs, block_sizes

# seeds 2, hop 1: 3 new nodes via 4 edges, hop 2: 2 new nodes via 5 edges
NODES, EDGES = [2, 3, 2], [4, 5]
EDGE_INDEX = torch.tensor([[2, 3, 4, 1, 5, 6, 0, 2, 4],
                           [0, 0, 1, 1, 2, 3, 3, 4, 4]])


def test_sizes_first_layer_first():
    assert block_sizes(NODES, EDGES) == [BlockSize(7, 5, 9), BlockSize(5, 2, 4)]
    assert block_sizes(torch.tensor(NODES), torch.tensor(EDGES)) == block_sizes(NODES, EDGES)
    # fewer layers than hops: the layers use the first hops only
    assert block_sizes(NODES, EDGES, num_layers=1) == [BlockSize(5, 2, 4)]
    assert block_sizes(NODES, EDGES, num_layers=0) == []
    assert block_sizes([5], []) == []  # seeds only


@pytest.mark.parametrize("nodes, edges, layers, message", [
    ([2, 3], [4, 5], None, "one entry more than num_sampled_edges"),
    ([2, -3, 2], [4, 5], None, "num_sampled_nodes must hold non-negative integers"),
    ([2, 3, 2], [4, 5.5], None, "num_sampled_edges must hold non-negative integers"),
    ([2, 3, 2], [4, 5], 3, r"num_layers must be in \[0, 2\]"),
])
def test_bad_counts_name_the_argument(nodes, edges, layers, message):
    with pytest.raises(ValueError, match=message):
        block_sizes(nodes, edges, layers)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("loops", [SelfLoops.KEEP, SelfLoops.REPLACE, SelfLoops.ADD_REMAINING])
def test_graphs_are_the_prefixes(dtype, loops):
    edge_index = EDGE_INDEX.to(dtype)
    graphs = block_graphs(edge_index, NODES, EDGES, self_loops=loops)
    for graph, size in zip(graphs, block_sizes(NODES, EDGES)):
        assert isinstance(graph, Graph) and graph.self_loops == loops
        assert graph.size == (size.num_src, size.num_dst)
        assert graph.num_input_edges == size.num_edges
        prefix = edge_index[:, :size.num_edges].long()
        reference = Graph(prefix.contiguous(), (size.num_src, size.num_dst), loops)
        for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map"):
            assert torch.equal(getattr(graph, name), getattr(reference, name)), name


def test_bad_edge_index():
    with pytest.raises(ValueError, match="sum to 9 edges but edge_index has 8"):
        block_graphs(EDGE_INDEX[:, :8], NODES, EDGES)
    with pytest.raises(ValueError, match=r"must be a \[2, E\] tensor"):
        block_graphs(EDGE_INDEX[0], NODES, EDGES)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_deferred_blocks_equal_built_blocks(device):
    g = torch.Generator().manual_seed(3)
    nodes, edges = [4, 9, 17], [9, 30]
    hops = [torch.stack([torch.randint(sum(nodes[:h + 2]), (edges[h],), generator=g),
                         torch.randint(sum(nodes[:h + 1]), (edges[h],), generator=g)])
            for h in range(2)]  # hop h: edges into the nodes found by hop h - 1
    edge_index = torch.cat(hops, 1).to(device)
    error = torch.full((1,), -1, device=device)
    built = block_graphs(edge_index, nodes, edges)
    deferred = block_graphs(edge_index, nodes, edges, deferred_error=error, max_in_degree=40)
    for a, b in zip(built, deferred):
        assert a.size == b.size and b.max_degree_hints == (40, -1)
        for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert int(error) == -1
