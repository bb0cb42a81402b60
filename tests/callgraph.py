#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The daemon's file-level call graph, and a ratchet on its cycles.

An edge X -> Y means that X.o leaves undefined a function that Y.o defines
(nm: 'U' in X, 'T' in Y): X calls Y, or takes the address of one of Y's
functions for a table.  The linker resolves exactly these names, so the
graph is the one the compiler saw, with no guessing from the text; static
functions and header inlines stay inside their file and are not edges.

The files of one subsystem (under one header: op.c, op_atomic.c,
op_batch.c, op_park.c) may call each other: a line "group NAME: FILE..."
in the allowed file makes them one node of the graph, named NAME, and the
calls between them are no edges.  A group names files that exist.

The strongly connected components of that graph are the knots between
subsystems.  The allowed file lists, one "x -> y" a line, the edges that
sat on a cycle when it was written.  The check fails when
  - an edge on a cycle is not in that list (a new cycle, or an SCC that
    grew): it prints the edge and the cycle it closes;
  - a listed edge is gone or no longer on a cycle: the list may only shrink,
    so the line must go (--update does it, and refuses to add).
"""
import argparse
import collections
import os
import subprocess
import sys

REMOVE_HINT = (
    "Remove the cycle instead of extending the list: let the lower file "
    "report upward through a hook table that daemon.c fills (as "
    "daemon_hooks does for worker.c), or move the function down to the "
    "file that owns the idea.")


# (x, y) -> the functions of y that x names, for --explain
WHY = collections.defaultdict(set)


def object_name(path):
    """daemon/librmadcore.a.p/peer.c.o, or peer.o, -> peer."""
    base = os.path.basename(path)
    for suffix in (".o", ".obj", ".c"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
    return base


def nm_symbols(paths, nm):
    """{file: (defined functions, undefined symbols)} from nm -A -P."""
    files = collections.defaultdict(lambda: (set(), set()))
    out = subprocess.run([nm, "-A", "-P"] + paths, check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        # "lib.a[peer.c.o]: name T 0 10" (GNU), or "peer.c.o: name U"
        where, _, rest = line.partition(": ")
        fields = rest.split()
        if len(fields) < 2:
            continue
        if where.endswith("]") and "[" in where:
            where = where[where.rindex("[") + 1:-1]
        elif ":" in where:
            where = where.rsplit(":", 1)[1]
        name, kind = fields[0], fields[1]
        defined, undefined = files[object_name(where)]
        if kind == "T":
            defined.add(name)
        elif kind == "U":
            undefined.add(name)
    return files


def collapse(edges, groups):
    """The graph with each group's files as one node, named for it."""
    node = {f: g for g, files in groups.items() for f in files}
    for g, files in groups.items():
        missing = sorted(f for f in files if f not in edges)
        if missing:
            sys.exit(f"callgraph: group {g} names {' '.join(missing)}, "
                     "not a file of the graph")
    out = collections.defaultdict(set)
    for x in edges:
        nx = node.get(x, x)
        out[nx]
        for y in edges[x]:
            ny = node.get(y, y)
            if nx != ny:
                out[nx].add(ny)
                WHY[(nx, ny)] |= WHY.get((x, y), set())
    return out


def graph_from_objects(paths, nm):
    objects = []
    for p in paths:
        if os.path.isdir(p):
            objects += sorted(os.path.join(p, f) for f in os.listdir(p)
                              if f.endswith(".o"))
        else:
            objects.append(p)
    files = nm_symbols(objects, nm)
    owner = {}
    for f, (defined, _) in files.items():
        for sym in defined:
            owner[sym] = f
    edges = collections.defaultdict(set)
    for f, (_, undefined) in files.items():
        edges[f]  # every file is a node, even one with no edges
        for sym in undefined:
            g = owner.get(sym)
            if g is not None and g != f:
                edges[f].add(g)
                WHY[(f, g)].add(sym)
    return edges


def graph_from_text(path):
    edges = collections.defaultdict(set)
    for x, y in read_edges(path):
        edges[x].add(y)
        edges[y]
    return edges


def read_groups(path):
    """{name: [files]} from the "group NAME: FILE..." lines."""
    groups = {}
    with open(path) as fp:
        for n, line in enumerate(fp, 1):
            line = line.split("#", 1)[0].strip()
            if not line.startswith("group "):
                continue
            name, colon, files = line[len("group "):].partition(":")
            if not colon or not name.strip() or len(files.split()) < 2:
                sys.exit(f"callgraph: {path}:{n}: not "
                         f"'group NAME: FILE FILE...': {line}")
            groups[name.strip()] = files.split()
    return groups


def read_edges(path):
    result = []
    with open(path) as fp:
        for n, line in enumerate(fp, 1):
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("group "):
                continue
            x, arrow, y = line.partition("->")
            if not arrow or not x.strip() or not y.strip():
                sys.exit(f"callgraph: {path}:{n}: not 'x -> y': {line}")
            result.append((x.strip(), y.strip()))
    return result


def sccs(edges):
    """Tarjan's algorithm, iterative; components of more than one file."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    comps.sort(key=lambda c: (-len(c), sorted(c)))
    return comps


def cycle_edges(edges, comps):
    where = {f: i for i, c in enumerate(comps) for f in c}
    return {(x, y) for x in edges for y in edges[x]
            if x in where and where.get(y) == where[x]}


def path(edges, start, goal, within):
    """A shortest path start .. goal inside one component (BFS)."""
    prev = {start: None}
    queue = collections.deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            break
        for w in sorted(edges[v]):
            if w in within and w not in prev:
                prev[w] = v
                queue.append(w)
    out, v = [], goal
    while v is not None:
        out.append(v)
        v = prev[v]
    return out[::-1]


def report(edges, comps):
    n_edges = sum(len(v) for v in edges.values())
    print(f"callgraph: {len(edges)} files, {n_edges} cross-file edges, "
          f"{len(comps)} cycle(s) of files")
    for c in comps:
        inner = sum(1 for x in c for y in edges[x] if y in c)
        both = sum(1 for x in c for y in edges[x] if y in c and x < y
                   and x in edges[y])
        print(f"  SCC of {len(c)} files, {inner} edges inside "
              f"({both} pairs both ways): {' '.join(sorted(c))}")


def write_allowed(path, edges_on_cycles, groups):
    with open(path, "w") as fp:
        fp.write("# SPDX-License-Identifier: BSD-2-Clause\n"
                 "# Edges of daemon/'s file call graph that sit on a cycle "
                 "today (tests/callgraph.py).\n"
                 "# This list may only shrink: remove cycles, never add "
                 "lines.  After a refactor that\n"
                 "# removed some, regenerate it with\n"
                 "#   tests/callgraph.sh --update BUILDDIR\n"
                 "# A group is the files of one subsystem, which may call "
                 "each other: one node of\n"
                 "# the graph.  Only files that share the subsystem's "
                 "header and prefix belong in one.\n")
        for g, files in groups.items():
            fp.write(f"group {g}: {' '.join(files)}\n")
        for x, y in sorted(edges_on_cycles):
            fp.write(f"{x} -> {y}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allowed", required=True,
                    help="the list of edges allowed on cycles")
    ap.add_argument("--edges", help="read the graph from 'x -> y' lines "
                    "instead of objects (for testing this script)")
    ap.add_argument("--nm", default=os.environ.get("NM", "nm"))
    ap.add_argument("--update", action="store_true",
                    help="rewrite the allowed list without the edges that "
                    "left the cycles; refuses when a cycle grew")
    ap.add_argument("--explain", action="store_true",
                    help="list each edge on a cycle with the functions it "
                    "names: the map for whoever breaks the cycles")
    ap.add_argument("objects", nargs="*",
                    help="object files, archives, or folders of .o files")
    args = ap.parse_args()

    if args.edges:
        edges = graph_from_text(args.edges)
    elif args.objects:
        edges = graph_from_objects(args.objects, args.nm)
    else:
        ap.error("give objects or --edges")
    if len(edges) < 2:
        sys.exit("callgraph: fewer than two files found; wrong objects?")
    groups = read_groups(args.allowed) if os.path.exists(args.allowed) \
        else {}
    edges = collapse(edges, groups)

    comps = sccs(edges)
    on_cycles = cycle_edges(edges, comps)
    report(edges, comps)
    if args.explain:
        for x, y in sorted(on_cycles):
            back = " (both ways)" if x in edges[y] else ""
            print(f"  {x} -> {y}{back}: {' '.join(sorted(WHY[(x, y)]))}")

    if args.update and not os.path.exists(args.allowed):
        write_allowed(args.allowed, on_cycles, groups)
        print(f"callgraph: wrote {len(on_cycles)} edges to {args.allowed}")
        return 0
    allowed = set(read_edges(args.allowed))
    comp_of = {f: c for c in comps for f in c}

    new = sorted(on_cycles - allowed)
    for x, y in new:
        cycle = path(edges, y, x, comp_of[x])
        print(f"callgraph: new edge on a cycle: {x} -> {y}")
        print(f"  it closes: {' -> '.join([x] + cycle)}")
    if new:
        print(f"callgraph: {len(new)} edge(s) make a new cycle or enlarge "
              f"one. {REMOVE_HINT} Do not add them to {args.allowed}.")
        return 1

    gone = sorted(allowed - on_cycles)
    if gone and args.update:
        write_allowed(args.allowed, on_cycles, groups)
        print(f"callgraph: {args.allowed}: {len(gone)} edge(s) off the "
              f"cycles, removed; {len(on_cycles)} left")
        return 0
    for x, y in gone:
        state = "no longer on a cycle" if y in edges.get(x, ()) else "gone"
        print(f"callgraph: allowed edge {x} -> {y} is {state}")
    if gone:
        print(f"callgraph: good, {len(gone)} edge(s) left the cycles; the "
              f"list only shrinks, so take them out of {args.allowed}: "
              "tests/callgraph.sh --update BUILDDIR")
        return 1
    print(f"callgraph: {len(on_cycles)} edges on cycles, all of them "
          f"already listed in {os.path.basename(args.allowed)}; none new")
    return 0


if __name__ == "__main__":
    sys.exit(main())
