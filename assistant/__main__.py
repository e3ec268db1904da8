"""`python -m assistant` and the console script `triage`: run the triage command line.

A command lives well under a second, and most of its objects (every module, class and function
the command line imports) live as long as the process. The cyclic garbage collector would walk
them again and again while they are imported, a full pass costing 20-30 ms, for nothing: it is
off while the command line loads, and what was loaded is then frozen (kept out of the later
passes; `triage tag` unfreezes it when its run ends) before the collector comes back on for the
command itself.

NumPy's OpenBLAS starts a thread per core when it loads and keeps them spinning after each
product, for products this project keeps too small to share (its matrix-vector products are
einsum's, on one core): one thread, unless the user's environment says otherwise, saved a
command like `show` or `search` 0.13-0.16 s of CPU and 0.05 s of waiting at 10k papers.
"""

import gc
import os


def main() -> None:
    """Load the command line with the collector off, freeze what it loaded, run the command."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads (see above)
    gc.disable()
    try:
        from assistant.cli import entrypoint
    finally:
        gc.freeze()
        gc.enable()
    entrypoint()


if __name__ == "__main__":
    main()
