# The two commands the README opens with: `make run` and `make test`.
# Everything is installed into .venv inside the checkout; every pip call is constrained to
# the CPU build torch==2.13.0 (constraints.txt), so nothing can pull a CUDA torch.
# The `gpu` extra (triton, about 300 MB) lets `make test` check the GPU kernels on the CPU
# through Triton's interpreter.

PYTHON ?= python3.11
VENV := .venv
PIP := $(VENV)/bin/python -m pip install -c constraints.txt
STAMP := $(VENV)/.installed

.PHONY: setup run test bench clean

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

test: setup
	$(VENV)/bin/python -m pytest -q

clean:
	rm -rf $(VENV) .gnnforge_cache "$${GNNFORGE_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/gnnforge}"
