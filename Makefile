# gnntrain: set up, run, test, benchmark. Everything runs from the virtual environment $(VENV).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines: torch 2.13.0 must be installed before the project, or pip pulls a CUDA build.
# Where no local CPU wheel exists, point TORCH_PIP_FLAGS at PyTorch's CPU wheel index.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_FLAGS ?=
PYTEST_FLAGS ?=
# every run lists its slowest tests, so a suite that grows slower says where
DURATIONS := --durations=25

.PHONY: install run test test-slow test-all bench measure-links virtual-check predict-check predict-choose scale gpu-check gpu-session zoo compare repro repro-pipegcn repro-bns repro-adaqp repro-gnnpipe repro-hopgnn repro-neutrontp repro-sancus repro-sylvie repro-pipeqs repro-granndis repro-beyond check-tables clean

install: $(BIN)/gnntrain

$(BIN)/gnntrain: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH_PIP_FLAGS) "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[test,ogb]"
	@touch $@

run: install
	$(BIN)/gnntrain

test: install
	WANDB_MODE=disabled $(BIN)/pytest -m "not slow" $(DURATIONS) $(PYTEST_FLAGS)

# The long cases (exactness on Cora, more models for the unbiasedness checks, 4-worker PipeGCN).
test-slow: install
	WANDB_MODE=disabled $(BIN)/pytest -m slow $(DURATIONS) $(PYTEST_FLAGS)

test-all: install
	WANDB_MODE=disabled $(BIN)/pytest $(DURATIONS) $(PYTEST_FLAGS)

bench: install
	WANDB_MODE=disabled $(BIN)/python scripts/bench.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_pipegcn.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_bns.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_adaqp.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_speed.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_parted.py
	WANDB_MODE=disabled $(BIN)/python scripts/bench_trace.py

# The links the virtual clock's validation runs on, measured and written as network presets
# (conf/network/measured_*.yaml: ping-pong and streams over torch.distributed; the kernel-shaped
# ones need root and iproute2; docs/clusters.md). Commit them before make virtual-check.
measure-links: install
	WANDB_MODE=disabled $(BIN)/gnntrain-measure-link network=none --name measured_loopback
	WANDB_MODE=disabled $(BIN)/gnntrain-measure-link network.mode=kernel network.bandwidth_gbps=0.2 --name measured_tcp_0g2
	WANDB_MODE=disabled $(BIN)/gnntrain-measure-link network.mode=kernel network.bandwidth_gbps=1 --name measured_tcp_1g
	WANDB_MODE=disabled $(BIN)/gnntrain-measure-link network.mode=kernel network.bandwidth_gbps=1 network.gpus_per_node=2 cluster.world_size=4 --name measured_tcp_two_level

# The virtual clock against its references: uncontended wall clock, ranks taking turns, TCP over
# kernel-shaped links, BNS-GCN p=0's all-reduce (results/virtual_clock.json; the TCP rows need root
# and iproute2; docs/testing.md).
virtual-check: install
	WANDB_MODE=disabled $(BIN)/python scripts/virtual_clock_check.py

# The predictor against the virtual clock: every strategy x {2, 4} ranks x {fast, slow link} x two
# graphs (results/predict_check.json, results/predict_check.png; docs/usage.md).
predict-check: install
	WANDB_MODE=disabled $(BIN)/python scripts/predict_check.py

# Does the predictor pick the measured best method? 24 settings on the virtual clock, 6 on
# kernel-shaped TCP (root); the regret of its pick beside always vanilla
# (results/predict_choose.json, results/predict_choose.png; docs/testing.md).
predict-choose: install
	WANDB_MODE=disabled $(BIN)/python scripts/predict_choose.py

# The cost ladder from 100k nodes to ogbn-products' size (results/scale.json, results/scale.png;
# about an hour on 2 cores, at most ~22 GiB in use).
scale: install
	WANDB_MODE=disabled $(BIN)/python scripts/scale.py

# On a GPU machine: the CUDA tests, then the GPU bench, in one run (results/bench_gpu.json names
# the card and what passed). A machine with its own CUDA torch and no registry: scripts/gpu_setup.sh
# installs the wheels scripts/gpu_wheels.sh fetched here (docs/testing.md).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-check:
	WANDB_MODE=disabled $(GPU_PYTHON) scripts/gpu_check.py

# On a lent GPU machine, everything in one command under 8 minutes (a 10-minute call with 2 to
# spare): setup, the CUDA tests with the products-size graph prepared beside them, the device
# profile, the bench, products-size on one GPU (results/gpu_session.json; docs/testing.md).
# DRY_RUN=1 prints the plan: each section's budget and time estimate, running nothing on a GPU.
gpu-session:
	WANDB_MODE=disabled $(GPU_PYTHON) scripts/gpu_session.py $(if $(DRY_RUN),--dry-run)

# Every model with its paper's settings on Cora and CiteSeer: 1 worker at seeds 0-4, 2 and 4 workers at
# seed 0 (results/model_zoo.md).
zoo: install
	WANDB_MODE=disabled $(BIN)/python -m gnntrain.repro.zoo

# The papers' tables in shape (results/<paper>/table.md and figures); SCALE=paper runs the
# paper-sized presets on a GPU cluster instead of the CPU-sized ones. DRY_RUN=1 (here and for
# compare) lists the sweeps, their jobs and the wall time their recorded runs suggest, running nothing.
SCALE ?= small
DRY_RUN ?=
repro-pipegcn repro-bns repro-adaqp repro-gnnpipe repro-hopgnn repro-neutrontp repro-sancus repro-sylvie repro-pipeqs repro-granndis: repro-%: install
	WANDB_MODE=disabled $(BIN)/python -m gnntrain.repro $* --scale $(SCALE) $(if $(DRY_RUN),--dry-run)

# The newer methods' headlines in shape (results/neutrontp, sancus, sylvie, pipeqs, granndis).
repro-beyond: repro-neutrontp repro-sancus repro-sylvie repro-pipeqs repro-granndis

repro: repro-pipegcn repro-bns repro-adaqp repro-gnnpipe repro-hopgnn repro-beyond

# Every strategy of every family tuned and compared on time to a validation target under a fast
# and a slow link (results/compare/table.md); SCALE=paper on a GPU cluster.
compare: install
	WANDB_MODE=disabled $(BIN)/python -m gnntrain.repro.compare --scale $(SCALE) $(if $(DRY_RUN),--dry-run)

# Fails when a results/<paper>/table.md is older than the code it measures (rebuild it then).
check-tables: install
	$(BIN)/python -m gnntrain.repro.staleness

clean:
	rm -rf outputs multirun .pytest_cache
