"""`python -m gnnforge ...` with glibc's dynamic mmap threshold left on (scale_out.py ranks).

gnnforge's partitioned ranks fix the threshold (gnnforge/distributed/_memory.py); this
entry point runs the same command without that, to measure what fixing it costs and saves.
"""

import sys

import gnnforge.distributed

gnnforge.distributed.fix_mmap_threshold = lambda *args, **kwargs: False

if __name__ == "__main__":
    from gnnforge.cli import main

    sys.exit(main(sys.argv[1:]))
