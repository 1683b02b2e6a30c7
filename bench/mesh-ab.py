#!/usr/bin/python3
"""Two or more builds of Legba side by side on one figure of the mesh:
the time from the processes' start until all 12 streams of a 4-way mesh
of legba-peer processes decode (as bench/run.sh mesh and mesh-loss time
it), the builds taking turns mesh by mesh, in the opposite order every
other turn. Each mesh is cut short once every stream decodes (a window of
1 s, no settling). Prints each build's median, then every build against
the first: the 95% bootstrap interval of the difference of medians and
its verdict (bench/stats.py).

    bench/mesh-ab.py [--meshes N] [--loss P] [--json FILE] NAME=BUILD ...

NAME=BUILD names a build directory (with bench/legba-peer,
tools/legba-server and the plugin built, release type), e.g.
500=build-release 100=/tmp/other/build-release. Builds nothing."""
import argparse
import json
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stats  # noqa: E402
import suites  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", nargs="+", metavar="NAME=BUILD")
    ap.add_argument("--meshes", type=int, default=12,
                    help="meshes per build (default 12)")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="each process drops this share of the RTP "
                    "packets it sends (default 0)")
    ap.add_argument("--json", help="write the series to this file")
    args = ap.parse_args()
    builds = dict(b.split("=", 1) for b in args.builds)
    if len(builds) < 2 or any(not os.path.isdir(d) for d in builds.values()):
        ap.error("give two or more NAME=BUILD, each an existing directory")
    series = {name: [] for name in builds}
    with tempfile.TemporaryDirectory(prefix="legba-mesh-ab-") as workdir:
        for i in range(args.meshes):
            order = list(builds) if i % 2 == 0 else list(reversed(builds))
            for name in order:
                r = suites.Runner(types.SimpleNamespace(
                    build=os.path.abspath(builds[name]), workdir=workdir,
                    smoke=False))
                rec = suites.mesh_run(r, "legba", 4, 1, 0,
                                      f"{name} #{i}", loss=args.loss)
                if "error" not in rec and "all_decoding_s" in rec:
                    series[name].append(rec["all_decoding_s"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loss": args.loss, "series": series}, f, indent=1)
    first = next(iter(builds))
    for name, values in series.items():
        print(f"{name}: median {stats.median(values):.2f} s over "
              f"{len(values)} meshes" if values else f"{name}: no mesh")
    for name in list(builds)[1:]:
        if not series[name] or not series[first]:
            continue
        c = stats.compare(series[name], series[first])
        print(f"{name} against {first}: {c['median']:.2f} against "
              f"{c['baseline_median']:.2f} s, interval [{c['ci'][0]:.2f}, "
              f"{c['ci'][1]:.2f}], {c['verdict']}")
    return 0 if all(series.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
