# The two commands the README opens with: `make run` and `make test`.
# Everything is installed into .venv inside the checkout; every pip call is constrained to
# the CPU build torch==2.13.0 (constraints.txt), so nothing can pull a CUDA torch.
# The `gpu` extra (triton, about 300 MB) lets `make test` check the GPU kernels on the CPU
# through Triton's interpreter.

PYTHON ?= python3.11
VENV := .venv
PIP := $(VENV)/bin/python -m pip install -c constraints.txt
STAMP := $(VENV)/.installed

.PHONY: setup run test benchmarks clean xla-env test-xla

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e '.[chem,pyg,dist,tune,plot,test,gpu]'
	# molsets ships the MOSES SMILES files; we read its data only, so skip its heavy deps.
	$(VENV)/bin/python -m pip install --no-deps molsets==0.3.1
	touch $(STAMP)

run: setup
	$(VENV)/bin/gnnforge train

# lint-imports first: the import contracts in pyproject.toml (one-way layers, no cycles).
test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/python -m pytest -q

# The XLA environment: torch_xla runs on the CPU (PJRT_DEVICE=CPU) and compiles, caches and
# recompiles as on a TPU. It needs torch==2.9.0 (a CUDA build on PyPI, with its nvidia-* wheels),
# so it lives in its own .venv-xla and never touches .venv (README, "XLA").
XLA_VENV := .venv-xla
# --no-cache-dir: the 4.2 GB of wheels are not kept a second time in pip's cache.
XLA_PIP := $(XLA_VENV)/bin/python -m pip install --no-cache-dir -c constraints-xla.txt
XLA_STAMP := $(XLA_VENV)/.installed
# 7.6 GB installed plus the 4.2 GB of wheels pip unpacks from its temporary folder.
XLA_NEEDS_GIB := 12

xla-env: $(XLA_STAMP)

$(XLA_STAMP): pyproject.toml constraints-xla.txt Makefile
	@test -x $(XLA_VENV)/bin/python || { free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	  if [ "$$free" -lt $(XLA_NEEDS_GIB) ]; then \
	    echo "make xla-env: needs about $(XLA_NEEDS_GIB) GiB free on the disk of $$(pwd) (7.6 GB installed, 4.2 GB of downloads); it has $$free GiB" >&2; \
	    exit 1; fi; }
	test -x $(XLA_VENV)/bin/python || $(PYTHON) -m venv $(XLA_VENV)
	$(XLA_PIP) --upgrade pip
	$(XLA_PIP) torch==2.9.0 torch_xla==2.9.0
	$(XLA_PIP) -e '.[chem,test]'
	touch $(XLA_STAMP)

# The tests marked `xla` (tests/xla), on XLA's CPU device.
test-xla: xla-env
	PJRT_DEVICE=CPU $(XLA_VENV)/bin/python -m pytest -q -m xla tests/xla

# Regenerate BENCHMARKS.md (over an hour on 2 cores): `make benchmarks`, with
# PEER_PYTHON=/path/to/venv/bin/python (DGL and PyG) for the peer columns and ONLY=SECTION,...
# to rewrite some sections only (benchmarks/report.py).
benchmarks: setup
	$(VENV)/bin/python benchmarks/report.py $(if $(PEER_PYTHON),--peer-python $(PEER_PYTHON)) $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf $(VENV) $(XLA_VENV) .gnnforge_cache "$${GNNFORGE_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/gnnforge}"
