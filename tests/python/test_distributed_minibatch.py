"""Data-parallel mini-batch training (:mod:`iognn.distributed.minibatch`) on 2 processes: gloo on
the CPU here, NCCL on 2 GPUs (``cuda``). A DDP step's gradient is the mean of the two ranks' batch
gradients, re-created in one process from the same seeds; after training every rank holds the
same parameters; every rank runs the same number of batches when the training nodes do not
divide; ranks that disagree stop with the same error."""
import argparse
import datetime
import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from iognn.minibatch import make_sampler, prepare_run, run_epoch, seed_loss
from iognn.train import MINIBATCH_MODELS, add_arguments, resolve_task

TINY = "synthetic-products:0.002"   # 4,898 nodes, 393 training nodes: odd, so 2 shards drop one
WORLD = 2
BACKENDS = [pytest.param("gloo", id="gloo"),
            pytest.param("nccl", id="nccl", marks=pytest.mark.cuda)]


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path_factory.getbasetemp() / "iognn-cache"))


def parse_args(backend, *extra):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--loader", "neighbor", "--no-progress", "--hidden", "16",
                              "--heads", "2", "--num-neighbors", "5,5", "--batch-size", "64",
                              "--eval-test-nodes", "400", "--dataset", TINY,
                              "--device", "cuda" if backend == "nccl" else "cpu", *extra])
    resolve_task(args)
    return args


def spawn(worker, backend, tmp_path, *args):
    """Runs ``worker(rank, *args)`` in WORLD processes joined in a process group."""
    if backend == "nccl" and torch.cuda.device_count() < WORLD:
        pytest.skip(f"needs {WORLD} GPUs")
    mp.spawn(_in_group, (worker, backend, str(tmp_path), args), nprocs=WORLD)


def _in_group(rank, worker, backend, folder, args):
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{folder}/store", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    try:
        worker(rank, backend, folder, *args)
    finally:
        dist.destroy_process_group()


# ---- shards -------------------------------------------------------------------------------------
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("num_seeds", [4, 7, 10, 13])
def test_shards_are_equal_disjoint_and_shared_out_of_one_permutation(num_seeds, world_size):
    from iognn.distributed.minibatch import shard_sampler
    for epoch in range(3):
        shards = []
        for rank in range(world_size):
            sampler = shard_sampler(num_seeds, rank, world_size, seed=5)
            sampler.set_epoch(epoch)
            shards.append(list(sampler))
        used = world_size * (num_seeds // world_size)
        order = torch.randperm(num_seeds, generator=torch.Generator().manual_seed(5 + epoch))
        for rank, shard in enumerate(shards):  # every world_size-th of the shared order
            assert shard == order[:used][rank::world_size].tolist()
        every = [i for s in shards for i in s]
        assert len(every) == used and len(set(every)) == used


def test_every_rank_runs_the_same_number_of_batches():
    from iognn.datasets import load_dataset
    from iognn.distributed.minibatch import rank_loaders
    args = parse_args("gloo", "--epochs", "1")
    run = prepare_run(args, load_dataset(args.dataset), torch.device("cpu"))
    sampler = make_sampler(run.data, args.num_neighbors)
    for world_size in (2, 3, 4, 5):  # 393 training nodes divide by none of them
        lengths = {len(rank_loaders(run.data, sampler, run.config, rank, world_size, 400)[1])
                   for rank in range(world_size)}
        assert lengths == {-(-(393 // world_size) // 64)}


def test_too_few_training_nodes_is_an_error():
    from iognn.distributed.minibatch import shard_sampler
    with pytest.raises(ValueError, match="3 training nodes cannot be shared out over 4"):
        shard_sampler(3, 0, 4, 0)


def test_rank_seeds_differ():
    from iognn.distributed.minibatch import rank_seed
    seeds = {rank_seed(seed, rank) for seed in range(4) for rank in range(4)}
    assert len(seeds) == 16 and all(0 <= s < 2**63 for s in seeds)


# ---- one step -----------------------------------------------------------------------------------
def first_batch(run, rank):
    """Rank ``rank``'s first batch of epoch 0, as :func:`rank_loaders` draws it."""
    from iognn.distributed.minibatch import rank_loaders
    sampler = make_sampler(run.data, run.args.num_neighbors)
    randomness, loader, _ = rank_loaders(run.data, sampler, run.config, rank, WORLD, 400)
    loader.sampler.set_epoch(0)
    return randomness, randomness.next(iter(loader)).to(run.device)


def step_setup(backend, model, rank=0):
    from iognn.datasets import load_dataset
    from iognn.distributed.minibatch import _build
    args = parse_args(backend, "--epochs", "1", "--model", model, "--dropout", "0")
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    run = prepare_run(args, load_dataset(args.dataset), device)
    return run, _build(run)


def _step_worker(rank, backend, folder):
    from torch.nn.parallel import DistributedDataParallel
    from iognn.distributed.minibatch import require_agreement
    saved = {}
    for model in MINIBATCH_MODELS:
        run, stack = step_setup(backend, model, rank)
        randomness, batch = first_batch(run, rank)
        ddp = DistributedDataParallel(stack, device_ids=[rank] if backend == "nccl" else None)
        optimizer = torch.optim.Adam(ddp.parameters(), lr=0.01)
        assert run_epoch(ddp, optimizer, [batch], randomness, run.device).batches == 1
        saved[model] = {"n_id": batch.n_id.cpu(),
                        "grads": [p.grad.cpu() for p in stack.parameters()],
                        "params": [p.detach().cpu() for p in stack.parameters()]}
    try:
        require_agreement({"nodes": 10, "edges": 20 + rank}, run.device)
    except RuntimeError as error:
        saved["disagreement"] = str(error)
    torch.save(saved, f"{folder}/step{rank}.pt")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_step_averages_the_ranks_batch_gradients(backend, tmp_path):
    spawn(_step_worker, backend, tmp_path)
    ranks = [torch.load(tmp_path / f"step{r}.pt") for r in range(WORLD)]
    for saved in ranks:
        assert saved["disagreement"] == (
            "iognn train --nproc: the processes disagree on edges (20 to 21); every rank must "
            "load the same graph with the same options")
    for model in MINIBATCH_MODELS:
        run, stack = step_setup(backend, model)
        grads = []
        for rank in range(WORLD):  # each rank's batch, re-created here from the same seeds
            _, batch = first_batch(run, rank)
            assert torch.equal(batch.n_id.cpu(), ranks[rank][model]["n_id"])
            stack.zero_grad()
            seed_loss(stack.train(), batch, stack.block_graphs(batch)).backward()
            grads.append([p.grad.clone() for p in stack.parameters()])
        optimizer = torch.optim.Adam(stack.parameters(), lr=0.01)
        for p, *rank_grads in zip(stack.parameters(), *grads):
            p.grad = sum(rank_grads) / WORLD
        optimizer.step()
        assert not torch.equal(grads[0][0], grads[1][0])  # the ranks' batches differ
        for saved in ranks:
            for name in ("grads", "params"):
                expected = [t.detach().cpu() for t in
                            ([p.grad for p in stack.parameters()] if name == "grads"
                             else stack.parameters())]
                for got, want in zip(saved[model][name], expected):
                    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6,
                                               msg=lambda m: f"{model} {name}: {m}")


# ---- a whole run ------------------------------------------------------------------------------
def _train_worker(rank, backend, folder, argv):
    from iognn.distributed.minibatch import train_minibatch_model
    report, model = train_minibatch_model(parse_args(backend, *argv))
    with open(f"{folder}/report{rank}.json", "w") as f:
        json.dump(report, f)
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, f"{folder}/model{rank}.pt")


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_leaves_every_rank_the_same_parameters(backend, tmp_path):
    spawn(_train_worker, backend, tmp_path, ("--epochs", "3", "--model", "sage"))
    reports = [json.loads((tmp_path / f"report{r}.json").read_text()) for r in range(WORLD)]
    models = [torch.load(tmp_path / f"model{r}.pt") for r in range(WORLD)]
    assert models[0].keys() == models[1].keys()
    for name, value in models[0].items():
        assert torch.equal(value, models[1][name]), name
    report = reports[0]
    assert reports[1] == report  # the combined figures: the same on every rank
    assert report["world_size"] == WORLD
    assert report["batches_per_rank"] == [4, 4]  # 393 // 2 = 196 seeds each: 4 batches of 64
    (result,) = report["results"]
    assert result["implementation"] == "iognn" and result["batches"] == 4
    assert len(result["epochs"]) == len(report["epoch_times_s"]) == 3
    assert result["epoch_s"] > 0 and result["sampled_edges"] > 0
    assert result["test_acc"] > 0.1  # 47 classes: chance is about 0.02
    one_process_keys = {"config", "time_metric", "split_metric", "memory_metric", "num_nodes",
                        "num_edges", "results"}
    assert one_process_keys <= report.keys()
    assert "slowest rank" in report["time_metric"]


def test_the_table_names_the_processes():
    from iognn.minibatch import format_table
    result = {"implementation": "iognn", "test_acc": 0.5, "val_acc": 0.5, "best_epoch": 1,
              "epoch_s": 1.0, "sampling_s": 0.5, "transfer_s": 0.0, "compute_s": 0.5,
              "batches": 4, "peak_memory_mib": 1.0, "batch_digest": "x"}
    table = format_table({"time_metric": "epoch s: the slowest rank's", "split_metric": "split",
                          "memory_metric": "peak", "results": [result], "world_size": 2,
                          "batches_per_rank": [4, 4]})
    assert "epoch s: the slowest rank's" in table
    assert "processes: 2 (DistributedDataParallel), 4 batches each per epoch" in table
