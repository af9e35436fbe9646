"""`python -m bench` (./lab bench): the model benchmark, one table, also written to bench/RESULTS.md.

`python -m bench follow [...]` runs bench/bench_follow.py instead (students following a teacher
over the websocket), `python -m bench class [...]` bench/bench_class.py."""

import sys

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("follow", "class"):
        which = sys.argv.pop(1)
        if which == "follow":
            from bench.bench_follow import main
        else:
            from bench.bench_class import main
        main(sys.argv[1:])
    else:
        from bench.bench_model import main
        main()
