"""The propagate backend plans' host-side parts: the on-disk plan cache (keys, JSON file, the
IOGNN_PLAN_CACHE variable) and the plan ops' argument checks. The CUDA side (timing, seeding a
plan from the cache, overrides) is in test_propagate_cuda.py."""
import json

import pytest
import torch

import iognn
from iognn.ops import plan_store, propagate_plan
from iognn.ops.propagate import propagate
from iognn.ops.propagate_plan import plan_info, set_backend

ENV = plan_store.ENV


def graph_with_hub(hub_degree, seed=0):
    """200 nodes, 2,000 edges, node 0 receiving `hub_degree` of them: same sizes, other degrees."""
    gen = torch.Generator().manual_seed(seed)
    hub = torch.stack([torch.randint(0, 200, (hub_degree,), generator=gen),
                       torch.zeros(hub_degree, dtype=torch.long)])
    rest = torch.randint(1, 200, (2, 2000 - hub_degree), generator=gen)
    return iognn.Graph(torch.cat([hub, rest], 1), 200)


def key(graph, F=64, dtype=torch.float32, direction="forward", device="NVIDIA H200"):
    return plan_store.plan_key(graph, F, dtype, direction, device)


# ---- keys -----------------------------------------------------------------------------------------
def test_key_names_the_call_and_the_graph():
    g = graph_with_hub(500)
    k = key(g)
    for part in ("propagate", "forward", "F=64", "float32", "int32", "NVIDIA H200",
                 f"cuda={torch.version.cuda}", "src=200", "dst=200", "nnz=2000"):
        assert part in k.split("|"), (part, k)
    others = [key(g, F=32), key(g, dtype=torch.bfloat16), key(g, direction="backward_x"),
              key(g, device="NVIDIA H100 80GB HBM3"),
              key(iognn.Graph(g.edge_index, 200, index_dtype=torch.int64))]
    assert len({k, *others}) == 1 + len(others)


def test_key_is_the_same_for_the_same_topology():
    """A rebuilt graph (another object, another process) has the same key: nothing in it depends
    on pointers or object identity."""
    a, b = graph_with_hub(500, seed=3), graph_with_hub(500, seed=3)
    assert a is not b and key(a) == key(b)


def test_key_tells_degree_distributions_apart():
    a, b = graph_with_hub(500), graph_with_hub(1500)
    assert (a.num_edges, a.num_nodes) == (b.num_edges, b.num_nodes)
    assert key(a) != key(b)
    assert plan_store.graph_digest(a) != plan_store.graph_digest(b)


# ---- the JSON file --------------------------------------------------------------------------------
def test_store_round_trip(tmp_path):
    store = plan_store.PlanStore(tmp_path)
    assert store.get("k1") is None
    store.put("k1", "cusparse", "timed: own 0.2000 ms, cusparse 0.1000 ms")
    store.put("k2", "own", "timed: own 0.1000 ms, cusparse 0.2000 ms")
    again = plan_store.PlanStore(tmp_path)  # a later process
    assert again.get("k1") == "cusparse" and again.get("k2") == "own" and again.get("k3") is None
    data = json.loads((tmp_path / plan_store.FILE_NAME).read_text())
    assert data == {"version": 1, "entries": {
        "k1": {"backend": "cusparse", "why": "timed: own 0.2000 ms, cusparse 0.1000 ms"},
        "k2": {"backend": "own", "why": "timed: own 0.1000 ms, cusparse 0.2000 ms"}}}
    assert [p.name for p in tmp_path.iterdir()] == [plan_store.FILE_NAME]  # no temporary left


def test_store_merges_what_other_processes_wrote(tmp_path):
    a, b = plan_store.PlanStore(tmp_path), plan_store.PlanStore(tmp_path)
    assert a.get("x") is None  # a has read the (missing) file
    b.put("from_b", "own", "")
    a.put("from_a", "cusparse", "")
    assert set(json.loads((tmp_path / plan_store.FILE_NAME).read_text())["entries"]) == \
        {"from_a", "from_b"}
    assert a.get("from_b") == "own"


def test_store_keeps_the_newest_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_store, "MAX_ENTRIES", 3)
    store = plan_store.PlanStore(tmp_path)
    for k in ("k1", "k2", "k3"):
        store.put(k, "own", "")
    store.put("k1", "cusparse", "")  # rewritten: now the newest
    store.put("k4", "own", "")
    entries = json.loads((tmp_path / plan_store.FILE_NAME).read_text())["entries"]
    assert list(entries) == ["k3", "k1", "k4"] and entries["k1"]["backend"] == "cusparse"


def test_edited_entry_overrides(tmp_path):
    plan_store.PlanStore(tmp_path).put("k", "own", "timed: own 0.1 ms, cusparse 0.2 ms")
    path = tmp_path / plan_store.FILE_NAME
    data = json.loads(path.read_text())
    data["entries"]["k"]["backend"] = "cusparse"
    path.write_text(json.dumps(data))
    assert plan_store.PlanStore(tmp_path).get("k") == "cusparse"


@pytest.mark.parametrize("text,match", [
    ("{not json", "not valid JSON"),
    ('{"version": 2, "entries": {}}', "not a version-1 plan cache"),
    ('{"version": 1, "entries": []}', "not a version-1 plan cache"),
    ('{"version": 1, "entries": {"k": {"backend": "fastest"}}}', "entry 'k' must have a backend"),
])
def test_malformed_file_is_a_value_error(tmp_path, text, match):
    (tmp_path / plan_store.FILE_NAME).write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        plan_store.PlanStore(tmp_path).get("k")
    assert ENV in str(info.value) and str(tmp_path) in str(info.value)


def test_put_rejects_an_unknown_backend(tmp_path):
    with pytest.raises(ValueError, match="backend must be one of"):
        plan_store.PlanStore(tmp_path).put("k", "fastest", "")


def test_store_for_shares_one_store_per_directory(tmp_path):
    assert plan_store.store_for(tmp_path) is plan_store.store_for(tmp_path / "." )
    assert plan_store.store_for(tmp_path) is not plan_store.store_for(tmp_path / "other")


# ---- IOGNN_PLAN_CACHE -------------------------------------------------------------------------------
def test_cache_dir_reads_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert plan_store.cache_dir() is None
    monkeypatch.setenv(ENV, "")
    assert plan_store.cache_dir() is None
    monkeypatch.setenv(ENV, str(tmp_path / "not_yet_made"))
    assert plan_store.cache_dir() == tmp_path / "not_yet_made"
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv(ENV, str(tmp_path / "a_file"))
    with pytest.raises(ValueError, match=ENV):
        plan_store.cache_dir()


def test_host_calls_leave_the_cache_alone(tmp_path, monkeypatch):
    """Host tensors have no plans: propagate on the CPU neither reads nor writes the cache."""
    monkeypatch.setenv(ENV, str(tmp_path))
    g = graph_with_hub(500)
    x = torch.randn(200, 8, requires_grad=True)
    propagate(g, x, reduce="mean").sum().backward()
    assert list(tmp_path.iterdir()) == []


# ---- plan ops on host tensors ---------------------------------------------------------------------
def test_plan_ops_on_the_host():
    g = graph_with_hub(500)
    assert plan_info(g, 8, torch.float32, "forward") == "cpu"
    for backend in ("own", "cusparse", "auto"):
        assert set_backend(g, 8, torch.float32, backend, "backward_x") is None
    with pytest.raises(ValueError, match="backend must be 'own', 'cusparse' or 'auto'"):
        set_backend(g, 8, torch.float32, "fastest")
    with pytest.raises(ValueError, match="direction must be 'forward' or 'backward_x'"):
        set_backend(g, 8, torch.float32, "own", "sideways")
    with pytest.raises(ValueError, match="F must be positive"):
        set_backend(g, 0, torch.float32, "own")
    with pytest.raises(TypeError, match="unsupported feature dtype"):
        set_backend(g, 8, torch.int64, "own")


# ---- the wrapper's seeding and recording, with the CUDA side simulated -------------------------------
class FakePlans:
    """Stands in for the CUDA plan ops: scripted plan_info answers, recorded set_backend calls."""

    def __init__(self, monkeypatch, info):
        self.info, self.sets, self.info_calls = dict(info), [], 0
        monkeypatch.setattr(propagate_plan, "_cache_applies", lambda x: True)
        monkeypatch.setattr(propagate_plan, "_call_id", lambda x: (x.size(1), x.dtype, 0))
        monkeypatch.setattr(propagate_plan, "_key", lambda g, x, d: f"key-{d}")
        monkeypatch.setattr(propagate_plan, "plan_info", self.plan_info)
        monkeypatch.setattr(propagate_plan, "set_backend", self.set_backend)

    def plan_info(self, graph, F, dtype, direction):
        self.info_calls += 1
        return self.info[direction]

    def set_backend(self, graph, F, dtype, backend, direction, source):
        self.sets.append((direction, backend, source))


def test_seeding_gives_undecided_plans_the_cached_choice(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    store = plan_store.store_for(tmp_path)
    store.put("key-forward", "cusparse", "timed: own 0.2 ms, cusparse 0.1 ms")
    fake = FakePlans(monkeypatch, {"forward": "none (no call with this F yet)",
                                   "backward_x": "own (timed: own 0.1 ms, cusparse 0.2 ms)"})
    g, x = graph_with_hub(500), torch.randn(200, 8, requires_grad=True)
    propagate_plan.seed_plans(g, x)
    assert fake.sets == [("forward", "cusparse", f"plan cache {store.path}")]
    fake.sets.clear()
    propagate_plan.seed_plans(g, x.detach())  # no gradient wanted: the forward plan only
    assert fake.info_calls == 3 and fake.sets[0][0] == "forward"


def test_recording_writes_timed_choices_once(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    fake = FakePlans(monkeypatch, {"forward": "cusparse (timed: own 0.2 ms, cusparse 0.1 ms)",
                                   "backward_x": "none (not decided yet)"})
    g, x = graph_with_hub(500), torch.randn(200, 8, requires_grad=True)
    propagate_plan.record_plans(g, x)
    path = tmp_path / plan_store.FILE_NAME
    assert json.loads(path.read_text())["entries"] == {
        "key-forward": {"backend": "cusparse", "why": "timed: own 0.2 ms, cusparse 0.1 ms"}}
    # The backward choice, timed during backward, is written by the next call; the settled
    # forward plan is not asked again.
    fake.info["backward_x"] = "own (timed: own 0.1 ms, cusparse 0.3 ms)"
    fake.info_calls = 0
    propagate_plan.record_plans(g, x)
    assert fake.info_calls == 1
    assert set(json.loads(path.read_text())["entries"]) == {"key-forward", "key-backward_x"}
    propagate_plan.record_plans(g, x)
    propagate_plan.seed_plans(g, x)
    assert fake.info_calls == 1  # both settled: no more plan work for this graph and call


def test_recording_skips_choices_it_did_not_time(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    fake = FakePlans(monkeypatch, {
        "forward": "own (forced by IOGNN_PROPAGATE_BACKEND=own)",
        "backward_x": "cusparse (set: plan cache /somewhere/propagate_plans.json)"})
    g, x = graph_with_hub(500), torch.randn(200, 8, requires_grad=True)
    propagate_plan.record_plans(g, x)
    assert not (tmp_path / plan_store.FILE_NAME).exists()
    fake.info_calls = 0
    propagate_plan.record_plans(g, x)
    assert fake.info_calls == 1  # forced: asked again (the variable may change); set: settled
