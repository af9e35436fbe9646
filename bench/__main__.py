"""`python -m bench` (./lab bench): the model benchmark, one table, also written to bench/RESULTS.md."""

from bench.bench_model import main

if __name__ == "__main__":
    main()
